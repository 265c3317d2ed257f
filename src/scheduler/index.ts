export { createScheduler, type Scheduler, type SchedulerOptions } from './scheduler.js';
export { recoverAfterRestart } from './recover.js';
export { pickClaims, nextRetryDue, type ClaimCandidate } from './pick-claims.js';
export { systemClock } from './clock.js';
export {
  type HeldLease,
  type TaskExecutor,
  type SchedulerClock,
  type SchedulerLogger,
  type RunningTask,
  type RecoveryResult,
} from './types.js';
