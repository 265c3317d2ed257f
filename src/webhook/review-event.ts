// Gitea's review deliveries → a normalised review event. Pure.
//
// Recorded from a real Gitea 1.26.3 (test/fixtures/gitea/webhooks/review_*): a new line comment (the web
// UI's "Add single comment", or a review through the API) and a submitted review both arrive as
// `X-Gitea-Event-Type: pull_request_review_comment` (approve: `…_approved`, request changes:
// `…_rejected`), a `PullRequestPayload` with `action: "reviewed"` and `review: {type, content}` — the
// review's body, empty for a single line comment. It names neither the review's id nor its line
// comments: intake reads both back from Gitea's review API (review-tasks.ts). A reply in a line thread
// is an ordinary `pull_request_comment` (normalize-comment.ts) without file, line or hunk.
//
// Trust as for comments: the body is signed, the headers are not, so the signed `review.type` must
// agree with the header; and nothing here is acted on before Gitea confirmed it.
import { z } from 'zod';
import { getHeader, type WebhookHeaders } from './headers.js';
import { payloadJson } from './payload-json.js';
import {
  INSTANCE_ID,
  PullRequestSchema,
  RepositorySchema,
  repositoryOf,
  UserSchema,
  formatIssues,
  isValidDeliveryId,
  type NormalizedComment,
} from './normalize-comment.js';

export const REVIEW_EVENT_TYPES = ['pull_request_review_comment', 'pull_request_review_approved', 'pull_request_review_rejected'] as const;
export type ReviewEventType = (typeof REVIEW_EVENT_TYPES)[number];

/** Gitea's review state (`PullReview.state`) each delivery kind is sent for. */
export const REVIEW_STATE: Record<ReviewEventType, string> = {
  pull_request_review_comment: 'COMMENT',
  pull_request_review_approved: 'APPROVED',
  pull_request_review_rejected: 'REQUEST_CHANGES',
};

/** The review kind the unsigned header names, or null for any other delivery. */
export function reviewEventType(headers: WebhookHeaders): ReviewEventType | null {
  const t = getHeader(headers, 'x-gitea-event-type')?.trim();
  return (REVIEW_EVENT_TYPES as readonly string[]).includes(t ?? '') ? (t as ReviewEventType) : null;
}

export interface NormalizedReview {
  deliveryId: string;
  deliveryKey: string;
  eventType: ReviewEventType;
  action: string;
  /** What the payload says the review's body is (compared with Gitea's to find the review). */
  content: string;
  repo: NormalizedComment['repo'];
  repoKey: string;
  resource: { kind: 'pull_request'; number: number; title: string; htmlUrl: string };
  resourceKey: string;
  /** Who opened the pull request, as the payload says (the option "request changes on the bot's PR" asks Gitea again). */
  pullRequestAuthor: string;
  actor: { login: string; isBot: boolean; id?: number };
  refs: { base: string; head: string; headSha: string };
}

const ReviewPayloadSchema = z.object({
  action: z.string().regex(/^[a-z_]{1,32}$/, 'invalid action'),
  number: z.number().int().positive(),
  pull_request: PullRequestSchema.extend({
    title: z.string().optional(),
    html_url: z.string().optional(),
    user: z.object({ login: z.string() }),
  }),
  repository: RepositorySchema,
  sender: UserSchema,
  review: z.object({ type: z.string(), content: z.string() }),
});


export type NormalizeReviewResult = { ok: true; value: NormalizedReview } | { ok: false; code: 'invalid_payload'; issues: string };

export function normalizeReview(headers: WebhookHeaders, json: Buffer | string | unknown, options: { botLogin?: string } = {}): NormalizeReviewResult {
  const bad = (issues: string): NormalizeReviewResult => ({ ok: false, code: 'invalid_payload', issues });
  const deliveryId = getHeader(headers, 'x-gitea-delivery')?.trim();
  if (deliveryId === undefined || !isValidDeliveryId(deliveryId)) return bad('missing or malformed X-Gitea-Delivery header');
  const eventType = reviewEventType(headers);
  if (eventType === null) return bad('X-Gitea-Event-Type is not a review event');
  const body = payloadJson(json);
  if (!body.ok) return bad('body is not valid UTF-8 JSON');
  const parsed = ReviewPayloadSchema.safeParse(body.data);
  if (!parsed.success) return bad(formatIssues(parsed.error));
  const p = parsed.data;
  if (p.review.type !== eventType) return bad('X-Gitea-Event-Type does not match review.type');
  const owner = p.repository.owner.login;
  const name = p.repository.name;
  if (p.repository.full_name !== `${owner}/${name}`) return bad('repository.full_name does not match owner/name');
  if (p.pull_request.number !== p.number) return bad('pull_request.number does not match number');
  const repoKey = `${INSTANCE_ID}:${owner}/${name}`;
  const login = p.sender.login;
  const bot = options.botLogin ?? '';
  const value: NormalizedReview = {
    deliveryId,
    deliveryKey: `${INSTANCE_ID}:${deliveryId}`,
    eventType,
    action: p.action,
    content: p.review.content,
    repo: repositoryOf(p.repository),
    repoKey,
    resource: { kind: 'pull_request', number: p.number, title: p.pull_request.title ?? '', htmlUrl: p.pull_request.html_url ?? '' },
    resourceKey: `${repoKey}:pull_request:${p.number}`,
    pullRequestAuthor: p.pull_request.user.login,
    actor: { login, isBot: bot !== '' && login.toLowerCase() === bot.toLowerCase() },
    refs: { base: p.pull_request.base.ref, head: p.pull_request.head.ref, headSha: p.pull_request.head.sha },
  };
  if (typeof p.sender.id === 'number' && p.sender.id > 0) value.actor.id = p.sender.id;
  // `repository.permissions` is not the sender's here: Gitea 1.26.3 builds a review delivery's repository
  // with no access at all (`{admin:false, push:false, pull:false}` even for the owner, recorded), so it is
  // no hint and is dropped; the write check asks Gitea's permission API (authorize-actor.ts).
  return { ok: true, value };
}
