// The scheduler's real clock (src/scheduler/clock.ts): wall time and real, cancellable timers.
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/scheduler/clock.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('systemClock', () => {
  it('now() is the wall clock', () => {
    const before = Date.now();
    const now = systemClock.now();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });

  it('a timer fires after its delay, not before; a deadline already past fires at once', async () => {
    const fired: string[] = [];
    systemClock.setTimer(() => fired.push('soon'), 5);
    systemClock.setTimer(() => fired.push('past'), -1000);
    systemClock.setTimer(() => fired.push('later'), 60_000);
    await sleep(200);
    expect(fired.sort()).toEqual(['past', 'soon']);
  });

  it('a cancelled timer never fires', async () => {
    let fired = false;
    const cancel = systemClock.setTimer(() => (fired = true), 5);
    cancel();
    await sleep(100);
    expect(fired).toBe(false);
  });
});
