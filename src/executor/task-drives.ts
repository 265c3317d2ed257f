import type { HeldLease } from '../scheduler/types.js';

/** This node's worker of a task: the lease it runs the task under, and how its work ends. */
export interface Drive {
  lease: HeldLease;
  /** Aborted when the lease is lost or the scheduler stops: the task's effects stop here. */
  signal: AbortSignal;
  /** Ends the worker with `error` (a write its lease no longer allowed). */
  fail(error: unknown): void;
}

/**
 * Which tasks this node drives. Any node may host a task's actor (to give it a user's stop or reply),
 * and hosting it starts its state's effect; the effect does its work only once the node holding the
 * task's lease drives it, and waits until then (or until its state is left) otherwise.
 */
export class TaskDrives {
  readonly #drives = new Map<string, Drive>();
  readonly #waiting = new Map<string, Set<(drive: Drive) => void>>();

  get(taskId: string): Drive | undefined {
    const drive = this.#drives.get(taskId);
    return drive && !drive.signal.aborted ? drive : undefined;
  }

  /** From now on this node drives the task under `drive`; returns the function that ends it. */
  start(taskId: string, drive: Drive): () => void {
    this.#drives.set(taskId, drive);
    const waiting = this.#waiting.get(taskId);
    this.#waiting.delete(taskId);
    for (const wake of waiting ?? []) wake(drive);
    return () => {
      if (this.#drives.get(taskId) === drive) this.#drives.delete(taskId);
    };
  }

  /** The drive of the task once this node has one; null if `signal` (the effect's state left) comes first. */
  when(taskId: string, signal: AbortSignal): Promise<Drive | null> {
    const now = this.get(taskId);
    if (now) return Promise.resolve(now);
    if (signal.aborted) return Promise.resolve(null);
    return new Promise((resolve) => {
      const wake = (drive: Drive) => {
        signal.removeEventListener('abort', stop);
        resolve(drive);
      };
      const stop = () => {
        const waiting = this.#waiting.get(taskId);
        waiting?.delete(wake);
        if (waiting?.size === 0) this.#waiting.delete(taskId);
        resolve(null);
      };
      signal.addEventListener('abort', stop, { once: true });
      if (!this.#waiting.has(taskId)) this.#waiting.set(taskId, new Set());
      this.#waiting.get(taskId)!.add(wake);
    });
  }
}
