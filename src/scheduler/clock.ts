import type { SchedulerClock } from './types.js';

export const systemClock: SchedulerClock = {
  now: () => Date.now(),
  setTimer: (fn, ms) => {
    // setTimeout caps at 2^31-1 ms; a retry further away is simply re-armed on a later tick.
    const handle = setTimeout(fn, Math.min(Math.max(0, ms), 2_147_483_647));
    handle.unref?.();
    return () => clearTimeout(handle);
  },
};
