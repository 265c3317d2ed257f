import { isLeaseHeld, isLockStateLeased } from '../../machines/repo-lock.js';
import { taskStateHas } from '../../machines/task-lifecycle.js';
import type { LeaseRecord, TaskRecord } from '../domain/records.js';
import { LOCK_KIND } from '../leases/repo-lock-actor.js';
import { TASK_KIND } from '../tasks/task-actor.js';
import { nextRetryDue } from './pick-claims.js';

/**
 * When the scheduler must look again by itself: the end of a provider hold if there is one,
 * else the earliest retry deadline; or a held lease's expiry if that comes sooner. Null: nothing ahead.
 */
export function nextWakeAt(input: { heldUntil: number | null; tasks: readonly TaskRecord[]; leases: readonly LeaseRecord[]; now: number; recheckAt?: number | null }): number | null {
  const { now } = input;
  let next = input.heldUntil ?? nextRetryDue(input.tasks, now);
  // A claimable task the scan's claim left (another transaction held its rows): looked at again soon.
  if (input.heldUntil === null && input.recheckAt != null && (next === null || input.recheckAt < next)) next = input.recheckAt;
  for (const lease of input.leases) {
    if (!isLeaseHeld(lease) || lease.expiresAt === null) continue;
    const at = Date.parse(lease.expiresAt);
    if (at > now && (next === null || at < next)) next = at;
  }
  return next;
}

/** Transitions that can make a claim possible: a task became claimable, or a repository lock came free. */
export function wakesScheduler(notice: { kind: string; toState: string }): boolean {
  if (notice.kind === TASK_KIND) return taskStateHas(notice.toState, 'claimable');
  if (notice.kind === LOCK_KIND) return !isLockStateLeased(notice.toState);
  return false;
}
