import { isLeaseHeld } from '../../machines/repo-lock.js';
import { taskStatesWith } from '../../machines/task-lifecycle.js';
import type { LeaseRecord } from '../domain/records.js';
import { LeaseLostError, type Tx } from '../store/types.js';

/** The lease a worker runs a task under, as the scheduler granted it. */
export interface FencedLease {
  repoKey: string;
  leaseId: string;
}

/** A check a write for a task runs first in its own transaction: throws LeaseLostError when its lease is gone. */
export type LeaseFence = (tx: Tx) => Promise<void>;

/**
 * Makes a write for a task count only while the lease it runs under is the current one, checked in
 * the write's own transaction: the repository's lease record still names this lease as held, and the
 * database's lease row still holds its epoch, unexpired on the database's clock (on PostgreSQL the row
 * is read FOR SHARE, so a grant to another holder waits for this commit). A worker that lost its lease
 * (paused past it, cut off from the database) therefore commits nothing more for the task: the write
 * throws LeaseLostError and nothing of it is kept.
 */
export async function fenceWrite(tx: Tx, lease: FencedLease): Promise<void> {
  const record = await tx.get<LeaseRecord>('leases', lease.repoKey);
  const epoch = record?.epoch ?? null;
  if (!record || !isLeaseHeld(record) || record.leaseId !== lease.leaseId) throw new LeaseLostError(lease.repoKey, epoch ?? 0);
  if (epoch !== null) await tx.fenceLease(lease.repoKey, epoch);
}

/** The fence of a worker's writes for the task it runs under `lease`. */
export function leaseFence(lease: FencedLease): LeaseFence {
  return (tx) => fenceWrite(tx, lease);
}

const LEASE_STATES: ReadonlySet<string> = new Set(taskStatesWith('holdsLease'));

/**
 * Whose write it is, for a write made for a task in `state` by a part that is not the task's worker
 * (a receipt's progress edit): while the state holds the repository's lease, the worker holding it
 * makes it, fenced by that lease (`own`: this node's worker's fence of the task, if it runs one) or
 * nobody here ('not_ours'); in any other state no lease exists and the write goes unfenced (null).
 */
export function writerFence(state: string, own: LeaseFence | undefined): LeaseFence | null | 'not_ours' {
  if (!LEASE_STATES.has(state)) return null;
  return own ?? 'not_ours';
}
