import type { RepoLockEvent } from '../../machines/repo-lock.js';
import { LOCK_KIND, lockActorId } from '../leases/repo-lock-actor.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { isLeaseRefusal, type Store } from '../store/types.js';
import { lockEvent } from './events.js';
import type { HeldLease, SchedulerLogger } from './types.js';

/** `unavailable`: the repository's lock actor is stored but could not be hosted (restore failed). */
export type AcquireOutcome = 'acquired' | 'refused' | 'unavailable';

export interface RepoLockClient {
  acquire(repoKey: string, event: Extract<RepoLockEvent, { type: 'ACQUIRE' }>): Promise<AcquireOutcome>;
  release(lease: Pick<HeldLease, 'repoKey' | 'leaseId'>): Promise<boolean>;
  heartbeat(lease: Pick<HeldLease, 'repoKey' | 'leaseId'>, now: number, ttlMs: number): Promise<boolean>;
  /** Ends the repository's lease if it has expired by `now`; false if it was renewed in between. */
  expire(repoKey: string, now: number): Promise<boolean>;
}

/** The scheduler's side of the repo-lock actors: one event each, sent through the runtime. */
export function repoLockClient(deps: { store: Store; runtime: ActorRuntime; by: string; logger: SchedulerLogger }): RepoLockClient {
  const { store, runtime, by, logger } = deps;
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
    async acquire(repoKey, event) {
      const actorId = lockActorId(repoKey);
      if (!(await runtime.has(actorId)) && (await store.get('actors', actorId))) {
        logger.error({ repoKey }, 'repository lock is stored but not live; skipping the repository');
        return 'unavailable';
      }
      if (!(await runtime.has(actorId))) {
        try {
          await runtime.create(LOCK_KIND, actorId, { repoKey }, { events: [event], by });
          return 'acquired';
        } catch (err) {
          if (isLeaseRefusal(err)) return 'refused';
          // Created by someone else in between: fall through to a plain ACQUIRE.
          if (!(await runtime.has(actorId))) {
            logger.error({ repoKey, err: errorMessage(err) }, 'repository lock could not be created');
            return 'refused';
          }
        }
      }
      return (await send(repoKey, event)) ? 'acquired' : 'refused';
    },
    release: (lease) => send(lease.repoKey, { type: 'RELEASE', leaseId: lease.leaseId }),
    heartbeat: (lease, now, ttlMs) => send(lease.repoKey, { type: 'HEARTBEAT', leaseId: lease.leaseId, now, ttlMs }),
    expire: (repoKey, now) => send(repoKey, { type: 'EXPIRE', now }),
  };
}

export function errorMessage(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}
