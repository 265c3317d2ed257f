/**
 * One scan at a time, however many wake-ups arrive: a wake-up during a scan asks for one more scan
 * after it. The returned promise resolves when the scan loop it joined is done (not the work it
 * started). Unlike `receipts/coalesced-pass.ts` it waits a microtask first, to coalesce the burst
 * of wake-ups that one transition batch produces, and a failing scan does not end the loop.
 */
export function wakeLoop(deps: {
  scan: () => Promise<void>;
  canRun: () => boolean;
  onError: (err: unknown) => void;
  /** Registers the loop's promise as in-flight work. */
  track: (p: Promise<void>) => Promise<void>;
}): () => Promise<void> {
  let requested = false;
  let loop: Promise<void> | null = null;
  return function wake() {
    if (!deps.canRun()) return Promise.resolve();
    requested = true;
    if (!loop) {
      loop = deps.track(
        (async () => {
          await Promise.resolve();
          try {
            while (requested && deps.canRun()) {
              requested = false;
              try {
                await deps.scan();
              } catch (err) {
                deps.onError(err);
              }
            }
          } finally {
            loop = null;
          }
        })(),
      );
    }
    return loop;
  };
}

/** Promises still in flight, so `settled()` can wait for all of them, including ones added meanwhile. */
export function inflightSet(): { track<T>(p: Promise<T>): Promise<T>; settled(): Promise<void> } {
  const inflight = new Set<Promise<unknown>>();
  return {
    track(p) {
      inflight.add(p);
      const drop = () => inflight.delete(p);
      void p.then(drop, drop);
      return p;
    },
    async settled() {
      while (inflight.size > 0) await Promise.allSettled([...inflight]);
    },
  };
}
