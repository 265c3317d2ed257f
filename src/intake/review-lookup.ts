// What Gitea's review API says about a review delivery: the review found (by sender, state and
// the hash of the body the payload names), its line comments, the pull request's author when the
// repository's "request changes" option needs it, and the reviewer's write access — then what that makes
// (review-tasks.ts). A 404 is a clear "no" (refused); any other failure is no answer (undecided: the
// delivery waits in pending_intake). The lookups are the caller's; this only orders and reads them.
import type { AuthorizeResult } from '../webhook/authorize-actor.js';
import type { NormalizedComment } from '../webhook/normalize-comment.js';
import type { NormalizedReview } from '../webhook/review-event.js';
import { describeLookupError, isClearNo, sha256Hex } from './confirm-comment.js';
import type { Plan } from './intake-types.js';
import { decideReview, matchReview, type GiteaReviewCommentFacts, type GiteaReviewFacts, type ReviewItem } from './review-tasks.js';
import { withTimeout } from './with-timeout.js';

/** Gitea's review API as intake reads it (src/gitea/review-on-gitea.ts). */
export interface ReviewReader {
  reviews(owner: string, repo: string, index: number): Promise<GiteaReviewFacts[]>;
  comments(owner: string, repo: string, index: number, reviewId: number): Promise<GiteaReviewCommentFacts[]>;
  pullRequestAuthor(owner: string, repo: string, index: number): Promise<string>;
  /** A PR comment's line when it is a reply in a line thread, else null (its line context for the agent). */
  lineOf?(owner: string, repo: string, index: number, commentId: number): Promise<GiteaReviewCommentFacts | null>;
}

/** What Gitea's review API said about a review delivery. */
export type ReviewVerdict =
  | { kind: 'refused'; reasons: string[] }
  | { kind: 'undecided'; error: string }
  | { kind: 'ignored'; reason: string }
  | { kind: 'items'; items: ReviewItem[]; plan: Plan };

export interface ReviewLookupDeps {
  reader: () => ReviewReader;
  botLogin: string;
  /** Each lookup slower than this counts as failed (no answer). */
  timeoutMs: number;
  authorize: (c: NormalizedComment) => Promise<AuthorizeResult>;
  /** The repository's `reviewRequestChanges` setting. */
  requestChangesStartsTask: (c: NormalizedComment) => boolean | Promise<boolean>;
}

/** `c`: the review as a comment (its repository as stored); `bodySha256`: the hash of the review body the payload names. */
export async function lookUpReview(deps: ReviewLookupDeps, r: NormalizedReview, c: NormalizedComment, bodySha256: string): Promise<ReviewVerdict> {
  const review = deps.reader();
  const { owner, name } = c.repo;
  const n = c.resource.number;
  const bounded = <T>(p: Promise<T>, what: string) => withTimeout(p, deps.timeoutMs, what);
  const undecidedOr = (error: unknown): ReviewVerdict =>
    isClearNo(error) ? { kind: 'refused', reasons: ['not_found'] } : { kind: 'undecided', error: `review lookup: ${describeLookupError(error)}` };
  const [reviews, auth] = await Promise.all([
    bounded(review.reviews(owner, name, n), 'review lookup').then((v) => ({ ok: true as const, v }), (error: unknown) => ({ ok: false as const, error })),
    deps.authorize(c),
  ]);
  if (!reviews.ok) return undecidedOr(reviews.error);
  if (!auth.allowed && auth.reason === 'permission_check_failed') return { kind: 'undecided', error: `permission lookup: ${describeLookupError(auth.error)}` };
  // By hash: a waiting review keeps no text (pending-intake.ts).
  const match = matchReview(r, reviews.v, (body) => sha256Hex(body) === bodySha256);
  const requestChanges = await deps.requestChangesStartsTask(c);
  let comments: GiteaReviewCommentFacts[] = [];
  let author: string | undefined;
  try {
    if (match !== null) comments = await bounded(review.comments(owner, name, n, match.id), 'review comments lookup');
    if (match !== null && requestChanges && match.state === 'REQUEST_CHANGES') author = await bounded(review.pullRequestAuthor(owner, name, n), 'pull request lookup');
  } catch (error) {
    return undecidedOr(error);
  }
  const decision = decideReview(r, match, comments, { botLogin: deps.botLogin, requestChangesStartsTask: requestChanges, pullRequestAuthor: author });
  if (decision.kind === 'refused') return { kind: 'refused', reasons: [decision.reason] };
  if (decision.kind === 'ignored') return decision;
  return { kind: 'items', items: decision.items, plan: auth.allowed ? { kind: 'accept' } : { kind: 'reject', reason: auth.reason, reader: 'readerOnly' in auth && auth.readerOnly === true } };
}
