/**
 * Work shared by callers with the same key while it runs: a caller that comes while one is in flight
 * joins it instead of starting its own. The verifier's effects are idempotent one after another (by
 * marker); two copies of one verifier (one stopped with its parent, its promise still going, and the
 * copy hosted again) must not run a write side by side, and two callers following one turn's
 * verifier follow it once.
 */
export function inFlightByKey<O>(): (key: string, start: () => Promise<O>) => Promise<O> {
  const inFlight = new Map<string, Promise<O>>();
  return (key, start) => {
    const running = inFlight.get(key);
    if (running) return running;
    const started = start();
    inFlight.set(key, started);
    const forget = () => {
      if (inFlight.get(key) === started) inFlight.delete(key);
    };
    started.then(forget, forget);
    return started;
  };
}

/** `run`, shared by callers whose input has the same key while it runs (`inFlightByKey`). */
export function sharedWhileRunning<I, O>(keyOf: (input: I) => string, run: (input: I) => Promise<O>): (input: I) => Promise<O> {
  const join = inFlightByKey<O>();
  return (input) => join(keyOf(input), () => run(input));
}
