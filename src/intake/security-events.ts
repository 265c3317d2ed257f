// Requests that fail authentication come from anyone who can reach the webhook URL: one audit event
// each, even rate-limited, would let a stranger add ≈ 70 MB a day. They are aggregated: one
// `security_events` record per source (TCP peer) and window, written when the source is first seen in
// the window and updated once with its count when the window closes; at most `maxSources` sources per
// window get their own record, the rest share one record with source `other`. The records expire
// after `retentionMs` (the retention sweep deletes them), unlike the append-only audit. Worst case
// per window: maxSources + 1 inserts and as many updates, whatever the request rate.
import type { Store } from '../store/types.js';

export const SECURITY_EVENTS = 'security_events' as const;

/** One record per kind, source and this window: what the sink counts in and the operators' view says it shows. */
export const FAILED_AUTH_WINDOW_MS = 10 * 60_000;

export interface SecurityEventRecord {
  key: string;
  /** What failed, e.g. `invalid_signature`, `invalid_form`, `admin_unauthorized`. */
  kind: string;
  /** The TCP peer (bounded, printable), or `other` for the overflow bucket. */
  source: string;
  windowStart: string;
  windowEnd: string;
  count: number;
  firstAt: string;
  lastAt: string;
  /** The first request's unauthenticated headers, bounded (never a body or a secret). */
  sample: Record<string, string | number | null>;
  expiresAt: string;
}

export interface SecurityEventsOptions {
  store: Store;
  /** Default FAILED_AUTH_WINDOW_MS. */
  windowMs?: number;
  /** Sources with their own record per window. Default 100. */
  maxSources?: number;
  /** How long a record is kept. Default 30 days. */
  retentionMs?: number;
  now?: () => number;
  logger?: { warn(obj: Record<string, unknown>, msg?: string): void };
}

export interface SecurityEvents {
  /** Counts one failed request; writes only for a source new in this window. Never throws. */
  record(kind: string, source: string | undefined, sample: Record<string, string | number | null>): Promise<void>;
  /** Writes the counts of the current window (also at close). */
  flush(): Promise<void>;
  /**
   * The current window's records with their counts so far (the store has a source's count only when
   * it was first seen and when the window closes); the operators' view lays them over the stored ones.
   */
  current(): SecurityEventRecord[];
  close(): Promise<void>;
}

interface Bucket {
  key: string;
  kind: string;
  source: string;
  count: number;
  written: number;
  firstAt: number;
  lastAt: number;
  sample: Record<string, string | number | null>;
}

/** An unauthenticated value, bounded and printable. */
export function safeValue(value: string | undefined): string | null {
  if (value === undefined) return null;
  return value.replace(/[^\x21-\x7e]/g, '?').slice(0, 128);
}

export function createSecurityEvents(options: SecurityEventsOptions): SecurityEvents {
  const { store } = options;
  const windowMs = options.windowMs ?? FAILED_AUTH_WINDOW_MS;
  const maxSources = options.maxSources ?? 100;
  const retentionMs = options.retentionMs ?? 30 * 24 * 60 * 60_000;
  const now = options.now ?? Date.now;
  let windowStart = Math.floor(now() / windowMs) * windowMs;
  let buckets = new Map<string, Bucket>();
  const timer = setInterval(() => void rollIfDue(), Math.min(windowMs, 60_000));
  timer.unref();

  const iso = (t: number) => new Date(t).toISOString();
  const toRecord = (b: Bucket, start: number): SecurityEventRecord => ({
    key: b.key,
    kind: b.kind,
    source: b.source,
    windowStart: iso(start),
    windowEnd: iso(start + windowMs),
    count: b.count,
    firstAt: iso(b.firstAt),
    lastAt: iso(b.lastAt),
    sample: b.sample,
    expiresAt: iso(start + windowMs + retentionMs),
  });

  async function write(list: Bucket[], start: number): Promise<void> {
    if (list.length === 0) return;
    try {
      await store.transact(async (tx) => {
        for (const b of list) await tx.put(SECURITY_EVENTS, b.key, toRecord(b, start));
      });
      for (const b of list) b.written = b.count;
    } catch (error) {
      // The 401 stands either way: a failing store must not change what an unauthenticated caller sees.
      options.logger?.warn({ err: error instanceof Error ? error.name : 'unknown' }, 'security events not stored');
    }
  }

  async function flushWindow(map: Map<string, Bucket>, start: number): Promise<void> {
    await write([...map.values()].filter((b) => b.count !== b.written), start);
  }

  async function rollIfDue(): Promise<void> {
    const current = Math.floor(now() / windowMs) * windowMs;
    if (current === windowStart) return;
    const done = buckets;
    const start = windowStart;
    buckets = new Map();
    windowStart = current;
    await flushWindow(done, start);
  }

  return {
    async record(kind, source, sample) {
      await rollIfDue();
      const at = now();
      const peer = safeValue(source) ?? 'unknown';
      let id = `${kind}\u0000${peer}`;
      let bucket = buckets.get(id);
      if (bucket === undefined && buckets.size >= maxSources) {
        id = `${kind}\u0000other`;
        bucket = buckets.get(id);
      }
      if (bucket !== undefined) {
        bucket.count += 1;
        bucket.lastAt = at;
        return;
      }
      const overflow = id.endsWith('\u0000other');
      bucket = {
        key: `${iso(windowStart)}:${kind}:${overflow ? 'other' : peer}`,
        kind,
        source: overflow ? 'other' : peer,
        count: 1,
        written: 0,
        firstAt: at,
        lastAt: at,
        sample,
      };
      buckets.set(id, bucket);
      options.logger?.warn({ kind, source: bucket.source, ...sample }, 'unauthenticated request refused (counted per source and window in security_events)');
      await write([bucket], windowStart);
    },
    async flush() {
      await flushWindow(buckets, windowStart);
    },
    current() {
      return [...buckets.values()].map((b) => toRecord(b, windowStart));
    },
    async close() {
      clearInterval(timer);
      await flushWindow(buckets, windowStart);
    },
  };
}

/** Keys of security event records whose `expiresAt` has passed. */
export async function expiredSecurityEvents(store: Pick<Store, 'list'>, nowMs: number): Promise<string[]> {
  return (await store.list<SecurityEventRecord>(SECURITY_EVENTS, (r) => Date.parse(r.expiresAt) <= nowMs)).map((r) => r.key);
}
