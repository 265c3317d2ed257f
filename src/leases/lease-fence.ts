import type { LeaseRecord } from '../domain/records.js';
import { LeaseLostError, type LeaseStoreTx, type Tx } from '../store/types.js';

/** The lease a worker runs a task under, as the scheduler granted it. */
export interface FencedLease {
  repoKey: string;
  leaseId: string;
}

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
  if (!record || record.state !== 'held' || record.leaseId !== lease.leaseId) throw new LeaseLostError(lease.repoKey, epoch ?? 0);
  if (epoch !== null && keepsLeaseRows(tx)) await tx.fenceLease(lease.repoKey, epoch);
}

/** Whether the store keeps lease rows on the database (the SQL engines). */
export function keepsLeaseRows(tx: Tx): tx is LeaseStoreTx {
  return 'fenceLease' in tx;
}
