// What a review delivery becomes, decided from what Gitea's review API answered. Pure: the
// lookups are the caller's (review-handler.ts).
//
// - The review is found on Gitea, not taken from the payload: the latest review on that pull request by
//   the sender, in the state the delivery names, with the body the payload names. None → refused (as a
//   comment Gitea does not have).
// - A review whose BODY mentions the bot → ONE task, "address this review": its body and every line
//   comment with file, line, side and hunk. Deduplicated by the review id.
// - Otherwise each line comment that mentions the bot → one task (deduplicated by its comment id, as a
//   conversation comment is: a Replay is a duplicate).
// - Optional per repository (`reviewRequestChanges`, off by default): a "request changes" review on a
//   pull request the bot opened → one task without a mention. Whether the reviewer may trigger work is
//   the usual write-access check, done by the caller.
// - A `@bot stop` in a line comment is not a stop (stop from the conversation); a line comment by
//   another user than the review's is never read as the reviewer's.
import { lineRef, renderLineComment, renderReview, type ReviewContext, type ReviewLine } from '../domain/review-input.js';
import { parseCommand } from '../webhook/mention.js';
import type { NormalizedComment } from '../webhook/normalize-comment.js';
import { REVIEW_STATE, type NormalizedReview } from '../webhook/review-event.js';

export interface GiteaReviewFacts {
  id: number;
  body: string;
  state: string;
  user: { id: number; login: string };
  submittedAt: string;
  htmlUrl: string;
  commitId: string;
  dismissed: boolean;
}

export interface GiteaReviewCommentFacts {
  id: number;
  body: string;
  user: { id: number; login: string };
  path: string;
  position: number;
  originalPosition: number;
  diffHunk: string;
  htmlUrl: string;
  commitId: string;
  createdAt: string;
  updatedAt: string;
  reviewId: number;
}

/** One task to create: the comment it stands for (its text is the rendered input) and its dedup key. */
export interface ReviewItem {
  triggerKey: string;
  /** Suffix of the delivery key, so that one delivery can create several tasks with their own ids. */
  part: string;
  comment: NormalizedComment;
}

export type ReviewDecision =
  | { kind: 'refused'; reason: 'not_found' | 'author' }
  | { kind: 'ignored'; reason: 'no_mention' | 'bot_self_comment' }
  | { kind: 'items'; items: ReviewItem[] };

/**
 * The latest review by the sender in the delivery's state with the delivery's body, or null. `sameBody`:
 * how the body is compared (a waiting review keeps only its hash: pending-intake.ts); default, equal text.
 */
export function matchReview(r: NormalizedReview, reviews: readonly GiteaReviewFacts[], sameBody: (body: string) => boolean = (b) => b === r.content): GiteaReviewFacts | null {
  const state = REVIEW_STATE[r.eventType];
  const login = r.actor.login.toLowerCase();
  const found = reviews.filter((x) => x.state === state && !x.dismissed && x.user.login.toLowerCase() === login && sameBody(x.body) && (r.actor.id === undefined || x.user.id === r.actor.id));
  return found.reduce<GiteaReviewFacts | null>((best, x) => (best === null || x.id > best.id ? x : best), null);
}

export function reviewLine(c: GiteaReviewCommentFacts): ReviewLine {
  const onNew = c.position > 0;
  return {
    commentId: c.id,
    path: c.path,
    line: onNew ? c.position : c.originalPosition,
    side: onNew ? 'new' : 'old',
    diffHunk: c.diffHunk,
    body: c.body,
    author: c.user.login,
    htmlUrl: c.htmlUrl,
    commitId: c.commitId,
  };
}

export interface ReviewOptions {
  botLogin: string;
  /** The repository's `reviewRequestChanges` setting. */
  requestChangesStartsTask: boolean;
  /** Who opened the pull request, as Gitea says (asked only when the option is on). */
  pullRequestAuthor?: string | undefined;
}

