/**
 * The wake-up timers of a comment worker (receipt outbox, receipt notices): each retry waits on a
 * timer that kicks the worker again; stopping the worker clears every one that has not fired, so a
 * stopped worker wakes no more. Timers are unref'd: a pending retry does not keep the process alive.
 */
export interface RetryTimers {
  /** Calls the worker's kick after `delayMs`. */
  schedule(delayMs: number): void;
  /** Cancels every timer not yet fired. */
  clear(): void;
  /** Timers still waiting. */
  readonly size: number;
}

export function createRetryTimers(kick: () => void): RetryTimers {
  const timers = new Set<NodeJS.Timeout>();
  return {
    schedule(delayMs) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        kick();
      }, delayMs);
      timer.unref();
      timers.add(timer);
    },
    clear() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
    get size() {
      return timers.size;
    },
  };
}
