import type { Tx } from '../store/types.js';
import type { ActorKind, PersistedChange } from '../runtime/actor-runtime.js';
import type { LeaseRecord } from '../domain/records.js';
import { REPO_LOCK_MACHINE_VERSION, repoLockMachine, type RepoLockContext } from '../../machines/repo-lock.js';

export const LOCK_KIND = 'lock';

/** One lock actor per repository (spec §3, §7). */
export function lockActorId(repoKey: string): string {
  return `lock:${repoKey}`;
}

/**
 * The repo-lock actor kind. Its projection mirrors the lock into `leases` (key = repoKey) so the
 * scheduler and the admin views can query leases without touching actor snapshots, and audits how
 * a lease ended when it did not end by a plain release (expiry or takeover): those mean a worker
 * lost its lease, which an operator wants to find without reading every `lock.transition`.
 */
export function repoLockKind(machine: typeof repoLockMachine = repoLockMachine): ActorKind<typeof repoLockMachine> {
  return {
    kind: LOCK_KIND,
    machine,
    machineVersion: REPO_LOCK_MACHINE_VERSION,
    project: projectLease,
  };
}

async function projectLease(tx: Tx, change: PersistedChange): Promise<void> {
  const ctx = change.snapshot.context as RepoLockContext;
  const held = ctx.leaseId !== null;
  const record: LeaseRecord = {
    repoKey: ctx.repoKey,
    leaseId: ctx.leaseId,
    owner: ctx.owner,
    taskId: ctx.taskId,
    expiresAt: ctx.expiresAt === null ? null : new Date(ctx.expiresAt).toISOString(),
    state: held ? 'held' : 'free',
  };
  await tx.put<LeaseRecord>('leases', ctx.repoKey, record);

  const ended = ctx.lastEnded;
  const type = change.event?.type;
  const endedNow =
    ended !== null &&
    ((type === 'EXPIRE' && ended.endedBy === 'expired') || (type === 'ACQUIRE' && ended.endedBy === 'taken_over' && ended.replacedBy === ctx.leaseId));
  if (ended && endedNow) {
    await tx.appendAudit({
      action: ended.endedBy === 'expired' ? 'lease.expired' : 'lease.taken_over',
      actor: change.by,
      actorId: change.actorId,
      taskId: ended.taskId || null,
      metadata: {
        repoKey: ctx.repoKey,
        leaseId: ended.leaseId,
        owner: ended.owner,
        expiresAt: new Date(ended.expiresAt).toISOString(),
        replacedBy: ended.replacedBy,
      },
    });
  }
}
