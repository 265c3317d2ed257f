// Delivers notifications to the subscribers of their thread; notifications of a thread nobody
// listens to yet (racing ahead of a response) are buffered, bounded, and replayed on subscribe.
import type { CodexNotification, ThreadHandler } from './jsonrpc-types.js';

/** At most this many threads keep a buffer; the oldest buffer goes first. */
export const MAX_BUFFERED_THREADS = 256;

export class ThreadRouter {
  private readonly subscribers = new Map<string, Set<ThreadHandler>>();
  private readonly buffers = new Map<string, CodexNotification[]>();

  /** @param maxPerThread notifications buffered per thread without a subscriber (oldest dropped). */
  constructor(private readonly maxPerThread: number) {}

  route(n: CodexNotification): void {
    if (!n.threadId) return;
    const subs = this.subscribers.get(n.threadId);
    if (subs && subs.size > 0) {
      for (const h of [...subs]) safeCall(h, n);
      return;
    }
    let buf = this.buffers.get(n.threadId);
    if (!buf) {
      buf = [];
      this.buffers.set(n.threadId, buf);
      if (this.buffers.size > MAX_BUFFERED_THREADS) {
        const oldest = this.buffers.keys().next().value;
        if (oldest !== undefined) this.buffers.delete(oldest);
      }
    }
    buf.push(n);
    if (buf.length > this.maxPerThread) buf.splice(0, buf.length - this.maxPerThread);
  }

  /** Buffered notifications of the thread are replayed to `handler` first, in order. */
  subscribe(threadId: string, handler: ThreadHandler): () => void {
    let subs = this.subscribers.get(threadId);
    if (!subs) {
      subs = new Set();
      this.subscribers.set(threadId, subs);
    }
    subs.add(handler);
    const buffered = this.buffers.get(threadId);
    if (buffered) {
      this.buffers.delete(threadId);
      for (const n of buffered) safeCall(handler, n);
    }
    return () => {
      const s = this.subscribers.get(threadId);
      s?.delete(handler);
      if (s && s.size === 0) this.subscribers.delete(threadId);
    };
  }

  forget(threadId: string): void {
    this.buffers.delete(threadId);
  }

  /** Threads with buffered notifications (for tests and diagnostics). */
  bufferedThreads(): string[] {
    return [...this.buffers.keys()];
  }
}

/**
 * A handler for one turn of a thread whose turnId may not be known yet: until `setTurnId`, every
 * notification is held; then held and later ones are delivered when they carry that turnId or none
 * (thread-level notifications such as `thread/status/changed`).
 */
export function turnFilter(turnId: string | null, handler: ThreadHandler): { handle: ThreadHandler; setTurnId(id: string): void } {
  let current = turnId;
  const held: CodexNotification[] = [];
  const deliver = (n: CodexNotification) => {
    if (n.turnId === null || n.turnId === current) handler(n);
  };
  return {
    handle: (n) => {
      if (current === null) held.push(n);
      else deliver(n);
    },
    setTurnId: (id) => {
      current = id;
      for (const n of held.splice(0)) deliver(n);
    },
  };
}

function safeCall(h: ThreadHandler, n: CodexNotification): void {
  try {
    h(n);
  } catch {
    /* a subscriber's failure must not break routing */
  }
}
