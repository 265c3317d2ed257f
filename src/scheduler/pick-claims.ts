import { taskStateHas, taskStateTakes, type TaskState } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';

export interface ClaimCandidate {
  taskId: string;
  repoKey: string;
  queueSeq: number;
  /**
   * `queued` → CLAIM; a due `retry_wait` → RETRY_DUE; a `verifying_reply` nobody drives (after a
   * restart) → RESUME: take the lease again and let the executor finish verifying, no task event.
   */
  event: 'CLAIM' | 'RETRY_DUE' | 'RESUME';
  /** For RESUME: the state being resumed (one the machine tags `resumable`: `verifying_reply`, `publishing`). */
  resumeState?: TaskState;
}

export interface PickInput {
  /** `queued` and `retry_wait` tasks (others are ignored). */
  tasks: readonly TaskRecord[];
  now: number;
  /** Repositories that cannot take a task now: a worker of ours or a valid lease holds them. */
  busy: (repoKey: string) => boolean;
  /** Repositories whose status forbids new work (`disabled`). */
  disabled: (repoKey: string) => boolean;
  /** Free global slots. */
  slots: number;
}

/**
 * Which tasks to claim now: at most one per repository (its head) and at most `slots` in all.
 *
 * A repository's head is its oldest due `retry_wait` task, else its oldest `queued` task (arrival
 * order, `queueSeq`): a task that already started once goes before newer work, so a retry is not
 * starved by a busy repository. Across repositories the heads are taken in the same order, which
 * keeps the global order close to arrival order when slots are scarce.
 */
export function pickClaims(input: PickInput): ClaimCandidate[] {
  const heads = new Map<string, ClaimCandidate>();
  for (const task of input.tasks) {
    const candidate = toCandidate(task, input.now);
    if (!candidate) continue;
    if (input.busy(candidate.repoKey) || input.disabled(candidate.repoKey)) continue;
    const current = heads.get(candidate.repoKey);
    if (!current || before(candidate, current)) heads.set(candidate.repoKey, candidate);
  }
  return [...heads.values()].sort((a, b) => (before(a, b) ? -1 : 1)).slice(0, Math.max(0, input.slots));
}

/** The earliest `nextRetryAt` still in the future, or null: when the scheduler must look again. */
export function nextRetryDue(tasks: readonly TaskRecord[], now: number): number | null {
  let next: number | null = null;
  for (const task of tasks) {
    if (!taskStateTakes(task.state, 'RETRY_DUE') || task.nextRetryAt === null) continue;
    const at = Date.parse(task.nextRetryAt);
    if (at > now && (next === null || at < next)) next = at;
  }
  return next;
}

/** What the machine says of the task's state: resumed after a restart (`resumable`), or the claim event it takes. */
function toCandidate(task: TaskRecord, now: number): ClaimCandidate | null {
  if (taskStateHas(task.state, 'resumable'))
    return { taskId: task.taskId, repoKey: task.repoKey, queueSeq: task.queueSeq, event: 'RESUME', resumeState: task.state };
  if (taskStateTakes(task.state, 'CLAIM')) return { taskId: task.taskId, repoKey: task.repoKey, queueSeq: task.queueSeq, event: 'CLAIM' };
  if (taskStateTakes(task.state, 'RETRY_DUE')) {
    // A retry_wait without a deadline is due at once: the machine only leaves it null on purpose.
    const due = task.nextRetryAt === null || Date.parse(task.nextRetryAt) <= now;
    return due ? { taskId: task.taskId, repoKey: task.repoKey, queueSeq: task.queueSeq, event: 'RETRY_DUE' } : null;
  }
  return null;
}

const RANK: Record<ClaimCandidate['event'], number> = { RESUME: 0, RETRY_DUE: 1, CLAIM: 2 };

function before(a: ClaimCandidate, b: ClaimCandidate): boolean {
  // Work already under way goes first: a verification to finish, then a retry, then new tasks.
  if (a.event !== b.event) return RANK[a.event] < RANK[b.event];
  return a.queueSeq < b.queueSeq;
}
