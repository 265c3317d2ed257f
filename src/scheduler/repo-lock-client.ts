import type { RepoLockEvent } from '../../machines/repo-lock.js';
import { lockActorId } from '../leases/repo-lock-actor.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { isLeaseRefusal } from '../store/types.js';
import { lockEvent } from './events.js';
import type { HeldLease } from './types.js';

export interface RepoLockClient {
  release(lease: Pick<HeldLease, 'repoKey' | 'leaseId'>): Promise<boolean>;
  heartbeat(lease: Pick<HeldLease, 'repoKey' | 'leaseId'>, now: number, ttlMs: number): Promise<boolean>;
  /** Ends the repository's lease if it has expired by `now`; false if it was renewed in between. */
  expire(repoKey: string, now: number): Promise<boolean>;
}

/**
 * The scheduler's side of the repo-lock actors once a lease is held: one event each, sent through the
 * runtime. (A lease is acquired with its claim, in one transaction: claim-transaction.ts.)
 */
export function repoLockClient(deps: { runtime: ActorRuntime; by: string }): RepoLockClient {
  const { runtime, by } = deps;
  // The database refusing the lease change (its clock, its row) is a plain no, as the machine's own would be.
  const send = async (repoKey: string, event: RepoLockEvent) => {
    try {
      return (await runtime.send(lockActorId(repoKey), lockEvent(event), { by })).ok;
    } catch (err) {
      if (isLeaseRefusal(err)) return false;
      throw err;
    }
  };
  return {
    release: (lease) => send(lease.repoKey, { type: 'RELEASE', leaseId: lease.leaseId }),
    heartbeat: (lease, now, ttlMs) => send(lease.repoKey, { type: 'HEARTBEAT', leaseId: lease.leaseId, now, ttlMs }),
    expire: (repoKey, now) => send(repoKey, { type: 'EXPIRE', now }),
  };
}

export function errorMessage(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}
