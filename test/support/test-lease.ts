import type { LeaseRecord } from '../../src/domain/records.js';
import type { Tx, Store } from '../../src/store/types.js';

/**
 * Grants a repository's lease on the database and mirrors it as the repo-lock actor's projection does:
 * what a worker's writes are fenced by (src/leases/lease-fence.ts), for tests that run the executor
 * without the scheduler.
 */
export async function grantTestLease(tx: Tx, lease: { repoKey: string; leaseId: string; owner: string; taskId: string; ttlMs?: number }): Promise<void> {
  const grant = await tx.grantLease(lease.repoKey, { holder: lease.owner, taskId: lease.taskId, ttlMs: lease.ttlMs ?? 60_000 });
  if (!grant.granted) throw new Error(`test lease of ${lease.repoKey} not granted: held by ${grant.current.holder}`);
  await tx.put<LeaseRecord>('leases', lease.repoKey, {
    repoKey: lease.repoKey,
    leaseId: lease.leaseId,
    owner: lease.owner,
    taskId: lease.taskId,
    expiresAt: new Date(grant.expiresAt).toISOString(),
    state: 'held',
    epoch: grant.epoch,
  });
}

/** The same in a transaction of its own. */
export function grantTestLeaseIn(store: Store, lease: Parameters<typeof grantTestLease>[1]): Promise<void> {
  return (store as unknown as { transact: (fn: (tx: Tx) => Promise<void>) => Promise<void> }).transact((tx) => grantTestLease(tx, lease));
}
