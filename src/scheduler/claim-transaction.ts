import { randomUUID } from 'node:crypto';
import { GLOBAL_CONTROL_KEY, type ControlRecord, type RepositoryRecord, type TaskRecord } from '../domain/records.js';
import { LOCK_KIND, lockActorId } from '../leases/repo-lock-actor.js';
import type { EventObject } from 'xstate';
import type { ActorRecord, ActorRuntime, SendResult } from '../runtime/actor-runtime.js';
import { taskActorId } from '../tasks/task-actor.js';
import { isLeaseHeld } from '../../machines/repo-lock.js';
import { taskStatesWith } from '../../machines/task-lifecycle.js';
import { claimableNow, claimEventOf, type LockActorFound } from './claim-decisions.js';
import { lockEvent } from './events.js';
import type { ClaimCandidate } from './pick-claims.js';
import type { HeldLease } from './types.js';

/** The states in which a task runs under its repository's lease (the machine's `holdsLease` tag). */
const LEASE_HOLDING_STATES = taskStatesWith('holdsLease');

export interface Claimed {
  pick: ClaimCandidate;
  lease: HeldLease;
}

export interface ClaimTogetherInput {
  runtime: ActorRuntime;
  /** In claim order (pickClaims), at most one per repository; as many as there are free slots. */
  picks: readonly ClaimCandidate[];
  owner: string;
  by: string;
  ttlMs: number;
  /** This node's clock, for the lock actor's event (the lease row keeps the database's). */
  now: () => number;
  /** Read in the transaction: a scheduler that stopped meanwhile claims nothing. */
  stopped: () => boolean;
}

/**
 * Claims `picks` in ONE transaction: the repository's lease granted (the lease row, on the database's
 * clock, a new epoch), its lock actor moved to `held` and the task moved under it (CLAIM or RETRY_DUE;
 * a RESUME only takes the lease) are kept together or not at all. On PostgreSQL every row a claim
 * writes is first locked with SKIP LOCKED: a pick another node's claim transaction holds is left to
 * that node, not waited for and not taken twice, and since the lease row was locked free here no grant
 * is ever refused. The pause and the repository's status are read under a share lock, so a pause or a
 * disable that lands meanwhile waits for this transaction: no claim commits after it. (A share lock
 * holds a row that exists: the very first pause, which creates the control row, is not waited for.)
 */
export async function claimTogether(input: ClaimTogetherInput): Promise<Claimed[]> {
  const { runtime, picks, owner, by, ttlMs } = input;
  return runtime.transact(async ({ tx, send, create }) => {
    const claimed: Claimed[] = [];
    if (input.stopped() || picks.length === 0) return claimed;
    const control = await tx.lock<ControlRecord>('control', [GLOBAL_CONTROL_KEY], 'share');
    if (control.get(GLOBAL_CONTROL_KEY)?.globalPaused === true) return claimed;
    const repositories = await tx.lock<RepositoryRecord>('repositories', picks.map((p) => p.repoKey), 'share');
    const open = picks.filter((p) => repositories.get(p.repoKey)?.status !== 'disabled');
    const free = await tx.lockFreeLeases(open.map((p) => p.repoKey));
    const lockable = open.filter((p) => free.has(p.repoKey));
    // A task of the repository still recorded in a lease-holding state (its holder died or stalled, its
    // lease ended, and whoever ends it has not moved it on yet): no other task runs there until it has
    // been. Only a claim, which needs the lease row locked here, can put a task into such a state.
    const holding = (await Promise.all(LEASE_HOLDING_STATES.map((state) => tx.byIndex<TaskRecord>('tasks', 'state', state)))).flat();
    const mine = lockable.filter((p) => holding.every((t) => t.repoKey !== p.repoKey || t.taskId === p.taskId));
    const actors = await tx.lock<ActorRecord>('actors', mine.flatMap((p) => [taskActorId(p.taskId), lockActorId(p.repoKey)]), 'skip');
    const tasks = await tx.lock<TaskRecord>('tasks', mine.map((p) => p.taskId), 'skip');

    for (const pick of mine) {
      const lockId = lockActorId(pick.repoKey);
      const lock = actors.get(lockId);
      const lockActor: LockActorFound = lock ? (isLeaseHeld(lock) ? 'held' : 'free') : (await tx.has('actors', lockId)) ? 'locked_elsewhere' : 'absent';
      if (!claimableNow(pick, { taskState: actors.get(taskActorId(pick.taskId))?.state, taskRecordLocked: tasks.has(pick.taskId), lockActor })) continue;

      const leaseId = randomUUID();
      const now = input.now();
      const acquire = lockEvent({ type: 'ACQUIRE', leaseId, owner, taskId: pick.taskId, now, ttlMs });
      if (lockActor === 'absent') await create(LOCK_KIND, lockId, { repoKey: pick.repoKey }, { events: [acquire], by });
      else expectMoved(await send(lockId, acquire, { by }), lockId, acquire);
      const event = claimEventOf(pick, leaseId);
      if (event) expectMoved(await send(taskActorId(pick.taskId), event, { by }), taskActorId(pick.taskId), event);
      claimed.push({ pick, lease: { repoKey: pick.repoKey, leaseId, owner, expiresAt: now + ttlMs } });
    }
    return claimed;
  });
}

/**
 * Both actors were checked in the rows locked here, and found restorable before the transaction: a
 * refusal now is unexpected, and part of the claim is written already, so the whole transaction is undone.
 */
function expectMoved(result: SendResult, actorId: string, event: EventObject): void {
  if (!result.ok) throw new Error(`${actorId} refused ${event.type} in the claim transaction (${result.reason})`);
}
