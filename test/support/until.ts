/** Polls `f` every 100 ms until it gives a truthy value (which it returns), or throws after `timeoutMs`. */
export async function until<T>(what: string, f: () => T | null | undefined | false | Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Runs `fn` and prints how long it took (printed, never asserted: these machines are noisy). */
export async function timedCase<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  try {
    return await fn();
  } finally {
    console.log(`[session timing] ${label}: ${(performance.now() - t0).toFixed(0)} ms`);
  }
}
