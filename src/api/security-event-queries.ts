// What operators see of the aggregated `security_events` records: the stored
// records with the open window's counts laid over them, filtered, newest window first, one page at a
// time. Pure: the router reads the store and the sink, this decides the answer.
//
// The collection holds two different things, and each record says which (`category`): failed
// authentications (a bad webhook signature, a wrong admin token, a signed payload Gitea
// contradicts), counted per source and FAILED_AUTH_WINDOW_MS; and mentions by someone who may not
// ask the bot (no write access), counted per author and UTC day. A reader's mention is a confirmed,
// correctly signed comment: not an authentication failure.
//
// Every field comes from an unauthenticated request, so each is bounded and printable again here
// (also for records an older version stored), and the sample keeps only the header fields the
// writers put there: a field that is not on the list — whatever a future writer adds — is not shown.
import { MENTION_REJECTED, REJECTED_MENTION_WINDOW_MS } from '../intake/rejected-mentions.js';
import { FAILED_AUTH_WINDOW_MS, type SecurityEventRecord } from '../intake/security-events.js';
import type { SecurityEventsQuery } from './control-schemas.js';

export const SECURITY_EVENT_CATEGORIES = ['authentication', 'mention'] as const;
export type SecurityEventCategory = (typeof SECURITY_EVENT_CATEGORIES)[number];

/** The window each category is counted in: the constants the writers use. */
export const CATEGORY_WINDOW_MS: Record<SecurityEventCategory, number> = {
  authentication: FAILED_AUTH_WINDOW_MS,
  mention: REJECTED_MENTION_WINDOW_MS,
};

export function categoryOf(kind: string): SecurityEventCategory {
  return kind === MENTION_REJECTED ? 'mention' : 'authentication';
}

/** The sample fields the writers record (intake-kit.ts, intake.ts, auth-failure-guard.ts); never a signature, token or body. */
export const SAMPLE_FIELDS = ['method', 'path', 'userAgent', 'event', 'deliveryId', 'bodyBytes'] as const;

/** One mention of a refused author's day, as the intake recorded it (rejected-mentions.ts). */
export interface MentionSampleView {
  repoKey: string | null;
  resourceKey: string | null;
  commentId: number | null;
  reason: string | null;
  at: string | null;
}

/** What a `mention` record adds: who, why, and the first and latest mention of the day. */
export interface MentionView {
  login: string;
  /** How many of the day's mentions are listed as a task in `rejected` (the first few). */
  tasks: number;
  /** Count per reason code (`actor_not_authorized`, `permission_check_failed`). */
  reasons: Record<string, number>;
  first: MentionSampleView;
  last: MentionSampleView;
}

export interface SecurityEventView {
  kind: string;
  category: SecurityEventCategory;
  source: string;
  windowStart: string;
  windowEnd: string;
  count: number;
  firstAt: string;
  lastAt: string;
  /** The first request's headers as stored, only SAMPLE_FIELDS. */
  sample: Record<string, string | number | null>;
  /** The window is still open: its count can still grow. */
  open: boolean;
  /** Only for category `mention`. */
  mention?: MentionView;
}

export interface SecurityEventsPage {
  items: SecurityEventView[];
  /** Records matching the filter (all pages). */
  total: number;
  page: number;
  pageSize: number;
  /** What the matching records count (requests or mentions), in all, per kind and per category. */
  requests: number;
  byKind: Record<string, number>;
  byCategory: Record<SecurityEventCategory, number>;
  /** The window each category's records cover (one record per kind, source and window). */
  windowMs: Record<SecurityEventCategory, number>;
}

const MAX_KINDS = 20;

function printable(value: unknown, max: number): string {
  return String(value).replace(/[^\x20-\x7e]/g, '?').slice(0, max);
}

function isoOr(value: unknown): string {
  return typeof value === 'string' && !Number.isNaN(Date.parse(value)) ? new Date(value).toISOString() : '1970-01-01T00:00:00.000Z';
}

function sampleView(sample: unknown): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  if (!sample || typeof sample !== 'object') return out;
  const s = sample as Record<string, unknown>;
  for (const field of SAMPLE_FIELDS) {
    if (!(field in s)) continue;
    const v = s[field];
    out[field] = typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' ? printable(v, 128) : null;
  }
  return out;
}

const MAX_REASONS = 10;

