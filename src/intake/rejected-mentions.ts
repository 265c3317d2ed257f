// Mentions by someone who may not trigger work. Anyone who can comment can mention the bot, as often
// as they like: one rejected task per mention, kept forever, would let a reader grow the store
// without limit. So they are counted, like failed authentications (security-events.ts): ONE
// `security_events` record per author and UTC day (kind `mention_rejected`), updated in the intake
// transaction — exact, and raced by nothing — and deleted by the retention sweep after
// CCWEB_SECURITY_EVENT_RETENTION_DAYS like every security event.
//
// The first REJECTED_TASKS_PER_AUTHOR_DAY of an author's day still become a task in `rejected` (with
// an excerpt of the text, never the whole: task-texts.ts), so the operators' task list shows that
// someone tried, with what; after that a mention leaves only its delivery and comment-trigger
// records (both needed to answer Gitea's Replay `duplicate`; they expire with the delivery
// window) and the count. One audit event (`webhook.rejected_counted`) marks the first counted one.
//
// Pure: the caller reads the previous record and writes the result.
import { utcDay } from '../domain/usage-records.js';
import { safeValue, type SecurityEventRecord } from './security-events.js';

export const MENTION_REJECTED = 'mention_rejected' as const;
/** Rejected mentions per author and UTC day that still get their own (excerpt-only) task. */
export const REJECTED_TASKS_PER_AUTHOR_DAY = 5;

/** One record per author and UTC day: the window the operators' view says these counts cover. */
export const REJECTED_MENTION_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface RejectedMention {
  login: string;
  repoKey: string;
  resourceKey: string;
  deliveryId: string;
  commentId: number;
  /** Why it was rejected (`actor_not_authorized`, `permission_check_failed`). */
  reason: string;
  at: Date;
  /** How long the record is kept after its day ends (the security-event retention). */
  retentionMs: number;
}

export interface RejectedMentionCount {
  record: RejectedMentionRecord;
  /** Whether this mention still gets its own rejected task. */
  ownTask: boolean;
  /** The first mention of the day counted without a task (the one that gets the audit event). */
  firstCounted: boolean;
}

export interface RejectedMentionRecord extends SecurityEventRecord {
  kind: typeof MENTION_REJECTED;
  /** How many of `count` got their own rejected task (at most REJECTED_TASKS_PER_AUTHOR_DAY). */
  tasks: number;
  /** Count per reason (a handful of fixed codes). */
  reasons: Record<string, number>;
  /** The latest mention, as `sample` holds the first. */
  last: Record<string, string | number | null>;
}

/** `<day>T00:00:00.000Z:mention_rejected:gitea:user:<login>`: one key per author and UTC day. */
export function rejectedMentionKey(login: string, at: Date): string {
  return `${utcDay(at)}T00:00:00.000Z:${MENTION_REJECTED}:${sourceOf(login)}`;
}

function sourceOf(login: string): string {
  // Gitea logins are case-insensitive: Bob and bob are one author.
  return `gitea:user:${safeValue(login.toLowerCase())}`;
}

function sampleOf(m: RejectedMention): Record<string, string | number | null> {
  return {
    deliveryId: safeValue(m.deliveryId),
    repoKey: safeValue(m.repoKey),
    resourceKey: safeValue(m.resourceKey),
    commentId: m.commentId,
    reason: safeValue(m.reason),
    at: m.at.toISOString(),
  };
}

/** The author's day record with this mention counted, and whether the mention gets its own task. */
export function countRejectedMention(previous: SecurityEventRecord | undefined, m: RejectedMention): RejectedMentionCount {
  const at = m.at.toISOString();
  const dayStart = Date.parse(`${utcDay(m.at)}T00:00:00.000Z`);
  const prev = previous?.kind === MENTION_REJECTED ? (previous as RejectedMentionRecord) : undefined;
  const tasksSoFar = prev?.tasks ?? 0;
  const ownTask = tasksSoFar < REJECTED_TASKS_PER_AUTHOR_DAY;
  const reason = safeValue(m.reason) ?? 'unknown';
  const record: RejectedMentionRecord = {
    key: rejectedMentionKey(m.login, m.at),
    kind: MENTION_REJECTED,
    source: sourceOf(m.login),
    windowStart: new Date(dayStart).toISOString(),
    windowEnd: new Date(dayStart + REJECTED_MENTION_WINDOW_MS).toISOString(),
    count: (prev?.count ?? 0) + 1,
    firstAt: prev?.firstAt ?? at,
    lastAt: at,
    sample: prev?.sample ?? sampleOf(m),
    last: sampleOf(m),
    tasks: tasksSoFar + (ownTask ? 1 : 0),
    reasons: { ...(prev?.reasons ?? {}), [reason]: (prev?.reasons[reason] ?? 0) + 1 },
    expiresAt: new Date(dayStart + REJECTED_MENTION_WINDOW_MS + m.retentionMs).toISOString(),
  };
  return { record, ownTask, firstCounted: !ownTask && (prev?.count ?? 0) === tasksSoFar };
}
