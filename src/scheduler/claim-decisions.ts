import { taskStateHas, taskStatesWith, type TaskEvent, type TaskState } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';
import type { ClaimCandidate } from './pick-claims.js';

/** Task states the scheduler's scan looks at (the machine's `claimable` and `resumable` tags). */
export const SCANNED_STATES: readonly TaskState[] = [...taskStatesWith('claimable'), ...taskStatesWith('resumable')];

/**
 * The tasks a scan may claim from. Under a provider hold (`heldUntil` not null) only the states whose
 * work needs Gitea, not the model, go on (the machine's `goesOnUnderHold` tag: verifications); new
 * claims, retries and publishing wait.
 */
export function claimableUnderHold(tasks: readonly TaskRecord[], heldUntil: number | null): TaskRecord[] {
  return heldUntil === null ? [...tasks] : tasks.filter((t) => taskStateHas(t.state, 'goesOnUnderHold'));
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

/** What the claim transaction found of a pick's repository lock actor. */
export type LockActorFound = 'free' | 'held' | 'absent' | 'locked_elsewhere';

/**
 * Whether the claim transaction takes `pick`, from the rows it locked (a row another transaction holds
 * was skipped, not waited for): the task's actor and record both locked here, the task still in the
 * state the scan saw, and the repository's lock actor free (locked here) or not made yet.
 */
export function claimableNow(pick: ClaimCandidate, found: { taskState: string | undefined; taskRecordLocked: boolean; lockActor: LockActorFound }): boolean {
  return found.taskRecordLocked && found.taskState === expectedStateOf(pick) && (found.lockActor === 'free' || found.lockActor === 'absent');
}
