import type { TaskEvent } from '../../machines/task-lifecycle.js';
import type { LeaseRecord } from '../domain/records.js';

/** Held leases whose expiry has come (a lease without an expiry never expires by time). */
export function expiredLeases(leases: readonly LeaseRecord[], now: number): LeaseRecord[] {
  return leases.filter((l) => l.state === 'held' && l.expiresAt !== null && Date.parse(l.expiresAt) <= now);
}

/** The lease's new expiry after an accepted heartbeat: never earlier than it already was. */
export function renewedExpiry(expiresAt: number, now: number, ttlMs: number): number {
  return Math.max(expiresAt, now + ttlMs);
}

/** How a task whose lease was lost (not by its executor returning) is moved on, by state. */
export function leaseLostEvent(state: string, errorCode: string, now: number): TaskEvent | null {
  switch (state) {
    case 'preparing':
      return { type: 'PREPARE_FAILED', errorCode, retryable: true, retryAt: now, resumeAt: 'preparing' };
    case 'running':
      return { type: 'TURN_FAILED', errorCode, retryable: true, retryAt: now, resumeAt: 'preparing' };
    case 'aborting':
      // The abort was not confirmed while the lease lived: §8 "abort timeout → failed, release".
      return { type: 'ABORT_TIMEOUT' };
    default:
      // verifying_reply: the reply verifier actor owns it and has its own deadlines.
      return null;
  }
}

export interface LeaselessInput {
  /** The task's current state and the lease it recorded. */
  state: string;
  taskLeaseId: string | null | undefined;
  /** The lease that ended. */
  leaseId: string;
  errorCode: string;
  /** True: the executor returned or threw; false: the lease was lost under it. */
  executorDone: boolean;
  now: number;
}

export type LeaselessDecision =
  | { event: TaskEvent; why: 'reply_unfinished' | 'publishing_unfinished' | 'task_holds_lease' }
  | null;

/**
 * What to do with a task that may still sit in a lease-holding state under `leaseId` although
 * nobody will drive it: a lost lease → `retry_wait` (one retry, §8); an executor that returned or
 * threw → `failed`. Null: the task is fine where it is.
 */
export function leaselessDecision(input: LeaselessInput): LeaselessDecision {
  const { state, errorCode } = input;
  // A resumed verification (RESUME after a restart) runs under a lease the task never recorded;
  // only this worker can be driving it (one lease per repository), and it must not loop.
  if (input.executorDone && state === 'verifying_reply') return { event: { type: 'REPLY_FAILED', errorCode }, why: 'reply_unfinished' };
  // The same for a resumed publishing step: its change is kept by the publisher, never lost.
  if (input.executorDone && state === 'publishing') return { event: { type: 'PUBLISH_FAILED', errorCode }, why: 'publishing_unfinished' };
  // The task moved on to another lease (or none): not ours to touch.
  if (input.taskLeaseId !== input.leaseId) return null;
  const event = input.executorDone
    ? state === 'preparing' || state === 'running'
      ? ({ type: 'FAIL', errorCode } satisfies TaskEvent)
      : null
    : leaseLostEvent(state, errorCode, input.now);
  return event ? { event, why: 'task_holds_lease' } : null;
}
