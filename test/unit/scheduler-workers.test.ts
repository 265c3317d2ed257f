// The scheduler's I/O shell (src/scheduler/scheduler.ts, repo-lock-client.ts) in-process, with a real
// store, runtime and machines and a hand-moved clock: what happens to a task and its repository
// lease when the executor throws or returns early, when a lease ends under a worker or belongs to
// someone else (spec §7: release only by the matching leaseId, takeover after expiry), on stop(),
// and the wake-ups nobody announces. Fast enough for the scheduler's mutation run, unlike
// test/integration/scheduler-restart.test.ts.
//
// Test doubles: `faultyRuntime` wraps the real runtime and only injects a fault (a throw, or a
// HEARTBEAT held back) into one call; everything else goes to the real runtime. Records without a
// live actor are planted through the store: nothing else makes the runtime refuse to host them.
import { afterEach, describe, expect, it } from 'vitest';
import type { EventObject } from 'xstate';
import type { LeaseRecord, TaskRecord } from '../../src/domain/records.js';
import { lockActorId } from '../../src/leases/repo-lock-actor.js';
import type { ActorRuntime, ActorTx } from '../../src/runtime/actor-runtime.js';
import { errorMessage } from '../../src/scheduler/repo-lock-client.js';
import { createScheduler, type Scheduler, type SchedulerOptions } from '../../src/scheduler/index.js';
import { LeaseLostError, type AuditEvent, type Store } from '../../src/store/types.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import {
  auditWithEvent,
  createSchedulerRuntime,
  deferred as makeDeferred,
  ev,
  FakeClock,
  holdIntervals,
  scriptedExecutor,
  setPaused,
  submitTask,
  waitForTaskState,
  waitUntil,
  walkToSuccess,
  type ExecutorCall,
} from '../support/scheduler-harness.js';

const OWNER = 'default/100/1';
const FOREIGN = 'other/300/3';
const BY = 'scheduler:test';
const R = 'default:org/alpha';
const S = 'default:org/beta';
const T = 'default:org/gamma';

interface Logged {
  level: 'info' | 'warn' | 'error';
  obj: Record<string, unknown>;
  msg?: string;
}

let teardown: Array<() => Promise<void>> = [];
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

