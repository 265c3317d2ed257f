/**
 * Runs functions one at a time per key, in call order; a failure does not block the next caller.
 * Keys whose queue ran empty are forgotten.
 */
export function keyedLock(): { run<T>(key: string, fn: () => Promise<T>): Promise<T>; size(): number } {
  const tails = new Map<string, Promise<unknown>>();
  return {
    run(key, fn) {
      const prev = tails.get(key) ?? Promise.resolve();
      const run = prev.then(fn, fn);
      const tail = run.catch(() => undefined);
      tails.set(key, tail);
      void tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key);
      });
      return run;
    },
    size: () => tails.size,
  };
}
