// A comment Gitea has not decided on yet. When the comment lookup or the
// permission lookup fails for a passing reason (5xx, a timeout, Gitea down, the bot's token refused),
// the comment is neither run on the payload's word nor refused for good: it waits in
// `pending_intake`, one record per comment (keyed by its trigger key, so a Replay finds it), and the
// retry loop (pending-retry-loop.ts) asks Gitea again with backoff. Only when Gitea has decided is the
// task written, in the same transaction that removes the record. Pure: times come in as arguments.
//
// The record holds no comment text — only its hash and length: the text the agent receives is the one
// read back from Gitea when it decides (confirm-comment.ts), so a waiting comment costs ≈ 1–2 KB
// whatever its size, and at most `maxPending` wait (then 503: nothing is stored, Gitea shows the
// delivery as failed, and its Replay is decided then).
//
// A review delivery waits the same way when Gitea's review API cannot answer now: its record
// is keyed by the review delivery's payload (which names no review id; a Replay has the same bytes)
// and holds the normalised review (its body removed, as a comment's) so that the retry can look the
// review up again and make the tasks it stands for.
import type { NormalizedComment } from '../webhook/normalize-comment.js';
import type { NormalizedReview } from '../webhook/review-event.js';

export const PENDING_INTAKE = 'pending_intake' as const;

export interface PendingIntakeRecord {
  /** The comment's trigger key (`<repoKey>:comment:<id>:<action>:<updatedAt>`). */
  key: string;
  /** `waiting`: retried at `nextAttemptAt`; `gave_up`: the bound was reached — only a Replay decides it now. */
  state: 'waiting' | 'gave_up';
  /** The delivery the comment came in (the task id derives from it). */
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  payloadHash: string;
  receivedAt: string;
  /** The normalised comment with its text removed (`comment.body` is `''`); for a review, the review as one. */
  comment: NormalizedComment;
  /** A review delivery's normalised review with its body removed (`content` is `''`); absent for a comment. */
  review?: NormalizedReview;
  bodySha256: string;
  bodyChars: number;
  /** What the mention asks: a task, or `stop`. */
  command: 'task' | 'stop';
  /** The TCP peer of the delivery (a refusal's security event is counted under it). */
  source: string | null;
  attempts: number;
  firstAttemptAt: string;
  lastAttemptAt: string;
  /** null once given up. */
  nextAttemptAt: string | null;
  /** Why the last attempt did not decide (bounded, secret-free). */
  lastError: string;
}

export interface RetryPolicy {
  /** Attempts in all, the first at intake included. */
  maxAttempts: number;
  /** Delay after the first failed attempt; doubles each time. */
  baseDelayMs: number;
  /** The longest delay between two attempts. */
  maxDelayMs: number;
}

/** 10 attempts: 5 s, 10 s, 20 s … capped at 10 min — about 35 minutes of Gitea trouble in all. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxAttempts: 10, baseDelayMs: 5_000, maxDelayMs: 10 * 60_000 };
export const DEFAULT_MAX_PENDING = 1000;

/** The wait after `attempts` failed attempts (1 → base). */
export function retryDelayMs(attempts: number, policy: RetryPolicy): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, Math.min(attempts - 1, 30)));
}

export interface FirstFailure {
  key: string;
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  payloadHash: string;
  receivedAt: Date;
  comment: NormalizedComment;
  /** A review delivery's review (its body is removed here, as the comment's). */
  review?: NormalizedReview;
  bodySha256: string;
  command: 'task' | 'stop';
  source: string | null;
  error: string;
}

/** The waiting record of a review delivery: its repository and the hash of its signed payload. */
export function reviewPendingKey(repoKey: string, payloadHash: string): string {
  return `${repoKey}:review_delivery:${payloadHash}`;
}

/** The record after a first undecided attempt (a Replay of a waiting comment uses `afterFailure`). */
export function pendingRecord(f: FirstFailure, at: Date, policy: RetryPolicy): PendingIntakeRecord {
  const base: PendingIntakeRecord = {
    key: f.key,
    state: 'waiting',
    deliveryKey: f.deliveryKey,
    deliveryId: f.deliveryId,
    eventType: f.eventType,
    payloadHash: f.payloadHash,
    receivedAt: f.receivedAt.toISOString(),
    comment: { ...f.comment, comment: { ...f.comment.comment, body: '' } },
    ...(f.review !== undefined ? { review: { ...f.review, content: '' } } : {}),
    bodySha256: f.bodySha256,
    bodyChars: f.review !== undefined ? f.review.content.length : f.comment.comment.body.length,
    command: f.command,
    source: f.source,
    attempts: 0,
    firstAttemptAt: at.toISOString(),
    lastAttemptAt: at.toISOString(),
    nextAttemptAt: null,
    lastError: f.error,
  };
  return afterFailure(base, at, f.error, policy);
}

/** One more undecided attempt: the next one later, or given up past the bound. */
export function afterFailure(r: PendingIntakeRecord, at: Date, error: string, policy: RetryPolicy): PendingIntakeRecord {
  const attempts = r.attempts + 1;
  const gaveUp = attempts >= policy.maxAttempts;
  return {
    ...r,
    attempts,
    state: gaveUp ? 'gave_up' : 'waiting',
    lastAttemptAt: at.toISOString(),
    nextAttemptAt: gaveUp ? null : new Date(at.getTime() + retryDelayMs(attempts, policy)).toISOString(),
    lastError: error,
  };
}

/** Waiting records due at `at`, earliest first. */
export function dueRecords(records: readonly PendingIntakeRecord[], at: Date): PendingIntakeRecord[] {
  const now = at.getTime();
  return records
    .filter((r) => r.state === 'waiting' && r.nextAttemptAt !== null && Date.parse(r.nextAttemptAt) <= now)
    .sort((a, b) => Date.parse(a.nextAttemptAt!) - Date.parse(b.nextAttemptAt!));
}

/** When the loop should look next: the earliest `nextAttemptAt`, or null when nothing waits. */
export function nextWake(records: readonly PendingIntakeRecord[]): number | null {
  let next: number | null = null;
  for (const r of records) {
    if (r.state !== 'waiting' || r.nextAttemptAt === null) continue;
    const t = Date.parse(r.nextAttemptAt);
    if (next === null || t < next) next = t;
  }
  return next;
}

/**
 * Room for one more: `{ok:true}` when under the bound; otherwise the oldest given-up record makes room
 * (`evict`: it is decided by a Replay whether or not it is kept); none to evict → `{ok:false}`.
 */
export function admit(records: readonly PendingIntakeRecord[], maxPending: number): { ok: true; evict: string | null } | { ok: false } {
  if (records.length < maxPending) return { ok: true, evict: null };
  const gaveUp = records.filter((r) => r.state === 'gave_up').sort((a, b) => Date.parse(a.lastAttemptAt) - Date.parse(b.lastAttemptAt));
  return gaveUp.length > 0 ? { ok: true, evict: gaveUp[0]!.key } : { ok: false };
}
