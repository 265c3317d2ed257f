import { hasMarker, type MarkerFields } from '../domain/marker.js';
import type { GiteaComment } from '../gitea/gitea-client.js';

export interface ReplyMatch {
  /** The earliest bot comment carrying exactly this attempt's marker: the one that counts. */
  first: GiteaComment | undefined;
  /** Later bot comments with the same marker (the agent posted twice); left in place, audited. */
  extras: GiteaComment[];
}

/**
 * Which comments prove the reply landed: author = the bot (case-insensitive, as Gitea logins are)
 * AND the exact task/turn/resource marker. A marker quoted by another user, or the bot's comment
 * for another task or turn, proves nothing.
 */
export function findReplyComments(comments: readonly GiteaComment[], botLogin: string, marker: MarkerFields): ReplyMatch {
  const bot = botLogin.toLowerCase();
  const matching = comments
    .filter((c) => c.user.login.toLowerCase() === bot && hasMarker(c.body, marker))
    .sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at) || a.id - b.id);
  return { first: matching[0], extras: matching.slice(1) };
}
