// A node whose wall clock runs ahead: preloaded with NODE_OPTIONS="--import <this file>" and
// CLOCK_AHEAD_MS=<ms>, it moves Date.now(), new Date() and Date() of that process (and of the node
// processes it starts, which inherit NODE_OPTIONS) by that much. A test double: one machine has one
// clock, so a clock wrong on one node only cannot be had here otherwise (libfaketime is not installed
// on these machines). Timers (setTimeout, performance.now) keep the monotonic clock, as on a real
// machine whose wall clock is set wrong.
const ahead = Number(process.env.CLOCK_AHEAD_MS ?? 0);
if (!Number.isFinite(ahead)) throw new Error(`CLOCK_AHEAD_MS must be a number of milliseconds, not ${process.env.CLOCK_AHEAD_MS}`);
const RealDate = Date;
const now = () => RealDate.now() + ahead;
globalThis.Date = new Proxy(RealDate, {
  construct: (target, args, newTarget) => Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget),
  apply: () => new RealDate(now()).toString(),
  get: (target, key, receiver) => (key === 'now' ? now : Reflect.get(target, key, receiver)),
});
