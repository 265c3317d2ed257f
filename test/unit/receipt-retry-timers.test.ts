// The comment workers' wake-up timers (src/receipts/retry-timers.ts): a scheduled retry kicks the
// worker once; clearing (the worker stopped) cancels every timer that has not fired.
import { describe, expect, it } from 'vitest';
import { createRetryTimers } from '../../src/receipts/retry-timers.js';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('retry timers', () => {
  it('kick once per scheduled retry and forget the timer after it fired', async () => {
    let kicks = 0;
    const timers = createRetryTimers(() => kicks++);
    timers.schedule(5);
    timers.schedule(10);
    expect(timers.size).toBe(2);
    await wait(200);
    expect(kicks).toBe(2);
    expect(timers.size).toBe(0);
  });

  it('kick no more once cleared', async () => {
    let kicks = 0;
    const timers = createRetryTimers(() => kicks++);
    timers.schedule(20);
    timers.clear();
    expect(timers.size).toBe(0);
    await wait(150);
    expect(kicks).toBe(0);
  });
});
