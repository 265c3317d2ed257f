// The comment workers' pass loop: a pass that fails (the store did not answer) is reported and tried
// again, never left as an unhandled rejection (which ends the process with exit 1).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { coalescedPass, FAILED_PASS_RETRY_MS } from '../../src/receipts/coalesced-pass.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('coalescedPass', () => {
  it('a failing pass is reported once, the loop is free again, and it runs again after the retry delay', async () => {
    vi.useFakeTimers();
    let calls = 0;
    const errors: unknown[] = [];
    const passes = coalescedPass(
      async () => {
        calls += 1;
        if (calls === 1) throw new Error('store unavailable: connection refused');
      },
      () => false,
      (e) => void errors.push(e),
    );
    passes.kick();
    const first = passes.running!;
    await first; // settles (resolved): nothing for anyone to handle
    expect(errors.map((e) => (e as Error).message)).toEqual(['store unavailable: connection refused']);
    expect(passes.running).toBeNull();
    expect(calls).toBe(1);
    await vi.advanceTimersByTimeAsync(FAILED_PASS_RETRY_MS);
    await passes.running;
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
  });

  it('a kick during a pass asks for one more pass after it, not a second one at once', async () => {
    let release!: () => void;
    let calls = 0;
    const passes = coalescedPass(
      async () => {
        calls += 1;
        if (calls === 1) await new Promise<void>((r) => (release = r));
      },
      () => false,
      () => undefined,
    );
    passes.kick();
    passes.kick();
    passes.kick();
    expect(calls).toBe(1);
    release();
    await passes.running;
    expect(calls).toBe(2);
  });
});
