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
 * Events come in seq order with nothing left behind: a store's reader never passes a seq that may still
 * commit (on PostgreSQL the audit horizon, src/store/sql/audit-horizon.ts; SQLite has one writer).
 */
const PAGE = 500;
/**
 * Also read this often without a notification: a transaction that rolls back notifies nobody, and the
 * events others committed while it held the horizon back would wait for the next commit.
 */
const REREAD_MS = 5_000;

/**
 * Calls `listener` with each batch of audit events committed after `ready` resolves true (and perhaps a
 * few before); `ready` resolves false when following could not start (the error went to `onError`).
 */
export function followAudit(
  store: FollowedStore,
  channel: string,
  listener: (events: AuditEvent[]) => void,
  onError: (error: unknown) => void = () => undefined,
): { stop: () => void; ready: Promise<boolean> } {
  let stopped = false;
  let cursor: number | undefined;
  let reading: Promise<void> | null = null;
  let again = false;
  let unlisten: (() => void) | undefined;

  const readOnce = async (): Promise<void> => {
    if (cursor === undefined) return;
    for (;;) {
      const events = await store.audit({ afterSeq: cursor, limit: PAGE });
      if (stopped) return;
      if (events.length > 0) {
        cursor = events.at(-1)!.seq;
        listener(events);
      }
      if (events.length < PAGE) return;
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

  const reread = setInterval(read, REREAD_MS);
  reread.unref();
  const stop = () => {
    stopped = true;
    clearInterval(reread);
    unlisten?.();
  };
  const ready = (async () => {
    unlisten = await store.listen(channel, read);
    cursor = await store.lastAuditSeq();
    if (stopped) unlisten();
    // Committed between the read of the cursor and the first notification: looked for at once.
    read();
    return true;
  })().catch((error: unknown) => {
    onError(error);
    stop();
    return false;
  });
  return { stop, ready };
}