/** The real runtime with some of its methods replaced (fault injection only). */
function faultyRuntime(runtime: ActorRuntime, over: Partial<Pick<ActorRuntime, 'send' | 'create' | 'has' | 'transact'>>): ActorRuntime {
  return new Proxy(runtime, {
    get(target, prop) {
      if (prop in over) return over[prop as keyof typeof over];
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Runs `write` just before the first runtime transaction (the claim's): another writer landing between the scan and the claim. */
function beforeFirstClaim(runtime: ActorRuntime, write: () => Promise<unknown>): ActorRuntime {
  let pending: (() => Promise<unknown>) | null = write;
  return faultyRuntime(runtime, {
    transact: async <R>(fn: (atx: ActorTx) => Promise<R>): Promise<R> => {
      const w = pending;
      pending = null;
      await w?.();
      return runtime.transact(fn);
    },
  });
}

/** Wraps the runtime so that sending the first event of `type` throws, as a failing store write would. */
function failFirstSendOf(type: string): (runtime: ActorRuntime) => ActorRuntime {
  return (runtime) => {
    let failed = false;
    return faultyRuntime(runtime, {
      send: async (actorId, event, options) => {
        if (event.type === type && !failed) {
          failed = true;
          throw new Error('store write failed');
        }
        return runtime.send(actorId, event, options);
      },
    });
  };
}

/**
 * Test double: a store that stops answering heartbeats and expiries once `begin()` is called, as the
 * real store does during a database outage (here it has to be held by hand), until `end()`.
 */
function storeOutage(): { wrap: (runtime: ActorRuntime) => ActorRuntime; begin(): void; end(): void } {
  const away = deferred();
  let held = false;
  return {
    wrap: (runtime) =>
      faultyRuntime(runtime, {
        send: async (actorId, event, options) => {
          if (held && (event.type === 'HEARTBEAT' || event.type === 'EXPIRE')) await away.promise;
          return runtime.send(actorId, event, options);
        },
      }),
    begin: () => void (held = true),
    end: () => {
      held = false;
      away.resolve();
    },
  };
}

interface Rig {
  store: Store;
  runtime: ActorRuntime;
  scheduler: Scheduler;
  calls: ExecutorCall[];
  clock: FakeClock;
  logged: Logged[];
  /** How far the database's clock (the store's, which judges leases) runs ahead of the scheduler's. */
  db: { ahead: number };
}

async function rig(
  script: (call: ExecutorCall) => Promise<void>,
  options: Partial<SchedulerOptions> & { wrap?: (runtime: ActorRuntime) => ActorRuntime; before?: (store: Store, runtime: ActorRuntime) => Promise<void> } = {},
): Promise<Rig> {
  const { wrap, before, ...schedulerOptions } = options;
  // The store judges leases by the scheduler's clock: the database's clock, moved by hand.
  const clock = (schedulerOptions.clock as FakeClock | undefined) ?? new FakeClock();
  const db = { ahead: 0 };
  const { store, runtime, close } = await createSchedulerRuntime(undefined, { now: () => clock.now() + db.ahead });
  await before?.(store, runtime);
  const { executor, calls } = scriptedExecutor(runtime, script);
  const logged: Logged[] = [];
  const logger = {
    info: (obj: Record<string, unknown>, msg?: string) => void logged.push({ level: 'info', obj, msg }),
    warn: (obj: Record<string, unknown>, msg?: string) => void logged.push({ level: 'warn', obj, msg }),
    error: (obj: Record<string, unknown>, msg?: string) => void logged.push({ level: 'error', obj, msg }),
  };
  const scheduler = createScheduler({
    store,
    runtime: wrap ? wrap(runtime) : runtime,
    executor,
    owner: OWNER,
    leaseTtlMs: 1000,
    heartbeatMs: 0,
    clock,
    logger,
    by: BY,
    ...schedulerOptions,
  });
  teardown.push(async () => {
    await scheduler.stop();
    await close();
  });
  return { store, runtime, scheduler, calls, clock, logged, db };
}

const lease = (store: Store, repoKey: string) => store.get<LeaseRecord>('leases', repoKey);
const task = async (store: Store, taskId: string) => (await store.get<TaskRecord>('tasks', taskId))!;
const eventOf = (e: AuditEvent) => e.metadata?.['event'] as { type: string; leaseId?: string; errorCode?: string };
const waitForAbort = (call: ExecutorCall) => new Promise<void>((resolve) => call.signal.addEventListener('abort', () => resolve()));

async function drive(runtime: ActorRuntime, taskId: string, ...events: Parameters<typeof ev>[0][]): Promise<void> {
  for (const e of events) expect((await runtime.send(taskActorId(taskId), ev(e), { by: 'test' })).ok, `${taskId}: ${e.type}`).toBe(true);
}

/** A lease another owner holds (as another scheduler instance would), taken through the lock machine. */
async function foreignLease(runtime: ActorRuntime, repoKey: string, leaseId: string, taskId: string, now: number, ttlMs: number) {
  await runtime.create('lock', lockActorId(repoKey), { repoKey }, {
    events: [{ type: 'ACQUIRE', leaseId, owner: FOREIGN, taskId, now, ttlMs } as EventObject],
    by: 'other-scheduler',
  });
}

/**
 * A rig whose executor waits at `gate` until the test releases it, with task A (repository R)
 * submitted, claimed and in `preparing`.
 */
async function rigHoldingA(options: Parameters<typeof rig>[1] = {}): Promise<{ r: Rig; gate: ReturnType<typeof deferred> }> {
  const gate = deferred();
  const r = await rig(async (call) => {
    await gate.promise;
    await walkToSuccess(call);
  }, options);
  await submitTask(r.store, r.runtime, 'A', R);
  r.scheduler.start();
  await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
  await r.scheduler.settled();
  return { r, gate };
}

describe('when the executor is done with a task (spec §5.6, §7)', () => {
  it('an executor whose writes were fenced off (its lease ended before the scheduler heard): a lost lease, one retry, not an executor error', async () => {
    const r = await rig(async (call) => {
      if (call.run === 0) throw new LeaseLostError(R, 1);
      await walkToSuccess(call);
    });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await r.scheduler.settled();
    // Its one retry ran it again (a second worker run), where an executor's error would have failed it.
    expect(r.calls.map((c) => c.run)).toEqual([0, 1]);
    expect(auditWithEvent(await r.store.audit({}), 'task.transition', 'LEASE_LOST').map((e) => e.metadata?.['event'])).toMatchObject([{ errorCode: 'lease_lost' }]);
    expect(r.logged.filter((l) => l.msg === 'executor failed')).toEqual([]);
    expect((await r.store.audit({})).filter((e) => e.action === 'scheduler.lease_lost').map((e) => e.errorCode)).toEqual(['lease_lost']);
  });

  it('an executor that throws: the task fails with executor_error, the error is logged, the lease released; every write is audited as the scheduler', async () => {
    const r = await rig(async () => {
      throw new Error('workspace exploded');
    });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['failed']);
    await waitUntil(async () => (await lease(r.store, R))?.state === 'free', 'the lease to be released');
    await r.scheduler.settled();

    expect(await task(r.store, 'A')).toMatchObject({ state: 'failed', errorCode: 'executor_error' });
    expect(r.logged).toEqual([
      { level: 'error', obj: { taskId: 'A', err: 'workspace exploded' }, msg: 'executor failed' },
      { level: 'warn', obj: { taskId: 'A', state: 'preparing', errorCode: 'executor_error' }, msg: 'task left holding a lease; moving it on' },
    ]);
    const audit = await r.store.audit({});
    const acquire = auditWithEvent(audit, 'lock.transition', 'ACQUIRE');
    const release = auditWithEvent(audit, 'lock.transition', 'RELEASE');
    const claim = auditWithEvent(audit, 'task.transition', 'CLAIM');
    const fail = auditWithEvent(audit, 'task.transition', 'STEP_FAILED');
    expect([...acquire, ...release, ...claim, ...fail].map((e) => e.actor)).toEqual([BY, BY, BY, BY]);
    expect(eventOf(release[0]!).leaseId).toBe(eventOf(acquire[0]!).leaseId);
    expect(eventOf(claim[0]!).leaseId).toBe(eventOf(acquire[0]!).leaseId);
  });

  it('an executor that returns leaving the task running: it fails with executor_left_task (a warning, no error)', async () => {
    const r = await rig(async (call) => {
      await call.send({ type: 'WORKSPACE_READY' });
    });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['failed']);
    await waitUntil(async () => (await lease(r.store, R))?.state === 'free', 'the lease to be released');
    await r.scheduler.settled();
    expect(await task(r.store, 'A')).toMatchObject({ state: 'failed', errorCode: 'executor_left_task' });
    expect(r.logged).toEqual([
      { level: 'warn', obj: { taskId: 'A', state: 'running', errorCode: 'executor_left_task' }, msg: 'task left holding a lease; moving it on' },
    ]);
  });

  it('an executor that finishes normally: nothing logged, the lease released, its view of the lease is the one granted', async () => {
    const { r, gate } = await rigHoldingA();
    const t0 = r.clock.now();
    const held = (await lease(r.store, R))!;
    expect(Date.parse(held.expiresAt!)).toBe(t0 + 1000);
    expect(r.calls[0]!.lease).toEqual({ repoKey: R, leaseId: held.leaseId, owner: OWNER, expiresAt: t0 + 1000 });
    expect(r.scheduler.running()).toEqual([{ repoKey: R, taskId: 'A', leaseId: held.leaseId, expiresAt: t0 + 1000 }]);
    gate.resolve();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await waitUntil(async () => (await lease(r.store, R))?.state === 'free', 'the lease to be released');
    await r.scheduler.settled();
    expect(r.logged).toEqual([]);
    expect(r.scheduler.running()).toEqual([]);
  });

  it('a verification resumed after a restart that its executor left unfinished: the reply fails (failed_reply)', async () => {
    const r = await rig(async () => {}, {
      before: async (store, runtime) => {
        await submitTask(store, runtime, 'V', R);
        await drive(runtime, 'V', { type: 'CLAIM', leaseId: 'L-before-restart' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' });
      },
    });
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'V', ['failed_reply']);
    await waitUntil(async () => (await lease(r.store, R))?.state === 'free', 'the lease to be released');
    await r.scheduler.settled();
    expect(r.calls.map((c) => [c.taskId, c.lease.repoKey])).toEqual([['V', R]]);
    expect(await task(r.store, 'V')).toMatchObject({ state: 'failed_reply', errorCode: 'executor_left_task' });
    expect(auditWithEvent(await r.store.audit({}), 'task.transition', 'STEP_FAILED').map((e) => e.actor)).toEqual([BY]);
    expect(r.logged).toEqual([{ level: 'warn', obj: { taskId: 'V', state: 'verifying_reply', errorCode: 'executor_left_task' }, msg: 'task left holding a lease; moving it on' }]);
  });

  it('a resumed verification its executor left, decided on an outdated copy (another node wrote the task since): left as it is', async () => {
    // The scheduler's copy of the task lags one version behind the stored one, as a node's copy does
    // after another node moved the task: a decision made on it must not end the other node's work.
    const r = await rig(async () => {}, {
      before: async (store, runtime) => {
        await submitTask(store, runtime, 'V', R);
        await drive(runtime, 'V', { type: 'CLAIM', leaseId: 'L-before-restart' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' });
      },
      wrap: (runtime) =>
        new Proxy(runtime, {
          get(target, prop, receiver) {
            if (prop !== 'stateOf') return Reflect.get(target, prop, receiver) as unknown;
            return async (actorId: string) => {
              const current = await target.stateOf(actorId);
              return current && actorId === taskActorId('V') ? { ...current, stateVersion: current.stateVersion - 1 } : current;
            };
          },
        }),
    });
    r.scheduler.start();
    const leftAlone = (l: Logged) => l.msg === 'the task runs under another lease now: left as it is' && l.obj['taskId'] === 'V';
    await waitUntil(async () => r.logged.some(leftAlone), 'the decision on the outdated copy to be refused');
    await r.scheduler.stop();
    // (Resumed again here, since no other node drives it in this test; never failed.)
    expect((await task(r.store, 'V')).state).toBe('verifying_reply');
    expect(auditWithEvent(await r.store.audit({}), 'task.transition', 'STEP_FAILED')).toEqual([]);
  });

  it('a publishing step resumed after a restart that its executor left unfinished: the task fails', async () => {
    const r = await rig(async () => {}, {
      before: async (store, runtime) => {
        await submitTask(store, runtime, 'P', R);
        await drive(runtime, 'P', { type: 'CLAIM', leaseId: 'L-before-restart' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED', publish: true } as never);
      },
    });
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'P', ['failed']);
    await waitUntil(async () => (await lease(r.store, R))?.state === 'free', 'the lease to be released');
    await r.scheduler.settled();
    expect(r.calls).toHaveLength(1);
    expect(await task(r.store, 'P')).toMatchObject({ state: 'failed', errorCode: 'executor_left_task' });
    expect(r.logged).toEqual([{ level: 'warn', obj: { taskId: 'P', state: 'publishing', errorCode: 'executor_left_task' }, msg: 'task left holding a lease; moving it on' }]);
  });

  it('a resumed verification that finished on its own between the scan and the claim: no lease is granted, no executor runs', async () => {
    const r = await rig(walkToSuccess, {
      before: async (store, runtime) => {
        await submitTask(store, runtime, 'V', R);
        await drive(runtime, 'V', { type: 'CLAIM', leaseId: 'L-before-restart' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' });
      },
      // The verifier's confirmation lands after the scan read the task, just before the claim transaction.
      wrap: (runtime) => beforeFirstClaim(runtime, () => runtime.send(taskActorId('V'), ev({ type: 'REPLY_CONFIRMED' }), { by: 'verifier' })),
    });
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'V', ['succeeded']);
    await r.scheduler.settled();
    expect(r.calls).toHaveLength(0);
    expect(await lease(r.store, R)).toBeUndefined();
    expect((await r.store.audit({})).filter((e) => e.action === 'lease.granted' || e.action === 'runtime.event_rejected')).toEqual([]);
  });
});

describe('leases this scheduler does not hold (spec §7)', () => {
  it('never tries a repository whose lease another owner holds; after it expires, its task goes to a retry and this scheduler takes over', async () => {
    const clock = new FakeClock();
    const r = await rig(walkToSuccess, {
      clock,
      before: async (store, runtime) => {
        await submitTask(store, runtime, 'X', R);
        await foreignLease(runtime, R, 'L-foreign', 'X', clock.now(), 1000);
        await drive(runtime, 'X', { type: 'CLAIM', leaseId: 'L-foreign' });
        // A lease whose task this store does not know (another instance's): ending it touches no task.
        await foreignLease(runtime, T, 'L-ghost', 'ghost', clock.now(), 1000);
      },
    });
    await submitTask(r.store, r.runtime, 'Y', R);
    await submitTask(r.store, r.runtime, 'Z', S);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'Z', ['succeeded']);
    await r.scheduler.wake();
    await r.scheduler.settled();
    expect((await task(r.store, 'Y')).state).toBe('queued');
    expect((await task(r.store, 'X')).state).toBe('preparing');
    expect(await lease(r.store, R)).toMatchObject({ state: 'held', leaseId: 'L-foreign', owner: FOREIGN });
    // Not even tried: no ACQUIRE was refused by R's lock.
    expect((await r.store.audit({ actorId: lockActorId(R) })).filter((e) => e.action === 'runtime.event_rejected')).toEqual([]);

    clock.advance(1000); // both foreign leases expire
    await waitForTaskState(r.store, r.runtime, 'Y', ['succeeded']);
    await waitForTaskState(r.store, r.runtime, 'X', ['succeeded']);
    await r.scheduler.settled();
    const lost = (await r.store.audit({})).filter((e) => e.action === 'scheduler.lease_lost');
    expect(lost.map((e) => ({ actor: e.actor, level: e.level, taskId: e.taskId, errorCode: e.errorCode, metadata: e.metadata }))).toEqual([
      { actor: BY, level: 'alert', taskId: 'X', errorCode: 'lease_expired', metadata: { leaseId: 'L-foreign', liveWorker: false } },
      { actor: BY, level: 'alert', taskId: 'ghost', errorCode: 'lease_expired', metadata: { leaseId: 'L-ghost', liveWorker: false } },
    ]);
    // X was moved to a retry (§8: lease expired, one retry) and retried before the newer Y.
    const failed = auditWithEvent(await r.store.audit({ taskId: 'X' }), 'task.transition', 'LEASE_LOST');
    expect(failed.map((e) => [e.actor, e.toState, eventOf(e).errorCode])).toEqual([[BY, 'retry_wait', 'lease_expired']]);
    expect(holdIntervals(await r.store.audit({}), () => R).filter((i) => i.taskId !== 'Z').map((i) => i.taskId)).toEqual(['X', 'X', 'Y']);
    expect(r.logged).toEqual([
      { level: 'warn', obj: { taskId: 'X', state: 'preparing', errorCode: 'lease_expired' }, msg: 'task left holding a lease; moving it on' },
    ]);
  });

  it('an executor that comes back after its lease expired does not free the slot of the worker that took over', async () => {
    const stall = deferred();
    const second = deferred();
    const r = await rig(
      async (call) => {
        if (call.taskId === 'A' && call.run === 0) return stall.promise; // ignores its aborted signal
        if (call.taskId === 'A') await second.promise;
        await walkToSuccess(call);
      },
      { maxConcurrentTasks: 1 },
    );
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', S);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await r.scheduler.settled();
    r.clock.advance(1000); // A's lease expires; A goes to retry_wait and is claimed again (run 1)
    await waitUntil(() => r.calls.length === 2, 'A to be claimed again');
    await r.scheduler.settled();
    const retryLease = r.calls[1]!.lease.leaseId;
    expect(r.calls[0]!.signal.aborted).toBe(true);

    stall.resolve(); // the orphan returns: its RELEASE names the expired lease
    await waitUntil(
      async () => (await r.store.audit({ actorId: lockActorId(R) })).some((e) => e.action === 'runtime.event_rejected'),
      'the orphan to try its release',
    );
    await r.scheduler.settled();
    await r.scheduler.wake();
    await r.scheduler.settled();
    // The slot is still A's second worker's: with a cap of 1, B waits.
    expect(r.scheduler.running().map((x) => [x.taskId, x.leaseId])).toEqual([['A', retryLease]]);
    expect((await task(r.store, 'B')).state).toBe('queued');
    expect(await lease(r.store, R)).toMatchObject({ state: 'held', leaseId: retryLease });
    const lost = (await r.store.audit({})).filter((e) => e.action === 'scheduler.lease_lost');
    expect(lost.map((e) => [e.taskId, e.errorCode, e.metadata])).toEqual([['A', 'lease_expired', { leaseId: r.calls[0]!.lease.leaseId, liveWorker: true }]]);
    // An orphan's rejected release is expected (the runtime alert-audits it), not worth a warning.
    expect(r.logged.filter((l) => l.msg === 'lease release rejected')).toEqual([]);

    second.resolve();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
  });

  it('warns when the release of a lease ended elsewhere is rejected', async () => {
    const { r, gate } = await rigHoldingA();
    const leaseId = (await lease(r.store, R))!.leaseId;
    // Another scheduler's expiry scan ends the lease on the database's clock, which runs ahead of this
    // scheduler's; this one has no heartbeat to notice.
    r.db.ahead = 10_000;
    expect((await r.runtime.send(lockActorId(R), { type: 'EXPIRE', now: r.clock.now() + 10_000 } as EventObject, { by: 'test' })).ok).toBe(true);
    gate.resolve();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await waitUntil(() => r.logged.length > 0, 'the warning');
    await r.scheduler.settled();
    expect(r.logged).toEqual([{ level: 'warn', obj: { taskId: 'A', leaseId }, msg: 'lease release rejected' }]);
  });
});

describe('heartbeats (spec §7)', () => {
  it('a heartbeat that throws is logged and tried again: the lease does not expire', async () => {
    const { r, gate } = await rigHoldingA({ heartbeatMs: 300, wrap: failFirstSendOf('HEARTBEAT') });
    const t0 = r.clock.now();
    r.clock.advance(300); // first heartbeat throws
    await r.scheduler.settled();
    expect(r.logged).toEqual([{ level: 'error', obj: { taskId: 'A', err: 'store write failed' }, msg: 'heartbeat failed' }]);
    r.clock.advance(300); // tried again, accepted
    await r.scheduler.settled();
    expect(Date.parse((await lease(r.store, R))!.expiresAt!)).toBe(t0 + 600 + 1000);
    r.clock.advance(400); // the first expiry has passed
    await r.scheduler.settled();
    expect(await lease(r.store, R)).toMatchObject({ state: 'held', leaseId: r.calls[0]!.lease.leaseId });
    expect(r.calls[0]!.signal.aborted).toBe(false);
    expect((await r.store.audit({})).filter((e) => e.action === 'scheduler.lease_lost')).toEqual([]);
    gate.resolve();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
  });

  it('several nodes: a lease that cannot be renewed (the store does not answer) is lost here a heartbeat before its expiry, so the turn stops before another node may start it', async () => {
    const outage = storeOutage();
    const { r, gate } = await rigHoldingA({ heartbeatMs: 300, othersMayTakeOver: true, wrap: outage.wrap });
    outage.begin();
    const signal = r.calls[0]!.signal;
    r.clock.advance(650); // the first heartbeat (300) hangs; not yet a heartbeat before the expiry (700)
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(signal.aborted).toBe(false);
    r.clock.advance(60);
    await waitUntil(() => signal.aborted, 'the turn to be stopped');
    expect(String((signal.reason as Error).message)).toBe('lease_expired');
    expect(r.logged.some((l) => l.msg === 'lease not renewed before its expiry: stopping the turn')).toBe(true);
    await waitUntil(async () => (await r.store.audit({})).some((e) => e.action === 'scheduler.lease_lost' && e.errorCode === 'lease_expired'), 'the lease loss audited');
    outage.end();
    gate.resolve();
  });

  it('one node: a lease whose renewal waits (an outage) does not stop the turn; the renewal lands after it', async () => {
    const outage = storeOutage();
    const { r, gate } = await rigHoldingA({ heartbeatMs: 300, wrap: outage.wrap });
    outage.begin();
    const signal = r.calls[0]!.signal;
    r.clock.advance(900);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(signal.aborted).toBe(false);
    outage.end();
    gate.resolve();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
  });

  it('a heartbeat still in flight when the executor returns is dropped: no lease is lost afterwards', async () => {
    const heartbeatHeld = deferred();
    let heartbeats = 0;
    const { r, gate } = await rigHoldingA({
      heartbeatMs: 300,
      wrap: (runtime) =>
        faultyRuntime(runtime, {
          send: async (actorId, event, options) => {
            if (event.type === 'HEARTBEAT') {
              heartbeats += 1;
              await heartbeatHeld.promise; // a slow write: the HEARTBEAT lands after the executor returned
            }
            return runtime.send(actorId, event, options);
          },
        }),
    });
    r.clock.advance(300);
    await waitUntil(() => heartbeats === 1, 'the heartbeat to be sent');
    gate.resolve();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await waitUntil(async () => auditWithEvent(await r.store.audit({}), 'lock.transition', 'RELEASE').length === 1, 'the release');
    heartbeatHeld.resolve(); // the late HEARTBEAT names a released lease: the lock rejects it
    await r.scheduler.settled();
    r.clock.advance(3000);
    await r.scheduler.settled();
    expect(heartbeats).toBe(1);
    expect((await r.store.audit({})).filter((e) => e.action === 'scheduler.lease_lost')).toEqual([]);
    expect((await task(r.store, 'A')).state).toBe('succeeded');
    expect(r.logged).toEqual([]);
  });
});

describe('repository lock failures', () => {
  it('a repository whose lock is stored but not live is skipped (logged once); other repositories go on', async () => {
    const r = await rig(walkToSuccess, {
      before: async (store) => {
        // What a lock actor whose restore failed leaves: its record, no live actor.
        await store.transact((tx) =>
          tx.put('actors', lockActorId(R), {
            actorId: lockActorId(R),
            kind: 'lock',
            machineId: 'repoLock',
            machineVersion: 1,
            state: 'free',
            status: 'active',
            stateVersion: 1,
            snapshot: { broken: true },
            taskId: null,
            createdAt: new Date().toISOString(),
            updatedAt: new Date().toISOString(),
          }),
        );
      },
    });
    expect(await r.runtime.has(lockActorId(R))).toBe(false);
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', S);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    for (let i = 0; i < 3; i++) {
      r.clock.advance(30_000);
      await r.scheduler.wake();
      await r.scheduler.settled();
    }
    expect((await task(r.store, 'A')).state).toBe('queued');
    expect(r.calls.map((c) => c.taskId)).toEqual(['B']);
    expect(r.logged).toEqual([{ level: 'error', obj: { repoKey: R }, msg: 'repository lock is stored but not live; skipping the repository' }]);
  });

  it('a claim transaction that fails is logged and keeps nothing (no lease, the task queued); a later scan claims the task', async () => {
    let failNext = true;
    const r = await rig(walkToSuccess, {
      maxConcurrentTasks: 1,
      // Test double: the claim's commit fails once (a write error), after every write of the claim was made.
      wrap: (runtime) =>
        faultyRuntime(runtime, {
          transact: async <R>(fn: (atx: ActorTx) => Promise<R>): Promise<R> =>
            runtime.transact(async (atx) => {
              const result = await fn(atx);
              if (failNext) {
                failNext = false;
                throw new Error('store write failed');
              }
              return result;
            }),
        }),
    });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitUntil(() => r.logged.length > 0, 'the failure logged');
    await r.scheduler.settled();
    expect(r.logged).toEqual([{ level: 'error', obj: { taskId: 'A', err: 'store write failed' }, msg: 'claim failed' }]);
    expect((await task(r.store, 'A')).state).toBe('queued');
    expect(await lease(r.store, R)).toBeUndefined();
    expect(await r.store.get('actors', lockActorId(R))).toBeUndefined();
    expect((await r.store.audit({})).filter((e) => e.action === 'lease.granted' || e.action.startsWith('lock.'))).toEqual([]);
    expect(r.calls).toHaveLength(0);
    r.clock.advance(30_000); // the safety poll
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    expect(r.calls).toHaveLength(1);
  });

  it('a pick its claim cannot move holds up no other: the batch is claimed pick by pick, the others in the same scan', async () => {
    const r = await rig(walkToSuccess, {
      maxConcurrentTasks: 2,
      // Test double: every claim of task A fails in its transaction (as a transition the task refuses would).
      wrap: (runtime) =>
        faultyRuntime(runtime, {
          transact: async <R>(fn: (atx: ActorTx) => Promise<R>): Promise<R> =>
            runtime.transact(async (atx) =>
              fn({ tx: atx.tx, create: atx.create, send: (id, event, options) => (id === taskActorId('A') ? Promise.reject(new Error('A refused')) : atx.send(id, event, options)) }),
            ),
        }),
    });
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', S);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    expect((await task(r.store, 'A')).state).toBe('queued');
    expect(r.logged).toContainEqual({ level: 'error', obj: { taskId: 'A', err: 'A refused' }, msg: 'claim failed' });
    expect(r.calls).toHaveLength(1);
  });

  it('a release that throws is logged; the slot is freed anyway and the lease expires on its own', async () => {
    const r = await rig(walkToSuccess, {
      maxConcurrentTasks: 1,
      wrap: failFirstSendOf('RELEASE'),
    });
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'B', S);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    await r.scheduler.settled();
    expect(r.logged).toEqual([{ level: 'error', obj: { taskId: 'A', err: 'store write failed' }, msg: 'lease release after the executor failed' }]);
    expect(await lease(r.store, R)).toMatchObject({ state: 'held', taskId: 'A' });
    r.clock.advance(1000);
    await waitUntil(async () => (await lease(r.store, R))?.state === 'free', 'the lease to expire');
  });

  it('a scan that throws is logged, and the next wake-up scans again', async () => {
    let failNext = false;
    const r = await rig(walkToSuccess, {
      wrap: (runtime) =>
        faultyRuntime(runtime, {
          has: async (actorId: string) => {
            if (failNext) {
              failNext = false;
              throw new Error('index corrupt');
            }
            return runtime.has(actorId);
          },
        }),
    });
    r.scheduler.start();
    await r.scheduler.settled();
    failNext = true;
    await submitTask(r.store, r.runtime, 'A', R); // its ACCEPT wakes the scheduler: that scan throws
    await r.scheduler.settled();
    expect((await task(r.store, 'A')).state).toBe('queued');
    expect(r.logged).toEqual([{ level: 'error', obj: { err: 'index corrupt' }, msg: 'scheduler scan failed' }]);
    await r.scheduler.wake();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
  });

  it('a task whose actor is not live is never claimed and does not block its repository', async () => {
    const r = await rig(walkToSuccess, {
      before: async (store, runtime) => {
        await submitTask(store, runtime, 'model', R);
        // A queued record older than everything, without an actor (its restore failed).
        await store.transact(async (tx) => {
          const t = (await tx.get<TaskRecord>('tasks', 'model'))!;
          await tx.put<TaskRecord>('tasks', 'ghost', { ...t, taskId: 'ghost', deliveryKey: 'default:ghost', queueSeq: 0 });
        });
      },
    });
    await submitTask(r.store, r.runtime, 'B', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'model', ['succeeded']);
    await waitForTaskState(r.store, r.runtime, 'B', ['succeeded']);
    expect((await task(r.store, 'ghost')).state).toBe('queued');
    expect(r.calls.map((c) => c.taskId)).toEqual(['model', 'B']);
  });

  it('error texts are cut to 300 characters', () => {
    expect(errorMessage(new Error('x'.repeat(500)))).toBe('x'.repeat(300));
    expect(errorMessage('plain')).toBe('plain');
  });
});

describe('start, stop and wake-ups', () => {
  it('before start(): wake() claims nothing, and stop() has nothing to stop', async () => {
    const r = await rig(walkToSuccess);
    await submitTask(r.store, r.runtime, 'A', R);
    await r.scheduler.wake();
    await r.scheduler.settled();
    expect((await task(r.store, 'A')).state).toBe('queued');
    await r.scheduler.stop();
    expect(r.calls).toEqual([]);
  });

  it('stop() aborts running executors, waits for them and releases their leases; the task stays for recovery; nothing is claimed after', async () => {
    let returned = false;
    const r = await rig(async (call) => {
      await waitForAbort(call);
      await new Promise((done) => setTimeout(done, 20));
      returned = true;
    });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await r.scheduler.settled();
    await r.scheduler.stop();
    expect(returned).toBe(true);
    expect((r.calls[0]!.signal.reason as Error).message).toBe('scheduler_stopping');
    expect((await lease(r.store, R))!.state).toBe('free');
    // Not failed here: the next start's recovery moves it to retry_wait (interrupted_by_restart).
    expect((await task(r.store, 'A')).state).toBe('preparing');
    expect(r.logged).toEqual([]);

    await submitTask(r.store, r.runtime, 'B', S);
    await r.scheduler.wake();
    await r.scheduler.settled();
    expect((await task(r.store, 'B')).state).toBe('queued');
    expect(r.calls).toHaveLength(1);
  });

  it('stop() as a claim transaction begins: nothing is claimed, no lease granted, the task stays queued', async () => {
    let stopping: Promise<void> | null = null;
    let scheduler: Scheduler | null = null;
    const r = await rig(walkToSuccess, {
      wrap: (runtime) =>
        beforeFirstClaim(runtime, async () => {
          stopping = scheduler!.stop();
        }),
    });
    scheduler = r.scheduler;
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitUntil(() => stopping !== null, 'the claim transaction');
    await stopping;
    expect(await lease(r.store, R)).toBeUndefined();
    expect((await task(r.store, 'A')).state).toBe('queued');
    expect(r.calls).toEqual([]);
  });

  it('the safety poll finds work nobody announced (a pause lifted by a direct write), again and again', async () => {
    const r = await rig(walkToSuccess, { safetyPollMs: 5000 });
    await setPaused(r.store, true);
    r.scheduler.start();
    for (const id of ['A', 'B']) {
      await setPaused(r.store, true);
      await submitTask(r.store, r.runtime, id, R);
      await r.scheduler.settled();
      await setPaused(r.store, false); // a store write: no transition, no wake-up
      await r.scheduler.settled();
      expect((await task(r.store, id)).state).toBe('queued');
      r.clock.advance(5000);
      await waitForTaskState(r.store, r.runtime, id, ['succeeded']);
      await waitUntil(async () => (await lease(r.store, R))?.state === 'free', 'the lease to be released');
      await r.scheduler.settled();
    }
  });

  it('running() during a claim lists only tasks whose executor started, and never throws', async () => {
    const seen: Array<unknown> = [];
    const r = await rig(async (call) => {
      await new Promise((done) => setTimeout(done, 0));
      seen.push(['executor', r.scheduler.running().map((x) => x.taskId)]);
      await walkToSuccess(call);
    });
    r.runtime.onTransition((n) => {
      if (n.kind !== 'lock' || n.toState !== 'held') return;
      try {
        seen.push(['acquiring', r.scheduler.running()]);
      } catch (err) {
        seen.push(['threw', String(err)]);
      }
    });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    expect(seen).toEqual([
      ['acquiring', []],
      ['executor', ['A']],
    ]);
  });
});

describe('the `now` shorthand', () => {
  it('dates leases by the given now() (with real timers)', async () => {
    const at = 1_900_000_000_000;
    const r = await rig(walkToSuccess, { clock: undefined, now: () => at });
    await submitTask(r.store, r.runtime, 'A', R);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['succeeded']);
    const acquire = auditWithEvent(await r.store.audit({}), 'lock.transition', 'ACQUIRE')[0]!;
    expect(eventOf(acquire)).toMatchObject({ now: at, ttlMs: 1000 });
  });
});

describe('several nodes on one store (othersMayTakeOver)', () => {
  it('a task left preparing under a lease that ended elsewhere is moved on first; no task of its repository is claimed before that', async () => {
    const r = await rig(walkToSuccess, {
      othersMayTakeOver: true,
      before: async (store, runtime) => {
        // B: preparing under a lease nobody holds any more (its node died; another ended the lease).
        await submitTask(store, runtime, 'B', S);
        await drive(runtime, 'B', { type: 'CLAIM', leaseId: 'L-gone' });
        await submitTask(store, runtime, 'C', S);
      },
    });
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'C', ['succeeded']);
    await r.scheduler.settled();
    const audit = await r.store.audit({});
    const movedOn = auditWithEvent(audit, 'task.transition', 'LEASE_LOST').find((e) => e.taskId === 'B')!;
    const claimC = auditWithEvent(audit, 'task.transition', 'CLAIM').find((e) => e.taskId === 'C')!;
    expect(eventOf(movedOn).errorCode).toBe('lease_expired');
    expect(movedOn.seq).toBeLessThan(claimC.seq);
  });
});

describe('recover() through the scheduler (spec §5.5)', () => {
  it('does not interrupt a task a live worker of this process runs, only the others', async () => {
    const r = await rig(waitForAbort, {
      maxConcurrentTasks: 2,
      before: async (store, runtime) => {
        // B: preparing under a lease that no longer exists, and no worker runs it.
        await submitTask(store, runtime, 'B', S);
        await drive(runtime, 'B', { type: 'CLAIM', leaseId: 'L-gone' });
      },
    });
    await submitTask(r.store, r.runtime, 'A', R);
    await submitTask(r.store, r.runtime, 'C', T);
    r.scheduler.start();
    await waitForTaskState(r.store, r.runtime, 'A', ['preparing']);
    await waitForTaskState(r.store, r.runtime, 'C', ['preparing']);
    await r.scheduler.settled();
    // Both leases end elsewhere (another scheduler's expiry scan, on the database's clock, which runs
    // ahead of this scheduler's); the workers go on without heartbeats.
    r.db.ahead = 10_000;
    for (const repoKey of [R, T]) {
      expect((await r.runtime.send(lockActorId(repoKey), { type: 'EXPIRE', now: r.clock.now() + 10_000 } as EventObject, { by: 'test' })).ok).toBe(true);
    }
    await r.scheduler.settled();
    const result = await r.scheduler.recover();
    expect(result).toMatchObject({ leasesExpired: 0, leasesReleased: 0, leasesKept: 0, interruptedToRetry: ['B'] });
    expect((await task(r.store, 'A')).state).toBe('preparing');
    expect((await task(r.store, 'C')).state).toBe('preparing');
    expect(await task(r.store, 'B')).toMatchObject({ state: 'retry_wait', errorCode: 'interrupted_by_restart' });
  });
});
