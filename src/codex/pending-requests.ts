import { CodexRpcError, type RequestId } from './jsonrpc-types.js';

type Pending = {
  method: string;
  resolve: (v: any) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | null;
};

/**
 * Requests sent and not yet answered, by id. Each settles exactly once: by its response, by its
 * timeout (`request_timeout`), or by `rejectAll` when the process is gone.
 */
export class PendingRequests {
  private readonly pending = new Map<RequestId, Pending>();

  /** Registers `id`; a `timeoutMs` that is not a positive finite number means no timeout. */
  add(id: RequestId, method: string, timeoutMs: number): Promise<any> {
    return new Promise((resolve, reject) => {
      const p: Pending = { method, resolve, reject, timer: null };
      if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
        p.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new CodexRpcError(method, 'request_timeout', `no response within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.pending.set(id, p);
    });
  }

  /** Settles `id` with a response; false if no such request waits (unknown or already timed out). */
  settle(id: RequestId, outcome: { ok: true; result: unknown } | { ok: false; code: number | string; message: string; data: unknown }): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.pending.delete(id);
    if (p.timer) clearTimeout(p.timer);
    if (outcome.ok) p.resolve(outcome.result);
    else p.reject(new CodexRpcError(p.method, outcome.code, outcome.message, outcome.data));
    return true;
  }

  /** Rejects every waiting request with the error `errorFor(method)` returns. */
  rejectAll(errorFor: (method: string) => Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(errorFor(p.method));
    }
  }

  get size(): number {
    return this.pending.size;
  }
}
