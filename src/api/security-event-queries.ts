// What operators see of the aggregated failed authentications (issue 29, finding 8): the stored
// `security_events` records with the open window's counts laid over them, filtered, newest window
// first, one page at a time. Pure: the router reads the store and the sink, this decides the answer.
//
// Every field comes from an unauthenticated request, so each is bounded and printable again here
// (also for records an older version stored), and the sample keeps only the header fields the
// writers put there: a field that is not on the list — whatever a future writer adds — is not shown.
import type { SecurityEventRecord } from '../intake/security-events.js';
import type { SecurityEventsQuery } from './control-schemas.js';

/** The sample fields the writers record (accept-comment.ts, auth-failure-guard.ts); never a signature, token or body. */
export const SAMPLE_FIELDS = ['method', 'path', 'userAgent', 'event', 'deliveryId', 'bodyBytes'] as const;

export interface SecurityEventView {
  kind: string;
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
}

export interface SecurityEventsPage {
  items: SecurityEventView[];
  /** Records matching the filter (all pages). */
  total: number;
  page: number;
  pageSize: number;
  /** Failed requests counted in the matching records, in all and per kind. */
  requests: number;
  byKind: Record<string, number>;
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

export function securityEventView(r: SecurityEventRecord, nowMs: number): SecurityEventView {
  const windowEnd = isoOr(r.windowEnd);
  return {
    kind: printable(r.kind, 40),
    source: printable(r.source, 128).replace(/ /g, '?'),
    windowStart: isoOr(r.windowStart),
    windowEnd,
    count: Number.isSafeInteger(r.count) && r.count > 0 ? r.count : 0,
    firstAt: isoOr(r.firstAt),
    lastAt: isoOr(r.lastAt),
    sample: sampleView(r.sample),
    open: Date.parse(windowEnd) > nowMs,
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
    .filter((v) => (q.kind === undefined || v.kind === q.kind) && (q.source === undefined || v.source === q.source))
    .sort((a, b) => b.windowStart.localeCompare(a.windowStart) || b.count - a.count || a.kind.localeCompare(b.kind) || a.source.localeCompare(b.source));
  const byKind = new Map<string, number>();
  let requests = 0;
  for (const v of matching) {
    requests += v.count;
    if (byKind.has(v.kind) || byKind.size < MAX_KINDS) byKind.set(v.kind, (byKind.get(v.kind) ?? 0) + v.count);
  }
  const start = (q.page - 1) * q.pageSize;
  return { items: matching.slice(start, start + q.pageSize), total: matching.length, page: q.page, pageSize: q.pageSize, requests, byKind: Object.fromEntries(byKind) };
}
