// One pass at a time over a queue of comment rows: a kick during a pass asks for one more pass after
// it instead of starting a second, concurrent one (two passes could post the same row twice).
export interface CoalescedPass {
  /** Start a pass, or ask the running one to go round once more. */
  kick(): void;
  /** The pass in flight, if any (drain waits for it). */
  readonly running: Promise<void> | null;
}

/** After a pass that failed (the store did not answer), the next one is tried this much later. */
export const FAILED_PASS_RETRY_MS = 2_000;

export function coalescedPass(pass: () => Promise<void>, isStopped: () => boolean, onError: (error: unknown) => void): CoalescedPass {
  let running: Promise<void> | null = null;
  let again = false;
  const self: CoalescedPass = {
    kick() {
      if (isStopped()) return;
      if (running) {
        again = true;
        return;
      }
      running = (async () => {
        try {
          do {
            again = false;
            await pass();
          } while (again && !isStopped());
        } catch (error) {
          // Nobody awaits a kick: a failed pass is said here and tried again, never left unhandled.
          onError(error);
          setTimeout(() => self.kick(), FAILED_PASS_RETRY_MS).unref();
        } finally {
          running = null;
        }
      })();
    },
    get running() {
      return running;
    },
  };
  return self;
}
