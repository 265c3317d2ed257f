// An actor hosted on two nodes at once (a repository that changed hands, active mode): the
// copy whose stored version moved on without it fails its next transition (compare-and-swap on
// stateVersion) and is dropped, and the event after that is applied to the stored snapshot. Two
// runtimes on one real store stand for the two nodes.
import { describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import { LOCK_KIND, lockActorId, repoLockKind } from '../../src/leases/repo-lock-actor.js';
import { StoreUnavailableError, VersionConflictError } from '../../src/store/types.js';
import { lockEvent } from '../../src/scheduler/events.js';
import { createTestRuntime } from '../support/test-runtime.js';

describe('a stale copy of an actor (another node wrote it since)', () => {
  it('fails once with the conflict, then the next event is applied to the stored snapshot; an eager kind too', async () => {
    const a = await createTestRuntime([repoLockKind()]);
    const b = new ActorRuntime({ store: a.store, kinds: [repoLockKind()] });
    try {
      const id = lockActorId('default:org/r');
      await a.runtime.create(LOCK_KIND, id, { repoKey: 'default:org/r' });
      await b.restoreAll();
      const now = Date.now();
      // Node a grants a lease: the stored version moves on; b's copy does not know.
      expect((await a.runtime.send(id, lockEvent({ type: 'ACQUIRE', leaseId: 'l1', owner: 'node-a/1/1', taskId: 't1', now, ttlMs: 60_000 }))).ok).toBe(true);
      const stale = b.send(id, lockEvent({ type: 'ACQUIRE', leaseId: 'l2', owner: 'node-b/1/1', taskId: 't2', now, ttlMs: 60_000 }));
      await expect(stale).rejects.toBeInstanceOf(VersionConflictError);
      // b hosts it again from the store: the lease a granted is there, so a second ACQUIRE is refused
      // as the machine refuses it (not a stale success), and a RELEASE of a's lease is accepted.
      a.runtime.stopAll();
      expect((await b.send(id, lockEvent({ type: 'RELEASE', leaseId: 'l1' }))).ok).toBe(true);
      expect((await b.stateOf(id))?.stateVersion).toBe(3);
    } finally {
      b.stopAll();
      await a.close();
    }
  });
  it('a transition the store did not keep (the database away for a moment) leaves no failed copy behind: the next event applies to the stored snapshot', async () => {
    const a = await createTestRuntime([repoLockKind()]);
    try {
      const id = lockActorId('default:org/u');
      await a.runtime.create(LOCK_KIND, id, { repoKey: 'default:org/u' });
      const now = Date.now();
      // A fault the real store shows only with its database gone: one commit rejected as unavailable.
      const transact = a.store.transact.bind(a.store);
      let failNext = true;
      (a.store as { transact: typeof transact }).transact = ((fn: Parameters<typeof transact>[0]) => {
        if (!failNext) return transact(fn);
        failNext = false;
        return Promise.reject(new StoreUnavailableError('store unavailable: connection refused'));
      }) as typeof transact;
      await expect(a.runtime.send(id, lockEvent({ type: 'ACQUIRE', leaseId: 'l1', owner: 'node-a/1/1', taskId: 't1', now, ttlMs: 60_000 }))).rejects.toBeInstanceOf(StoreUnavailableError);
      expect((await a.store.get<{ state: string }>('leases', 'default:org/u'))?.state ?? 'free').toBe('free');
      // The store answers again: the same event is applied (from the stored, unleased snapshot).
      expect((await a.runtime.send(id, lockEvent({ type: 'ACQUIRE', leaseId: 'l1', owner: 'node-a/1/1', taskId: 't1', now, ttlMs: 60_000 }))).ok).toBe(true);
      expect(await a.store.get<{ state: string; leaseId: string }>('leases', 'default:org/u')).toMatchObject({ state: 'held', leaseId: 'l1' });
    } finally {
      await a.close();
    }
  });

  it('two transitions of the stale copy queued at once are both refused: the second never passes on the other node\'s version', async () => {
    const a = await createTestRuntime([repoLockKind()]);
    const b = new ActorRuntime({ store: a.store, kinds: [repoLockKind()] });
    try {
      const id = lockActorId('default:org/s');
      await a.runtime.create(LOCK_KIND, id, { repoKey: 'default:org/s' });
      await b.restoreAll();
      const now = Date.now();
      expect((await a.runtime.send(id, lockEvent({ type: 'ACQUIRE', leaseId: 'l1', owner: 'node-a/1/1', taskId: 't1', now, ttlMs: 60_000 }))).ok).toBe(true);
      // In one turn, before the first refusal is heard of: the second would expect version 2, which a wrote.
      const first = b.send(id, lockEvent({ type: 'ACQUIRE', leaseId: 'l2', owner: 'node-b/1/1', taskId: 't2', now, ttlMs: 60_000 }));
      const second = b.send(id, lockEvent({ type: 'RELEASE', leaseId: 'l2' }));
      await expect(first).rejects.toBeInstanceOf(VersionConflictError);
      await expect(second).rejects.toBeInstanceOf(VersionConflictError);
      expect(await a.store.get<{ state: string; leaseId: string | null }>('leases', 'default:org/s')).toMatchObject({ state: 'held', leaseId: 'l1' });
    } finally {
      b.stopAll();
      await a.close();
    }
  });

  it('on a shared store (every node alike): each event reads the stored version first, so a copy another node moved on is hosted afresh and the event applies', async () => {
    const a = await createTestRuntime([repoLockKind()]);
    const one = new ActorRuntime({ store: a.store, kinds: [repoLockKind()], shared: true });
    const two = new ActorRuntime({ store: a.store, kinds: [repoLockKind()], shared: true });
    try {
      const id = lockActorId('default:org/t');
      await one.create(LOCK_KIND, id, { repoKey: 'default:org/t' });
      // Nothing is hosted at start on a shared store, eager kinds included: the first event hosts it.
      expect(await two.restoreAll()).toMatchObject({ restored: 0 });
      const now = Date.now();
      expect((await two.send(id, lockEvent({ type: 'ACQUIRE', leaseId: 'l1', owner: 'node-b/1/1', taskId: 't1', now, ttlMs: 60_000 }))).ok).toBe(true);
      // Node one's copy is a version behind: its next event is applied to the stored snapshot, not refused.
      expect((await one.send(id, lockEvent({ type: 'RELEASE', leaseId: 'l1' }))).ok).toBe(true);
      expect((await one.stateOf(id))?.stateVersion).toBe(3);
      expect(await a.store.get<{ state: string }>('leases', 'default:org/t')).toMatchObject({ state: 'free' });
    } finally {
      one.stopAll();
      two.stopAll();
      await a.close();
    }
  });
});
