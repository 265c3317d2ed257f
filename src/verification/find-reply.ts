import { hasMarker, type MarkerFields } from '../domain/marker.js';
import { botCommentsWithMarker } from '../gitea/bot-comments.js';
import type { GiteaComment } from '../gitea/gitea-client.js';

export interface ReplyMatch {
  /** The earliest bot comment carrying exactly this attempt's marker: the one that counts. */
  first: GiteaComment | undefined;
  /** Later bot comments with the same marker (the agent posted twice); left in place, audited. */
  extras: GiteaComment[];
}

/**
 * Which comments prove the reply landed: author = the bot AND the exact task/turn/resource marker
 * (src/gitea/bot-comments.ts). A marker quoted by another user, or the bot's comment for another
 * task or turn, proves nothing.
 */
export function findReplyComments(comments: readonly GiteaComment[], botLogin: string, marker: MarkerFields): ReplyMatch {
  return replyMatchOf(botCommentsWithMarker(comments, botLogin, (body) => hasMarker(body, marker)));
}

/** The bot's comments with the marker, earliest first (as `botCommentsWithMarker` orders them): the first counts. */
export function replyMatchOf(matching: readonly GiteaComment[]): ReplyMatch {
  return { first: matching[0], extras: matching.slice(1) };
}
