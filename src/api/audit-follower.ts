// Every node's audit events as they commit, for the live stream of a node that shares its database
// with others (the transitions another node made reach no runtime of this one). A transaction that
// appended events notifies AUDIT_CHANNEL; the follower then reads what came after its cursor.
import type { AuditEvent } from '../store/types.js';

export interface FollowedStore {
  audit(query: { afterSeq: number; limit: number }): Promise<AuditEvent[]>;
  lastAuditSeq(): Promise<number>;
  listen(channel: string, listener: (payload: string) => void): Promise<() => void>;
}

/**
 * PostgreSQL numbers events when they are written, not when they commit: a seq below the cursor may
 * still commit. Each read looks this far back again and skips the seqs it has passed on.
 */
const LATE_WINDOW = 500;
const PAGE = 500;

/** Calls `listener` with each batch of newly committed audit events; returns the stop. */
export function followAudit(store: FollowedStore, channel: string, listener: (events: AuditEvent[]) => void, onError: (error: unknown) => void = () => undefined): () => void {
  let stopped = false;
  let cursor: number | undefined;
  const seen = new Set<number>();
  let reading: Promise<void> | null = null;
  let again = false;
  let unlisten: (() => void) | undefined;

  /** Events at or below the seq read at start were there before: never passed on. */
  let floor = 0;
  const readOnce = async (): Promise<void> => {
    if (cursor === undefined) return;
    for (;;) {
      const limit = PAGE + LATE_WINDOW;
      const rows = await store.audit({ afterSeq: Math.max(floor, cursor - LATE_WINDOW), limit });
      const events = rows.filter((e) => !seen.has(e.seq));
      if (stopped) return;
      for (const e of events) seen.add(e.seq);
      if (events.length > 0) {
        cursor = Math.max(cursor, ...events.map((e) => e.seq));
        for (const seq of seen) if (seq <= cursor - LATE_WINDOW) seen.delete(seq);
        listener(events);
      }
      if (rows.length < limit) return;
    }
  };
  const read = (): void => {
    if (stopped) return;
    if (reading) {
      again = true;
      return;
    }
    reading = readOnce()
      .catch(onError)
      .finally(() => {
        reading = null;
        if (again) {
          again = false;
          read();
        }
      });
  };

  void (async () => {
    unlisten = await store.listen(channel, read);
    cursor = floor = await store.lastAuditSeq();
    if (stopped) unlisten();
    // Committed between the read of the cursor and the first notification: looked for at once.
    read();
  })().catch(onError);
  return () => {
    stopped = true;
    unlisten?.();
  };
}
