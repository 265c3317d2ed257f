import { taskStatesWith, type TaskEvent, type TaskState } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';
import type { ClaimCandidate } from './pick-claims.js';

/** Task states the scheduler's scan looks at (the machine's `claimable` and `resumable` tags). */
export const SCANNED_STATES: readonly TaskState[] = [...taskStatesWith('claimable'), ...taskStatesWith('resumable')];

/**
 * The tasks a scan may claim from. Under a provider hold (`heldUntil` not null) only verifications
 * resume: they need Gitea, not the model; new claims, retries and publishing wait.
 */
export function claimableUnderHold(tasks: readonly TaskRecord[], heldUntil: number | null): TaskRecord[] {
  return heldUntil === null ? [...tasks] : tasks.filter((t) => t.state === 'verifying_reply');
}

/** The state the task must still be in when the claim starts; anything else means it moved on since the scan. */
export function expectedStateOf(pick: ClaimCandidate): TaskRecord['state'] {
  if (pick.event === 'CLAIM') return 'queued';
  if (pick.event === 'RETRY_DUE') return 'retry_wait';
  return pick.resumeState ?? 'verifying_reply';
}

/**
 * The task event that takes the task under `leaseId`, or null for a RESUME: a verification or a
 * publishing step (both idempotent) that nobody drives after a restart needs no event, only the lease.
 */
export function claimEventOf(pick: ClaimCandidate, leaseId: string): TaskEvent | null {
  if (pick.event === 'CLAIM') return { type: 'CLAIM', leaseId };
  if (pick.event === 'RETRY_DUE') return { type: 'RETRY_DUE', leaseId };
  return null;
}

/**
 * After the lease was acquired, whether the claim must be given up: pause or disable may have landed
 * while the lease was being acquired, and a paused scheduler never claims (no CLAIM audit event
 * ever follows a pause).
 */
export function claimAbandoned(now: { stopped: boolean; leaseLost: boolean; paused: boolean; repoDisabled: boolean }): boolean {
  return now.stopped || now.leaseLost || now.paused || now.repoDisabled;
}
