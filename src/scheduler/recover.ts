import { isLeaseHeld } from '../../machines/repo-lock.js';
import { TASK_STATE } from '../../machines/task-lifecycle.js';
import type { LeaseRecord, TaskRecord } from '../domain/records.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { isLeaseRefusal, VersionConflictError, type Store } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';
import { isPreviousProcessOf } from '../leases/lease-owner.js';
import { lockActorId } from '../leases/repo-lock-actor.js';
import type { RecoveryResult, SchedulerLogger } from './types.js';
import { lockEvent, taskEvent } from './events.js';

export interface RecoverDeps {
  store: Store;
  runtime: ActorRuntime;
  /** This process's lease owner id. */
  owner: string;
  now: number;
  by: string;
  /** True when a worker of this process runs the task (then it is not "interrupted"). */
  hasLiveWorker: (taskId: string) => boolean;
  logger: SchedulerLogger;
  /** Only these repositories' leases and tasks (a node that shares the cluster: the ones it owns). Default: all. */
  repos?: (repoKey: string) => boolean;
}

/**
 * Restart recovery (spec §5.5), in the spec's order, each step audited (`recovery.*`). The caller
 * has brought the stored actors back first (`runtime.restoreAll`): it reads them once, at start.
 *
 * 1. Leases. Expired → EXPIRE (the lock projection audits `lease.expired`). Unexpired ones owned by
 *    an earlier process of this instance have no live worker — the MVP runs one scheduler per
 *    instance — so they are released now (`lease.released_after_restart`) instead of blocking the
 *    repository for a whole TTL. Leases of anyone else are kept until they expire. Leases are dealt
 *    with before tasks so a task can never be re-claimed while its old lease is still valid: there
 *    are never two valid leases for one repository.
 * 2. `queued` tasks need nothing: the scheduler's scan picks them up in `queueSeq` order.
 * 3. `retry_wait` deadlines live in the task (`nextRetryAt`); the scheduler's tick re-arms its timer
 *    from them, so recovery only counts them.
 * 4. `preparing`/`running` without a live worker → RECOVER_INTERRUPTED{retryAt: now}: the machine
 *    decides `retry_wait` (errorCode interrupted_by_restart) or `failed` over the retry limit.
 *    `aborting` → RECOVER_INTERRUPTED too, which the machine ends in `aborted`: §5.5 lists aborting
 *    among the states that go to retry_wait, but §5.6 allows no aborting → retry_wait, and an
 *    operator's abort must not be undone by a restart, so the abort is simply complete (no turn
 *    survives a restart).
 *    A task whose lease is still valid and owned by someone else is left alone: that owner may be
 *    alive.
 * `waiting_user`, `verifying_reply` (its reply-verifier actor restores itself) and terminal tasks
 * are untouched; the first two are listed so the caller can resume them.
 */
