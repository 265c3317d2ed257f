/**
 * Restart recovery asks this before running an interrupted turn again (the task effects'
 * `replyExists`): did the bot already post the answer of that turn? Read back from Gitea by the
 * turn's marker since the turn started (src/gitea/bot-comments.ts). Throws what Gitea throws; the
 * executor counts an unknown answer as "maybe answered" and lets verification decide.
 */
import { hasMarker, parseMarkers } from '../domain/marker.js';
import type { TaskRecord, TurnRecord } from '../domain/records.js';
import { listBotComments, threadOf } from '../gitea/bot-comments.js';
import type { GiteaClient } from '../gitea/gitea-client.js';

export interface ReplyExistsOptions {
  gitea: Pick<GiteaClient, 'listIssueComments'>;
  botLogin: string;
  /** Subtracted from the turn's start for Gitea's `since` filter; default the bot-comments margin. */
  sinceMarginMs?: number;
}

export type ReplyExists = (task: TaskRecord, turn: TurnRecord) => Promise<boolean>;

export function replyExistsOnGitea(options: ReplyExistsOptions): ReplyExists {
  return async (task, turn) => {
    const marker = parseMarkers(turn.marker)[0];
    // A turn without a marker cannot be recognised on Gitea: it did not answer as far as we can tell.
    if (!marker) return false;
    const found = await listBotComments(options.gitea, {
      ...threadOf(task),
      botLogin: options.botLogin,
      hasMarker: (body) => hasMarker(body, marker),
      since: Date.parse(turn.startedAt),
      sinceMarginMs: options.sinceMarginMs,
    });
    return found.length > 0;
  };
}
