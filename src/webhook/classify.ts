// Intake filters as pure decisions (spec §5.1 step 4). The route stores an `ignored` outcome with
// its reason and answers 200 `{status:"ignored", reason}`. Reasons are stable snake_case codes.
//
// Order in the route: verify signature → `classifyEvent(headers)` (before parsing, so a push or a
// review comment is ignored rather than rejected as an invalid comment payload) → `normalizeComment`
// → `classifyComment` → authorisation (`authorize-actor.ts`).
import { getHeader, type WebhookHeaders } from './headers.js';
import type { CommentEventType, NormalizedComment } from './normalize-comment.js';
import { parseCommand, type ParsedCommand } from './mention.js';

export { findMentions, mentionsBot, parseCommand, visibleProse, type ParsedCommand } from './mention.js';

export type IgnoreReason =
  | 'unsupported_event'
  | 'edited_comment'
  | 'deleted_comment'
  | 'unsupported_action'
  | 'bot_self_comment'
  | 'no_mention';

export type EventDecision =
  | { ok: true; eventType: CommentEventType }
  | { ok: false; outcome: 'ignored'; reason: 'unsupported_event' }
  | { ok: false; outcome: 'invalid'; code: 'invalid_payload'; issues: string };

export type CommentDecision =
  | { outcome: 'accept'; command: ParsedCommand }
  | { outcome: 'ignored'; reason: Exclude<IgnoreReason, 'unsupported_event'> };

/**
 * Only issue and PR *conversation* comments (review deliveries are src/webhook/review-event.ts's, taken before this by
 * intake when it can read Gitea's review API; without it they stay `unsupported_event`): `X-Gitea-Event: issue_comment` with
 * `X-Gitea-Event-Type` `issue_comment` or `pull_request_comment`. Everything else Gitea sends
 * (push, `pull_request_comment`/`pull_request_review_comment` review events, …) → ignored
 * `unsupported_event`. A missing `X-Gitea-Event` or `X-Gitea-Event-Type` header → `invalid_payload`
 * (Gitea always sends both; we cannot tell what the body is without them).
 */
export function classifyEvent(headers: WebhookHeaders): EventDecision {
  const event = getHeader(headers, 'x-gitea-event')?.trim();
  const eventType = getHeader(headers, 'x-gitea-event-type')?.trim();
  if (event === undefined || event === '') {
    return { ok: false, outcome: 'invalid', code: 'invalid_payload', issues: 'missing X-Gitea-Event header' };
  }
  if (eventType === undefined || eventType === '') {
    return { ok: false, outcome: 'invalid', code: 'invalid_payload', issues: 'missing X-Gitea-Event-Type header' };
  }
  if (event !== 'issue_comment') return { ok: false, outcome: 'ignored', reason: 'unsupported_event' };
  if (eventType !== 'issue_comment' && eventType !== 'pull_request_comment') {
    return { ok: false, outcome: 'ignored', reason: 'unsupported_event' };
  }
  return { ok: true, eventType };
}

/**
 * Edit policy: **only newly created comments trigger a task. Edits never do** — not even an edit
 * that adds the bot mention, and not an edit of a comment that already triggered one (the original
 * instruction stands; re-running on every typo fix would duplicate work and replies). To ask again,
 * post a new comment. `edited` → ignored `edited_comment`; `deleted` → ignored `deleted_comment`
 * (a running task is not cancelled by deleting its comment: use `@bot stop`); any other action →
 * ignored `unsupported_action`.
 */
export const EDITED_COMMENT_POLICY = 'edits_never_trigger' as const;

/**
 * Action → bot self-comment → mention, in that order. `botLogin` is the bot's Gitea login
 * (configured or learned from `GET /user`); comparison is case-insensitive, as Gitea logins are.
 */
export function classifyComment(comment: NormalizedComment, botLogin: string): CommentDecision {
  if (comment.action !== 'created') {
    if (comment.action === 'edited') return { outcome: 'ignored', reason: 'edited_comment' };
    if (comment.action === 'deleted') return { outcome: 'ignored', reason: 'deleted_comment' };
    return { outcome: 'ignored', reason: 'unsupported_action' };
  }
  if (isBotSelf(comment.actor.login, botLogin)) return { outcome: 'ignored', reason: 'bot_self_comment' };
  const command = parseCommand(comment.comment.body, botLogin);
  if (command === null) return { outcome: 'ignored', reason: 'no_mention' };
  return { outcome: 'accept', command };
}

/** `sender.login` equals the bot login, case-insensitively (Gitea users carry no `type` field). */
export function isBotSelf(login: string, botLogin: string): boolean {
  return botLogin !== '' && login.toLowerCase() === botLogin.toLowerCase();
}