function countOr0(v: unknown): number {
  return Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : 0;
}

function mentionSample(sample: unknown): MentionSampleView {
  const s = sample && typeof sample === 'object' ? (sample as Record<string, unknown>) : {};
  const text = (v: unknown, max: number) => (typeof v === 'string' ? printable(v, max) : null);
  return {
    repoKey: text(s['repoKey'], 128),
    resourceKey: text(s['resourceKey'], 160),
    commentId: countOr0(s['commentId']) || null,
    reason: text(s['reason'], 40),
    at: typeof s['at'] === 'string' && !Number.isNaN(Date.parse(s['at'])) ? new Date(s['at']).toISOString() : null,
  };
}

function mentionView(r: SecurityEventRecord): MentionView {
  const m = r as SecurityEventRecord & { tasks?: unknown; reasons?: unknown; last?: unknown };
  const source = printable(r.source, 128);
  const reasons: Record<string, number> = {};
  if (m.reasons && typeof m.reasons === 'object') {
    for (const [k, v] of Object.entries(m.reasons as Record<string, unknown>).slice(0, MAX_REASONS)) reasons[printable(k, 40)] = countOr0(v);
  }
  return {
    login: source.startsWith('gitea:user:') ? source.slice('gitea:user:'.length) : source,
    tasks: countOr0(m.tasks),
    reasons,
    first: mentionSample(r.sample),
    last: mentionSample(m.last ?? r.sample),
  };
}

export function securityEventView(r: SecurityEventRecord, nowMs: number): SecurityEventView {
  const windowEnd = isoOr(r.windowEnd);
  const kind = printable(r.kind, 40);
  const category = categoryOf(kind);
  return {
    kind,
    category,
    source: printable(r.source, 128).replace(/ /g, '?'),
    windowStart: isoOr(r.windowStart),
    windowEnd,
    count: Number.isSafeInteger(r.count) && r.count > 0 ? r.count : 0,
    firstAt: isoOr(r.firstAt),
    lastAt: isoOr(r.lastAt),
    sample: sampleView(r.sample),
    open: Date.parse(windowEnd) > nowMs,
    ...(category === 'mention' ? { mention: mentionView(r) } : {}),
  };
}

/**
 * `stored`: the records in the store; `live`: the open window's records with their counts so far
 * (same keys; they replace the stored copy, whose count is the first request's).
 */
export function securityEventsPage(stored: readonly SecurityEventRecord[], live: readonly SecurityEventRecord[], q: SecurityEventsQuery, nowMs: number): SecurityEventsPage {
  const byKey = new Map<string, SecurityEventRecord>();
  for (const r of stored) byKey.set(r.key, r);
  for (const r of live) {
    const prior = byKey.get(r.key);
    if (!prior || r.count >= prior.count) byKey.set(r.key, r);
  }
  const from = q.from ? Date.parse(q.from) : Number.NEGATIVE_INFINITY;
  const to = q.to ? Date.parse(q.to) : Number.POSITIVE_INFINITY;
  // A window matches when it overlaps [from, to].
  const matching = [...byKey.values()]
    .map((r) => securityEventView(r, nowMs))
    .filter((v) => Date.parse(v.windowEnd) > from && Date.parse(v.windowStart) <= to)
    .filter((v) => (q.kind === undefined || v.kind === q.kind) && (q.source === undefined || v.source === q.source) && (q.category === undefined || v.category === q.category))
    .sort((a, b) => b.windowStart.localeCompare(a.windowStart) || b.count - a.count || a.kind.localeCompare(b.kind) || a.source.localeCompare(b.source));
  const byKind = new Map<string, number>();
  const byCategory: Record<SecurityEventCategory, number> = { authentication: 0, mention: 0 };
  let requests = 0;
  for (const v of matching) {
    requests += v.count;
    byCategory[v.category] += v.count;
    if (byKind.has(v.kind) || byKind.size < MAX_KINDS) byKind.set(v.kind, (byKind.get(v.kind) ?? 0) + v.count);
  }
  const start = (q.page - 1) * q.pageSize;
  return {
    items: matching.slice(start, start + q.pageSize),
    total: matching.length,
    page: q.page,
    pageSize: q.pageSize,
    requests,
    byKind: Object.fromEntries(byKind),
    byCategory,
    windowMs: { ...CATEGORY_WINDOW_MS },
  };
}
