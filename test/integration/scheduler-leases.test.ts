import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { LeaseRecord, RepositoryRecord, TaskRecord } from '../../src/domain/records.js';
import { lockActorId } from '../../src/leases/repo-lock-actor.js';
import { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import { createScheduler, type Scheduler, type SchedulerOptions } from '../../src/scheduler/index.js';
import type { Store } from '../../src/store/types.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import {
  auditWithEvent,
  createSchedulerRuntime,
  deferred as makeDeferred,
  ev,
  FakeClock,
  holdIntervals,
  schedulerKinds,
  scriptedExecutor,
  setPaused,
  submitTask,
  waitForTaskState,
  waitUntil,
  walkToSuccess,
  type ExecutorCall,
} from '../support/scheduler-harness.js';

const OWNER = 'default/100/1';

interface Rig {
  store: Store;
  runtime: ActorRuntime;
  scheduler: Scheduler;
  calls: ExecutorCall[];
  clock: FakeClock;
  /** How far the database's clock (the store's, which judges leases) runs ahead of the scheduler's. */
  db: { ahead: number };
}

let teardown: Array<() => Promise<void>> = [];
// Every gate opens at teardown, so a failed test cannot leave an executor (and stop()) hanging.
let gates: Array<() => void> = [];
function deferred() {
  const d = makeDeferred();
  gates.push(d.resolve);
  return d;
}
afterEach(async () => {
  for (const open of gates) open();
  gates = [];
  for (const t of teardown.reverse()) await t();
  teardown = [];
});

async function rig(script: (call: ExecutorCall) => Promise<void>, options: Partial<SchedulerOptions> = {}): Promise<Rig> {
  const clock = (options.clock as FakeClock | undefined) ?? new FakeClock();
  const db = { ahead: 0 };
  const { store, runtime, close } = await createSchedulerRuntime(undefined, { now: () => clock.now() + db.ahead });
  const { executor, calls } = scriptedExecutor(runtime, script);
  const scheduler = createScheduler({ store, runtime, executor, owner: OWNER, leaseTtlMs: 1000, heartbeatMs: 0, clock, ...options });
  teardown.push(async () => {
    await scheduler.stop();
    await close();
  });
  return { store, runtime, scheduler, calls, clock, db };
}

const lease = async (store: Store, repoKey: string) => store.get<LeaseRecord>('leases', repoKey);
const task = async (store: Store, taskId: string) => (await store.get<TaskRecord>('tasks', taskId))!;
const R = 'default:org/alpha';
const S = 'default:org/beta';