export function decideReview(r: NormalizedReview, review: GiteaReviewFacts | null, comments: readonly GiteaReviewCommentFacts[], o: ReviewOptions): ReviewDecision {
  const bot = o.botLogin.toLowerCase();
  if (r.actor.login.toLowerCase() === bot && bot !== '') return { kind: 'ignored', reason: 'bot_self_comment' };
  if (review === null) return { kind: 'refused', reason: 'not_found' };
  const own = comments.filter((c) => c.reviewId === review.id && c.user.login.toLowerCase() === review.user.login.toLowerCase());
  const lines = own.map(reviewLine).sort((a, b) => a.commentId - b.commentId);
  const bodyCommand = review.body === '' ? null : parseCommand(review.body, o.botLogin);
  const requestChanges =
    o.requestChangesStartsTask && review.state === 'REQUEST_CHANGES' && o.pullRequestAuthor !== undefined && o.pullRequestAuthor.toLowerCase() === bot;
  if (bodyCommand?.kind === 'instruction' || requestChanges) {
    const context: ReviewContext = {
      kind: 'review',
      reviewId: review.id,
      reviewState: review.state,
      reviewUrl: review.htmlUrl,
      trigger: bodyCommand?.kind === 'instruction' ? 'mention' : 'request_changes',
      lines: lines.map(lineRef),
    };
    const body = renderReview({ author: review.user.login, state: review.state, body: review.body }, lines);
    return {
      kind: 'items',
      items: [{ triggerKey: `${r.repoKey}:review:${review.id}:submitted`, part: `r${review.id}`, comment: asComment(r, review, { id: review.id, body, at: review.submittedAt, htmlUrl: review.htmlUrl }, context) }],
    };
  }
  const items: ReviewItem[] = [];
  for (const line of lines) {
    const raw = own.find((c) => c.id === line.commentId)!;
    if (parseCommand(raw.body, o.botLogin)?.kind !== 'instruction') continue;
    const context: ReviewContext = { kind: 'line_comment', reviewId: review.id, reviewState: review.state, reviewUrl: review.htmlUrl, trigger: 'mention', lines: [lineRef(line)] };
    const comment = asComment(r, review, { id: raw.id, body: renderLineComment(line), at: raw.createdAt, updatedAt: raw.updatedAt, htmlUrl: raw.htmlUrl }, context);
    // The key of a conversation comment's trigger (`commentTriggerKey`): both are rows of Gitea's one comment table.
    items.push({ triggerKey: `${r.repoKey}:comment:${raw.id}:created:${comment.comment.updatedAt}`, part: `c${raw.id}`, comment });
  }
  return items.length === 0 ? { kind: 'ignored', reason: 'no_mention' } : { kind: 'items', items };
}

/**
 * A reply in a line thread (an ordinary PR comment to Gitea's webhooks) with its line read back: the same
 * comment and trigger, its text Gitea's reply rendered with the file, line, side and hunk. The reply is
 * the thread's; its author and text must be the confirmed comment's, or it stays a plain comment.
 */
export function asLineReply(c: NormalizedComment, line: GiteaReviewCommentFacts): NormalizedComment {
  if (line.id !== c.comment.id || line.body !== c.comment.body || line.user.login.toLowerCase() !== c.actor.login.toLowerCase()) return c;
  const l = reviewLine(line);
  const context: ReviewContext = { kind: 'line_comment', reviewId: line.reviewId, reviewState: 'COMMENT', reviewUrl: line.htmlUrl, trigger: 'mention', lines: [lineRef(l)] };
  return { ...c, comment: { ...c.comment, body: renderLineComment(l) }, review: context };
}

function iso(value: string): string {
  const t = new Date(value);
  if (Number.isNaN(t.getTime())) return value;
  const s = t.toISOString();
  return s.endsWith('.000Z') ? s.slice(0, -5) + 'Z' : s;
}

/** The review (or one line comment of it) in the form the rest of intake takes: Gitea's words, the author Gitea names. */
export function asComment(
  r: NormalizedReview,
  review: GiteaReviewFacts,
  c: { id: number; body: string; at: string; updatedAt?: string; htmlUrl: string },
  context: ReviewContext,
): NormalizedComment {
  const value: NormalizedComment = {
    instanceId: 'default',
    deliveryId: r.deliveryId,
    deliveryKey: r.deliveryKey,
    eventType: 'pull_request_comment',
    action: 'created',
    repo: { ...r.repo },
    repoKey: r.repoKey,
    resource: { ...r.resource },
    resourceKey: r.resourceKey,
    comment: { id: c.id, body: c.body, createdAt: iso(c.at), updatedAt: iso(c.updatedAt ?? c.at), htmlUrl: c.htmlUrl },
    actor: { login: review.user.login, isBot: false, id: review.user.id },
    refs: { ...r.refs },
    review: context,
  };
  return value;
}