export async function recoverAfterRestart(deps: RecoverDeps): Promise<RecoveryResult> {
  const { store, runtime, now, by } = deps;
  const mine = deps.repos ?? (() => true);
  const tasksIn = async (state: string) => (await store.byIndex<TaskRecord>('tasks', 'state', state)).filter((t) => mine(t.repoKey));

  const result: RecoveryResult = {
    leasesExpired: 0,
    leasesReleased: 0,
    leasesKept: 0,
    queued: 0,
    retryWait: 0,
    interruptedToRetry: [],
    interruptedToFailed: [],
    abortingToAborted: [],
    verifyingReply: [],
    waitingUser: [],
  };
  const audit = (action: string, metadata: Record<string, unknown>, extra: { taskId?: string; actorId?: string } = {}) =>
    store.transact((tx) => tx.appendAudit({ action, actor: by, ...extra, metadata }));

  // 1. Leases.
  const keptLeaseIds = new Set<string>();
  for (const lease of await store.list<LeaseRecord>('leases', (r) => isLeaseHeld(r) && mine(r.repoKey))) {
    const actorId = lockActorId(lease.repoKey);
    const sendLock = (event: Parameters<typeof lockEvent>[0]) => sendOrNo(runtime, actorId, lockEvent(event), by);
    const expiresAt = lease.expiresAt === null ? 0 : Date.parse(lease.expiresAt);
    if (expiresAt <= now) {
      const res = await sendLock({ type: 'EXPIRE', now });
      if (res.ok) result.leasesExpired += 1;
      else deps.logger.warn({ repoKey: lease.repoKey, reason: res.reason }, 'expired lease could not be ended');
    } else if (lease.owner !== null && lease.leaseId !== null && isPreviousProcessOf(lease.owner, deps.owner)) {
      const res = await sendLock({ type: 'RELEASE', leaseId: lease.leaseId });
      if (res.ok) {
        result.leasesReleased += 1;
        await audit(
          'lease.released_after_restart',
          { repoKey: lease.repoKey, leaseId: lease.leaseId, owner: lease.owner, expiresAt: lease.expiresAt },
          { actorId, ...(lease.taskId ? { taskId: lease.taskId } : {}) },
        );
      } else {
        deps.logger.warn({ repoKey: lease.repoKey, reason: res.reason }, 'lease of a previous process could not be released');
      }
    } else {
      result.leasesKept += 1;
      if (lease.leaseId) keptLeaseIds.add(lease.leaseId);
    }
  }
  await audit('recovery.leases', { expired: result.leasesExpired, released: result.leasesReleased, kept: result.leasesKept });

  // 2. Queued tasks: eligible as they are.
  result.queued = (await tasksIn('queued')).length;
  await audit('recovery.queued', { count: result.queued });

  // 3. retry_wait: the scheduler arms its timer from the earliest nextRetryAt.
  const waiting = await tasksIn('retry_wait');
  result.retryWait = waiting.length;
  const due = waiting.filter((t) => t.nextRetryAt === null || Date.parse(t.nextRetryAt) <= now).length;
  await audit('recovery.retry_wait', { count: waiting.length, alreadyDue: due });

  // 4. Interrupted work.
  const interrupted = [
    ...(await tasksIn('preparing')),
    ...(await tasksIn('running')),
    ...(await tasksIn('aborting')),
  ].sort((a, b) => a.queueSeq - b.queueSeq);
  let skipped = 0;
  for (const task of interrupted) {
    if (deps.hasLiveWorker(task.taskId) || (task.leaseId !== null && keptLeaseIds.has(task.leaseId))) {
      skipped += 1;
      continue;
    }
    const res = await sendOrNo(runtime, taskActorId(task.taskId), taskEvent({ type: 'RECOVER_INTERRUPTED', retryAt: now }), by);
    if (!res.ok) {
      skipped += 1;
      deps.logger.warn({ taskId: task.taskId, state: task.state, reason: res.reason }, 'interrupted task could not be recovered');
      continue;
    }
    // Which list of the report the task is counted in: named by the state it reached.
    if (res.toState === TASK_STATE.retry_wait) result.interruptedToRetry.push(task.taskId);
    else if (res.toState === TASK_STATE.aborted) result.abortingToAborted.push(task.taskId);
    else result.interruptedToFailed.push(task.taskId);
  }
  await audit('recovery.interrupted', {
    toRetryWait: result.interruptedToRetry.length,
    toFailed: result.interruptedToFailed.length,
    toAborted: result.abortingToAborted.length,
    skipped,
  });

  // Untouched, listed for the caller.
  result.verifyingReply = (await tasksIn('verifying_reply')).map((t) => t.taskId);
  result.waitingUser = (await tasksIn('waiting_user')).map((t) => t.taskId);
  await audit('recovery.untouched', { verifyingReply: result.verifyingReply.length, waitingUser: result.waitingUser.length });
  return result;
}

/**
 * An event recovery sends, where another node moving the actor on meanwhile (a version conflict, the
 * lease row refusing) is a plain no: that node is alive and acts for it.
 */
async function sendOrNo(runtime: ActorRuntime, actorId: string, event: Parameters<ActorRuntime['send']>[1], by: string): Promise<{ ok: boolean; reason?: string; toState?: string }> {
  try {
    return await runtime.send(actorId, event, { by });
  } catch (err) {
    if (isLeaseRefusal(err) || err instanceof VersionConflictError) return { ok: false, reason: err.code };
    throw err;
  }
}
