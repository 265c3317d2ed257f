import { LeaseLostError, LeaseRefusedError, type Tx } from '../store/types.js';
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
  const previous = await tx.get<LeaseRecord>('leases', ctx.repoKey);
  const record: LeaseRecord = {
    repoKey: ctx.repoKey,
    leaseId: ctx.leaseId,
    owner: ctx.owner,
    taskId: ctx.taskId,
    expiresAt: ctx.expiresAt === null ? null : new Date(ctx.expiresAt).toISOString(),
    state: held ? 'held' : 'free',
    epoch: await followLeaseRow(tx, change, ctx, previous ?? null),
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

/**
 * The repository's lease row (src/store/sql/leases.ts) is the authority: this transition changes it in
 * the same transaction, on the database's clock, and throws (so nothing of the transition is kept) when
 * the row does not agree — a takeover the node's clock allowed but the database's does not, a renewal
 * or an expiry of a lease that is no longer current. Returns the epoch the lease record carries.
 */
async function followLeaseRow(tx: Tx, change: PersistedChange, ctx: RepoLockContext, previous: LeaseRecord | null): Promise<number | null> {
  const epoch = previous?.epoch ?? null;
  const event = change.event as { type?: string; ttlMs?: number } | null;
  switch (event?.type) {
    case 'ACQUIRE': {
      const grant = await tx.grantLease(ctx.repoKey, { holder: ctx.owner ?? '', taskId: ctx.taskId, ttlMs: event.ttlMs ?? 0 });
      if (!grant.granted) throw new LeaseRefusedError(grant.current);
      // The grant as the database made it, on its clock, and the lease it took over with that lease's
      // end: what a history check of the leases reads (with `lease.ended`).
      const replaced = grant.replaced ? { epoch: grant.replaced.epoch, endedAt: new Date(grant.replaced.expiresAt).toISOString() } : null;
      await tx.appendAudit({
        action: 'lease.granted',
        actor: change.by,
        actorId: change.actorId,
        taskId: ctx.taskId,
        metadata: { repoKey: ctx.repoKey, leaseId: ctx.leaseId, epoch: grant.epoch, grantedAt: new Date(grant.now).toISOString(), expiresAt: new Date(grant.expiresAt).toISOString(), replaced },
      });
      return grant.epoch;
    }
    case 'HEARTBEAT':
      if (epoch !== null && !(await tx.renewLease(ctx.repoKey, epoch, event.ttlMs ?? 0))) throw new LeaseLostError(ctx.repoKey, epoch);
      return epoch;
    case 'RELEASE':
    case 'EXPIRE': {
      if (epoch === null) return epoch;
      const ended = await tx.endLease(ctx.repoKey, epoch, event.type === 'RELEASE' ? 'release' : 'expire');
      if (!ended) throw new LeaseLostError(ctx.repoKey, epoch);
      await tx.appendAudit({
        action: 'lease.ended',
        actor: change.by,
        actorId: change.actorId,
        taskId: previous?.taskId ?? null,
        metadata: { repoKey: ctx.repoKey, leaseId: previous?.leaseId ?? null, epoch, how: event.type === 'RELEASE' ? 'released' : 'expired', endedAt: new Date(ended.endedAt).toISOString() },
      });
      return epoch;
    }
    default:
      return epoch;
  }
}