describe('repository leases', () => {
  it('stop() also waits for an executor that lost its lease and is still finishing', async () => {
    const stall = deferred();
    const r = await rig(async (call) => {
      if (call.taskId === 'A' && call.run === 0) return stall.promise; // ignores its aborted signal for now
      await walkToSuccess(call);
    });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await r.scheduler.settled();
    r.clock.advance(1000); // the lease expires: A's first executor is an orphan now
    await waitUntil(async () => (await r.store.audit({})).some((e) => e.action === 'scheduler.lease_lost'), 'the lease to be lost');
    expect(r.calls[0]!.signal.aborted).toBe(true);
    let stopped = false;
    const stopping = r.scheduler.stop().then(() => (stopped = true));
    await new Promise((done) => setTimeout(done, 50));
    expect(stopped).toBe(false);
    stall.resolve();
    await stopping;
    expect(stopped).toBe(true);
  });

  it('a stalled worker loses its expired lease, the repository moves on, and its late RELEASE is rejected', async () => {
    const stall = deferred();
    const r = await rig(async (call) => {
      if (call.taskId === 'A' && call.run === 0) return stall.promise; // never looks at its signal
      await walkToSuccess(call);
    });
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await r.scheduler.settled();
    const first = (await lease(r.store, R))!;
    expect(first).toMatchObject({ state: 'held', taskId: 'A', owner: OWNER });
    expect((await task(r.store, 'B')).state).toBe('queued');

    r.clock.advance(999);
    await r.scheduler.settled();
    expect((await lease(r.store, R))!.leaseId).toBe(first.leaseId);
    expect(r.calls[0]!.signal.aborted).toBe(false);

    r.clock.advance(1); // expiresAt reached: the wake timer expires the lease
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    expect(r.calls[0]!.signal.aborted).toBe(true);

    const audit = await r.store.audit({});
    const expired = audit.filter((e) => e.action === 'lease.expired');
    expect(expired).toHaveLength(1);
    expect(expired[0]!.metadata).toMatchObject({ leaseId: first.leaseId, owner: OWNER });
    expect(audit.filter((e) => e.action === 'scheduler.lease_lost').map((e) => e.errorCode)).toEqual(['lease_expired']);
    // The leaseless task went to retry_wait (one retry) and ran again, before B (retry first).
    const failed = auditWithEvent(audit, 'task.transition', 'LEASE_LOST').filter((e) => e.taskId === 'A');
    expect(failed.map((e) => [e.toState, (e.metadata!['event'] as { errorCode: string }).errorCode])).toEqual([['retry_wait', 'lease_expired']]);
    const entries = holdIntervals(audit, () => R).map((i) => i.taskId);
    expect(entries).toEqual(['A', 'A', 'B']);

    // The orphaned executor comes back: its RELEASE names the expired lease and is rejected.
    stall.resolve();
    await waitUntil(
      async () =>
        (await r.store.audit({ actorId: lockActorId(R) })).some((e) => e.action === 'runtime.event_rejected' && (e.metadata?.['event'] as { leaseId?: string }).leaseId === first.leaseId),
      'the stale RELEASE to be rejected',
    );
    const rejected = (await r.store.audit({ actorId: lockActorId(R) })).filter((e) => e.action === 'runtime.event_rejected');
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({ level: 'alert', errorCode: 'illegal_transition', metadata: { event: { type: 'RELEASE', leaseId: first.leaseId } } });
    expect((await lease(r.store, R))!.state).toBe('free');
  });

  it('rejects and alert-audits a RELEASE by an old leaseId; the current lease stays held', async () => {
    const gate = deferred();
    const r = await rig(async (call) => {
      if (call.taskId === 'B') await gate.promise;
      await walkToSuccess(call);
    });
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await waitForTaskState(r.store, r.runtime, 'B', ['preparing']);
    await r.scheduler.settled();
    const oldLeaseId = (await task(r.store, 'A')).leaseId!;
    const current = (await lease(r.store, R))!;
    expect(current.taskId).toBe('B');
    expect(current.leaseId).not.toBe(oldLeaseId);

    for (const stale of [oldLeaseId, randomUUID()]) {
      const res = await r.runtime.send(lockActorId(R), { type: 'RELEASE', leaseId: stale } as never, { by: 'test' });
      expect(res).toMatchObject({ ok: false, reason: 'illegal_transition', state: 'held' });
    }
    expect(await lease(r.store, R)).toEqual(current);
    const alerts = (await r.store.audit({ actorId: lockActorId(R) })).filter((e) => e.action === 'runtime.event_rejected');
    expect(alerts.map((e) => (e.metadata!['event'] as { leaseId: string }).leaseId)).toEqual([oldLeaseId, expect.any(String)]);
    expect(alerts.every((e) => e.level === 'alert')).toBe(true);

    gate.resolve();
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    await waitUntil(async () => (await lease(r.store, R))!.state === 'free', 'B to release its lease');
  });

  it('renews the lease by heartbeat (expiresAt moves) and never expires while the worker runs', async () => {
    const gate = deferred();
    const r = await rig(
      async (call) => {
        await gate.promise;
        await walkToSuccess(call);
      },
      { heartbeatMs: 300 },
    );
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await r.scheduler.settled();
    const t0 = r.clock.now();
    expect(Date.parse((await lease(r.store, R))!.expiresAt!)).toBe(t0 + 1000);

    for (let k = 1; k <= 10; k++) {
      r.clock.advance(300);
      await r.scheduler.settled();
      expect(Date.parse((await lease(r.store, R))!.expiresAt!)).toBe(t0 + 300 * k + 1000);
    }
    // Three TTLs later: still the same lease, the executor's view moved with it, nothing expired.
    expect((await lease(r.store, R))!.leaseId).toBe(r.calls[0]!.lease.leaseId);
    expect(r.calls[0]!.lease.expiresAt).toBe(t0 + 3000 + 1000);
    expect(r.scheduler.running()).toEqual([{ repoKey: R, taskId: 'A', leaseId: r.calls[0]!.lease.leaseId, expiresAt: t0 + 4000 }]);
    expect(r.calls[0]!.signal.aborted).toBe(false);
    expect((await r.store.audit({})).filter((e) => e.action === 'lease.expired')).toEqual([]);
    expect(auditWithEvent(await r.store.audit({}), 'lock.transition', 'HEARTBEAT')).toHaveLength(10);

    gate.resolve();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await waitUntil(async () => (await lease(r.store, R))!.state === 'free', 'the lease to be released');
  });

  it("a node whose clock runs 30 s ahead of the database's can neither end nor take over a live lease: the lease row decides", async () => {
    const r = await rig((call) => new Promise<void>((resolve) => call.signal.addEventListener('abort', () => resolve())));
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await r.scheduler.settled();
    const held = (await r.store.get<LeaseRecord>('leases', R))!;
    expect(held).toMatchObject({ state: 'held', epoch: 1 });

    // Another node: its own runtime (its own copies of the actors, hosted from the store as at its
    // start) on the same database, its clock 30 s ahead; by that clock the lease expired long ago.
    const other = new ActorRuntime({ store: r.store, kinds: schedulerKinds() });
    await other.restoreAll();
    await submitTask(r.store, other, 'B', R);
    const clockB = new FakeClock(r.clock.now() + 30_000);
    const { executor, calls } = scriptedExecutor(other, walkToSuccess);
    const nodeB = createScheduler({ store: r.store, runtime: other, executor, owner: 'default/200/2', leaseTtlMs: 1000, heartbeatMs: 0, clock: clockB });
    teardown.push(async () => {
      await nodeB.stop();
      other.stopAll();
    });
    nodeB.start();
    // Bounded: a node that did take the lease over would go on to run its task here.
    await Promise.race([nodeB.wake().then(() => nodeB.settled()), new Promise((resolve) => setTimeout(resolve, 3000))]);

    // It tried (its EXPIRE by its clock), and the database refused: nothing of it was kept.
    expect(await r.store.get<LeaseRecord>('leases', R)).toEqual(held);
    expect((await r.store.audit({})).filter((e) => e.action === 'lease.expired' || e.action === 'lease.taken_over')).toEqual([]);
    expect(calls).toEqual([]);
    expect((await r.store.get<TaskRecord>('tasks', 'B'))!.state).toBe('queued');
    expect((await r.store.get<TaskRecord>('tasks', 'A'))!.state).toBe('preparing');
    expect(r.calls[0]!.signal.aborted).toBe(false);
  }, 15_000);

  it('aborts the executor signal when a heartbeat is rejected (lease lost to someone else)', async () => {
    const r = await rig(
      (call) =>
        new Promise<void>((resolve) => {
          call.signal.addEventListener('abort', () => resolve());
        }),
      { heartbeatMs: 300 },
    );
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await r.scheduler.settled();
    // Someone else ends the lease: the database's clock (the one that counts) is past its expiry while
    // this scheduler's runs 10 s behind, so another node's expiry scan ends it on time.
    r.db.ahead = 10_000;
    const res = await r.runtime.send(lockActorId(R), { type: 'EXPIRE', now: r.clock.now() + 10_000 } as never, { by: 'test' });
    expect(res.ok).toBe(true);
    r.clock.advance(300);
    await waitForTaskState(r.store, r.runtime, 'A', ['retry_wait', 'preparing']);
    await r.scheduler.settled();
    expect(r.calls[0]!.signal.aborted).toBe(true);
    expect((await r.store.audit({})).filter((e) => e.action === 'scheduler.lease_lost').map((e) => e.errorCode)).toEqual(['lease_lost']);
    const moved = auditWithEvent(await r.store.audit({ taskId: 'A' }), 'task.transition', 'LEASE_LOST');
    expect(moved.map((e) => (e.metadata!['event'] as { errorCode: string }).errorCode)).toEqual(['lease_lost']);
  });

  it('grants no lease for a claim that does not happen (task cancelled between scan and claim)', async () => {
    const r = await rig(walkToSuccess);
    // The cancel lands after the scan read the task queued, just before the claim transaction.
    let cancel: (() => Promise<unknown>) | null = () => r.runtime.send(taskActorId('A'), ev({ type: 'CANCEL', by: 'admin:test' }), { by: 'admin:test' });
    const transact = r.runtime.transact.bind(r.runtime);
    r.runtime.transact = async (fn) => {
      const c = cancel;
      cancel = null;
      await c?.();
      return transact(fn);
    };
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['cancelled']);
    await r.scheduler.settled();
    const audit = await r.store.audit({});
    expect(audit.filter((e) => e.action === 'lease.granted' || e.action === 'runtime.event_rejected' || e.action.startsWith('lock.'))).toEqual([]);
    expect(await lease(r.store, R)).toBeUndefined();
    expect(r.calls).toHaveLength(0);
  });
});

