// One pass at a time over a queue of comment rows: a kick during a pass asks for one more pass after
// it instead of starting a second, concurrent one (two passes could post the same row twice).
export interface CoalescedPass {
  /** Start a pass, or ask the running one to go round once more. */
  kick(): void;
  /** The pass in flight, if any (drain waits for it). */
  readonly running: Promise<void> | null;
}

export function coalescedPass(pass: () => Promise<void>, isStopped: () => boolean): CoalescedPass {
  let running: Promise<void> | null = null;
  let again = false;
  return {
    kick() {
      if (isStopped()) return;
      if (running) {
        again = true;
        return;
      }
      running = (async () => {
        do {
          again = false;
          await pass();
        } while (again && !isStopped());
      })().finally(() => {
        running = null;
      });
    },
    get running() {
      return running;
    },
  };
}
