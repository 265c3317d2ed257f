/**
 * Reading the bot's own comments back from Gitea: the one place that answers "which comment did the
 * bot post on this issue with this marker since T?" for receipts (adopt a receipt an earlier attempt
 * posted), verification (did the reply land?) and restart recovery (was an interrupted turn
 * answered?). The decision (`botCommentsWithMarker`, `sinceFilter`) is pure; `listBotComments` is
 * the only I/O.
 *
 * A comment counts only when its author is the bot (case-insensitive, as Gitea logins are) AND its
 * body carries the exact marker: a marker quoted by another user proves nothing.
 *
 * Paging: none. `GET /repos/{owner}/{repo}/issues/{index}/comments` answers every comment updated
 * since `since` in one list (no `page`/`limit`, unlike the repo-wide endpoint), so the `since`
 * filter is what keeps the list short.
 */
import type { GiteaClient, GiteaComment } from './gitea-client.js';

/**
 * How far before the moment of interest to ask from. Gitea filters `since` on `updated_at` in whole
 * seconds of its own clock; a wide window only lists more comments, the marker does the matching.
 */
export const BOT_COMMENT_SINCE_MARGIN_MS = 5 * 60_000;

/** The issue or pull request whose comments are read (PRs share the issue endpoint). */
export interface CommentThread {
  owner: string;
  repo: string;
  /** The issue or pull-request number. */
  issue: number;
}

export interface BotCommentQuery extends CommentThread {
  /** The login the bot posts as. */
  botLogin: string;
  /** True when a body carries the marker being looked for (e.g. `hasReceiptMarker`, `hasMarker`). */
  hasMarker: (body: string) => boolean;
  /** The moment of interest (a row's creation, a turn's start); the margin is subtracted from it. */
  since: Date | number;
  /** Default BOT_COMMENT_SINCE_MARGIN_MS. */
  sinceMarginMs?: number;
}

/** The `since` Gitea is asked with: the moment of interest minus the margin. */
export function sinceFilter(since: Date | number, marginMs: number = BOT_COMMENT_SINCE_MARGIN_MS): Date {
  const at = typeof since === 'number' ? since : since.getTime();
  return new Date(at - marginMs);
}

/** The bot's comments carrying the marker, earliest first (created time, then id): the first is the one that counts. */
export function botCommentsWithMarker(
  comments: readonly GiteaComment[],
  botLogin: string,
  hasMarker: (body: string) => boolean,
): GiteaComment[] {
  const bot = botLogin.toLowerCase();
  return comments
    .filter((c) => c.user.login.toLowerCase() === bot && hasMarker(c.body))
    .sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at) || a.id - b.id);
}

/** Lists the thread's comments since the query's moment (minus the margin) and keeps the bot's with the marker. Throws what Gitea throws. */
export async function listBotComments(gitea: Pick<GiteaClient, 'listIssueComments'>, query: BotCommentQuery): Promise<GiteaComment[]> {
  const since = sinceFilter(query.since, query.sinceMarginMs);
  const comments = await gitea.listIssueComments(query.owner, query.repo, query.issue, { since });
  return botCommentsWithMarker(comments, query.botLogin, query.hasMarker);
}

/** The thread a task's comments go to. */
export function threadOf(task: { owner: string; repo: string; resource: { number: number } }): CommentThread {
  return { owner: task.owner, repo: task.repo, issue: task.resource.number };
}