describe('scheduling rules', () => {
  it('pause claims nothing (tasks stay queued); resume picks up where it stopped', async () => {
    const gate = deferred();
    const r = await rig(async (call) => {
      if (call.taskId === 'A1') await gate.promise;
      await walkToSuccess(call);
    });
    await submitTask(r.store, r.runtime, 'A1', R);
    await submitTask(r.store, r.runtime, 'A2', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A1', ['preparing']);
    await r.scheduler.settled();

    await setPaused(r.store, true);
    const pausedAt = (await r.store.audit({})).at(-1)!.seq;
    await submitTask(r.store, r.runtime, 'B1', S);
    gate.resolve(); // A1 finishes while paused; its repository's lock goes free
    await waitForTaskState(r.store, r.runtime, 'A1', ['succeeded']);
    await waitUntil(async () => (await lease(r.store, R))!.state === 'free', 'A1 to release');
    r.clock.advance(60_000); // safety polls fire too
    await r.scheduler.wake();
    await r.scheduler.settled();
    expect((await task(r.store, 'A2')).state).toBe('queued');
    expect((await task(r.store, 'B1')).state).toBe('queued');
    const claimsWhilePaused = auditWithEvent(await r.store.audit({ afterSeq: pausedAt }), 'task.transition', 'CLAIM');
    expect(claimsWhilePaused).toEqual([]);
    expect(await lease(r.store, S)).toBeUndefined();

    await setPaused(r.store, false);
    const resumedAt = (await r.store.audit({})).at(-1)!.seq;
    await r.scheduler.wake();
    await waitForTaskState(r.store, r.runtime, 'A2', ['succeeded']);
    await waitForTaskState(r.store, r.runtime, 'B1', ['succeeded']);
    const claims = auditWithEvent(await r.store.audit({ afterSeq: pausedAt }), 'task.transition', 'CLAIM');
    expect(claims.map((e) => e.taskId).sort()).toEqual(['A2', 'B1']);
    expect(claims.every((e) => e.seq > resumedAt)).toBe(true);
  });

  it('respects maxConcurrentTasks across repositories', async () => {
    const gates = new Map<string, ReturnType<typeof deferred>>();
    const gateOf = (id: string) => gates.get(id) ?? gates.set(id, deferred()).get(id)!;
    const r = await rig(
      async (call) => {
        await gateOf(call.taskId).promise;
        await walkToSuccess(call);
      },
      { maxConcurrentTasks: 2 },
    );
    const ids = ['t0', 't1', 't2', 't3', 't4'];
    for (const [i, id] of ids.entries()) await submitTask(r.store, r.runtime, id, `default:org/repo-${i}`);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 't1', ['preparing']);
    await r.scheduler.settled();
    await r.scheduler.wake();
    await r.scheduler.settled();
    const states = async () => (await Promise.all(ids.map((id) => task(r.store, id)))).map((t) => t.state);
    expect(await states()).toEqual(['preparing', 'preparing', 'queued', 'queued', 'queued']);
    expect(r.scheduler.running().map((x) => x.taskId)).toEqual(['t0', 't1']);

    for (const id of ids) {
      gateOf(id).resolve();
      await waitForTaskState(r.store, r.runtime, id, ['succeeded']);
    }
    const intervals = holdIntervals(await r.store.audit({}), (id) => id);
    let live = 0;
    let peak = 0;
    for (const p of intervals.flatMap((i) => [{ s: i.enter, d: 1 }, { s: i.leave, d: -1 }]).sort((a, b) => a.s - b.s)) {
      live += p.d;
      peak = Math.max(peak, live);
    }
    expect(peak).toBe(2);
    // Arrival order across repositories too.
    expect(intervals.map((i) => i.taskId)).toEqual(ids);
  });

  it('picks a retry_wait task up at nextRetryAt, and before newer tasks of its repository', async () => {
    const gateB = deferred();
    const r = await rig(async (call) => {
      if (call.run === 0 && (call.taskId === 'A' || call.taskId === 'D')) {
        await call.send({ type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: r.clock.now() + 5000 });
        return;
      }
      if (call.taskId === 'B') await gateB.promise;
      await walkToSuccess(call);
    }, { leaseTtlMs: 60_000 });
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', R);
    await submitTask(r.store, r.runtime, 'C', R);
    await submitTask(r.store, r.runtime, 'D', S);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['retry_wait']);
    await waitForTaskState(r.store, r.runtime, 'D', ['retry_wait']);
    await waitForTaskState(r.store, r.runtime, 'B', ['preparing']);
    await r.scheduler.settled();

    r.clock.advance(4999);
    await r.scheduler.settled();
    expect((await task(r.store, 'D')).state).toBe('retry_wait');
    expect(auditWithEvent(await r.store.audit({}), 'task.transition', 'RETRY_DUE')).toEqual([]);

    r.clock.advance(1); // nextRetryAt: D's repository is free, A's is busy with B
    await waitForTaskState(r.store, r.runtime, 'D', ['succeeded']);
    expect((await task(r.store, 'A')).state).toBe('retry_wait');
    expect((await task(r.store, 'C')).state).toBe('queued');

    gateB.resolve();
    for (const id of ['A', 'B', 'C']) await waitForTaskState(r.store, r.runtime, id, ['succeeded']);
    const order = holdIntervals(await r.store.audit({}), (id) => (id === 'D' ? S : R))
      .filter((i) => i.repoKey === R)
      .map((i) => i.taskId);
    expect(order).toEqual(['A', 'B', 'A', 'C']);
    expect((await task(r.store, 'A')).attempt).toBe(1);
  });

  it('leaves blocked_workspace alone until an operator UNBLOCKs it', async () => {
    const r = await rig(async (call) => {
      if (call.taskId === 'A' && call.run === 0) {
        await call.send({ type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
        return;
      }
      await walkToSuccess(call);
    });
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    r.clock.advance(120_000);
    await r.scheduler.wake();
    await r.scheduler.settled();
    expect(await task(r.store, 'A')).toMatchObject({ state: 'blocked_workspace', errorCode: 'workspace_dirty' });
    expect(r.calls.filter((c) => c.taskId === 'A')).toHaveLength(1);

    const unblock = await r.runtime.send(taskActorId('A'), ev({ type: 'UNBLOCK', by: 'admin:alice' }), { by: 'admin:alice' });
    expect(unblock).toMatchObject({ ok: true, toState: 'queued' });
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    expect(r.calls.filter((c) => c.taskId === 'A')).toHaveLength(2);
    const audit = await r.store.audit({ taskId: 'A' });
    const unblockSeq = auditWithEvent(audit, 'task.transition', 'UNBLOCK')[0]!.seq;
    const claims = auditWithEvent(audit, 'task.transition', 'CLAIM').map((e) => e.seq);
    expect(claims).toHaveLength(2);
    expect(claims[1]).toBeGreaterThan(unblockSeq);
  });

  it('skips disabled repositories until they are active again', async () => {
    const r = await rig(walkToSuccess);
    const repo = (status: RepositoryRecord['status'], version: number): RepositoryRecord => ({
      repoKey: R,
      instanceId: 'default',
      owner: 'org',
      name: 'alpha',
      cloneUrl: 'http://127.0.0.1/org/alpha.git',
      workspacePath: '/tmp/none',
      defaultBranch: 'main',
      status,
      registeredAt: new Date().toISOString(),
      lastFetchAt: null,
      version,
    });
    await r.store.transact((tx) => tx.put('repositories', R, repo('disabled', 1)));
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', S);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    await r.scheduler.wake();
    await r.scheduler.settled();
    expect((await task(r.store, 'A')).state).toBe('queued');
    expect(await lease(r.store, R)).toBeUndefined();

    await r.store.transact((tx) => tx.put('repositories', R, repo('active', 2)));
    await r.scheduler.wake();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
  });
});
