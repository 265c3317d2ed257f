// Restart recovery (spec §5.5, §5.6 for the task states it may enter, §7 for leases), through
// `recoverAfterRestart` itself with a real store and runtime: the tasks and leases are put in their
// states by the machines' own events, the runtime is closed and a new one is opened on the same
// directory (what a restart does), and recovery runs there. In-process and a few hundred
// milliseconds, unlike test/integration/scheduler-restart.test.ts (a SIGKILLed child process), so the
// scheduler's mutation run can afford it. The two "could not" cases plant a record without its actor
// (fault injection through the store: nothing else can make the runtime refuse these events).
import { afterEach, describe, expect, it } from 'vitest';
import type { LeaseRecord, TaskRecord } from '../../src/domain/records.js';
import { lockActorId } from '../../src/leases/repo-lock-actor.js';
import type { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import { recoverAfterRestart, type RecoverDeps } from '../../src/scheduler/recover.js';
import type { AuditEvent, Store } from '../../src/store/types.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { createSchedulerRuntime, ev, submitTask } from '../support/scheduler-harness.js';

const SELF = 'default/200/2000';
const PREVIOUS = 'default/100/1000';
const FOREIGN = 'other/300/3000';
const BY = 'scheduler:recovery-test';

/** The database's clock for these stores (it judges leases): set to the time each planted event happened. */
let dbNow = Date.now();
const dbClock = { now: () => dbNow };

let closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.reverse()) await c();
  closers = [];
});

async function send(runtime: ActorRuntime, taskId: string, ...events: Parameters<typeof ev>[0][]): Promise<void> {
  for (const e of events) {
    const res = await runtime.send(taskActorId(taskId), ev(e), { by: 'test' });
    expect(res.ok, `${taskId}: ${e.type}`).toBe(true);
  }
}

async function hold(runtime: ActorRuntime, repoKey: string, leaseId: string, owner: string, taskId: string, now: number, ttlMs: number) {
  dbNow = now;
  await runtime.create('lock', lockActorId(repoKey), { repoKey }, {
    events: [{ type: 'ACQUIRE', leaseId, owner, taskId, now, ttlMs } as never],
  });
}

interface Logged { obj: Record<string, unknown>; msg?: string }
function recordingLogger() {
  const warned: Logged[] = [];
  return {
    warned,
    logger: {
      info: () => {},
      warn: (obj: Record<string, unknown>, msg?: string) => void warned.push({ obj, msg }),
      error: () => {},
    },
  };
}

/** Closes the first runtime (actors stop, store closes) and opens the same directory again. */
async function restart(dir: string, close: (remove?: boolean) => Promise<void>) {
  await close(false);
  const next = await createSchedulerRuntime(dir, dbClock);
  closers.push(() => next.close());
  // As the service does at start, before recovery.
  await next.runtime.restoreAll();
  return next;
}

const tasks = async (store: Store) => Object.fromEntries((await store.list<TaskRecord>('tasks')).map((t) => [t.taskId, t]));
const lease = (store: Store, repoKey: string) => store.get<LeaseRecord>('leases', repoKey);
const recoveryAudit = (audit: AuditEvent[]) =>
  audit.filter((e) => e.action.startsWith('recovery.')).map((e) => ({ action: e.action, actor: e.actor, metadata: e.metadata }));

describe('recoverAfterRestart (spec §5.5)', () => {
  it('deals with leases first, then interrupts preparing/running/aborting, counts queued and retry_wait, lists the rest', async () => {
    const first = await createSchedulerRuntime(undefined, dbClock);
    const { store, runtime } = first;
    const now = Date.parse('2026-12-01T12:00:00.000Z');
    // Submission order = queueSeq order. `late-run` is running but was submitted before `prep`, which
    // is preparing: recovery handles them by queueSeq, not by state.
    for (const id of ['late-run', 'prep', 'expired', 'foreign', 'mine', 'live', 'exhausted', 'abort', 'q1', 'q2', 'due', 'due-early', 'no-deadline', 'later', 'later2', 'later3', 'wait', 'verify', 'done']) {
      await submitTask(store, runtime, id, `default:org/${id}`);
    }
    // late-run: running under a lease of the previous process (unexpired).
    await hold(runtime, 'default:org/late-run', 'L-late', PREVIOUS, 'late-run', now - 1000, 60_000);
    await send(runtime, 'late-run', { type: 'CLAIM', leaseId: 'L-late' }, { type: 'WORKSPACE_READY' });
    // prep: preparing under a lease of the previous process.
    await hold(runtime, 'default:org/prep', 'L-prep', PREVIOUS, 'prep', now - 1000, 60_000);
    await send(runtime, 'prep', { type: 'CLAIM', leaseId: 'L-prep' });
    // expired: running, its lease's TTL ends exactly now (an expiry at `now` is expired).
    await hold(runtime, 'default:org/expired', 'L-exp', FOREIGN, 'expired', now - 60_000, 60_000);
    await send(runtime, 'expired', { type: 'CLAIM', leaseId: 'L-exp' }, { type: 'WORKSPACE_READY' });
    // foreign: preparing under another instance's valid lease (1 ms left): that owner may be alive.
    await hold(runtime, 'default:org/foreign', 'L-for', FOREIGN, 'foreign', now - 59_999, 60_000);
    await send(runtime, 'foreign', { type: 'CLAIM', leaseId: 'L-for' });
    // mine: this very process's own lease (same owner id): kept, not "a previous process".
    await hold(runtime, 'default:org/mine', 'L-mine', SELF, 'mine', now, 60_000);
    await send(runtime, 'mine', { type: 'CLAIM', leaseId: 'L-mine' }, { type: 'WORKSPACE_READY' });
    // live: preparing, no lease kept for it, but a worker of this process runs it.
    await send(runtime, 'live', { type: 'CLAIM', leaseId: 'L-live' });
    // exhausted: its one execution retry already spent, now running again.
    await send(
      runtime,
      'exhausted',
      { type: 'CLAIM', leaseId: 'L-x1' },
      { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: now - 5000 },
      { type: 'RETRY_DUE', leaseId: 'L-x2' },
      { type: 'WORKSPACE_READY' },
    );
    // abort: an operator's abort in flight.
    await send(runtime, 'abort', { type: 'CLAIM', leaseId: 'L-a' }, { type: 'WORKSPACE_READY' }, { type: 'ABORT', by: 'admin:ops' });
    // due / later: retry_wait, one whose deadline is exactly now (due), one a minute away.
    await send(runtime, 'due', { type: 'CLAIM', leaseId: 'L-d' }, { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: now });
    await send(runtime, 'due-early', { type: 'CLAIM', leaseId: 'L-de' }, { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: now - 1 });
    // A retryable failure that named no retry time: due at once. Due with a deadline 2, without 1, ahead 3:
    // counting the wrong ones (only deadlines, or only the future ones) gives another total.
    await send(runtime, 'no-deadline', { type: 'CLAIM', leaseId: 'L-nd' }, { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true });
    // A lease record that is free (held once, released): nothing to do for it, nothing to log.
    await hold(runtime, 'default:org/q1', 'L-q1', PREVIOUS, 'q1', now - 1000, 60_000);
    expect((await runtime.send(lockActorId('default:org/q1'), { type: 'RELEASE', leaseId: 'L-q1' } as never)).ok).toBe(true);
    await send(runtime, 'later', { type: 'CLAIM', leaseId: 'L-l' }, { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: now + 60_000 });
    await send(runtime, 'later2', { type: 'CLAIM', leaseId: 'L-l2' }, { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: now + 1 });
    await send(runtime, 'later3', { type: 'CLAIM', leaseId: 'L-l3' }, { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: now + 2 });
    await send(runtime, 'wait', { type: 'CLAIM', leaseId: 'L-w' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_WAITING_USER' }, { type: 'REPLY_CONFIRMED' });
    await send(runtime, 'verify', { type: 'CLAIM', leaseId: 'L-v' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' });
    await send(runtime, 'done', { type: 'CLAIM', leaseId: 'L-done' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' }, { type: 'REPLY_CONFIRMED' });

    const { store: s, runtime: rt } = await restart(first.dir, first.close);
    const before = await tasks(s);
    expect(Object.fromEntries(Object.entries(before).map(([id, t]) => [id, t.state]))).toMatchObject({
      'late-run': 'running', prep: 'preparing', expired: 'running', foreign: 'preparing', mine: 'running', live: 'preparing',
      exhausted: 'running', abort: 'aborting', q1: 'queued', q2: 'queued', due: 'retry_wait', 'due-early': 'retry_wait', later: 'retry_wait', later2: 'retry_wait', later3: 'retry_wait', 'no-deadline': 'retry_wait',
      wait: 'waiting_user', verify: 'verifying_reply', done: 'succeeded',
    });
    const startSeq = (await s.audit({})).at(-1)!.seq;
    const { warned, logger } = recordingLogger();
    const deps: RecoverDeps = { store: s, runtime: rt, owner: SELF, now, by: BY, hasLiveWorker: (id) => id === 'live', logger };
    dbNow = now;

    const result = await recoverAfterRestart(deps);

    expect(result).toEqual({
      leasesExpired: 1,
      leasesReleased: 2,
      leasesKept: 2,
      queued: 2,
      retryWait: 6,
      interruptedToRetry: ['late-run', 'prep', 'expired'],
      interruptedToFailed: ['exhausted'],
      abortingToAborted: ['abort'],
      verifyingReply: ['verify'],
      waitingUser: ['wait'],
    });
    expect(warned).toEqual([]);
    const after = await tasks(s);
    // §7: a previous process's lease is released, an expired one ends by EXPIRE, anyone else's valid lease is kept.
    expect(await lease(s, 'default:org/late-run')).toMatchObject({ state: 'free', leaseId: null });
    expect(await lease(s, 'default:org/prep')).toMatchObject({ state: 'free', leaseId: null });
    expect(await lease(s, 'default:org/expired')).toMatchObject({ state: 'free', leaseId: null });
    expect(await lease(s, 'default:org/foreign')).toMatchObject({ state: 'held', leaseId: 'L-for', owner: FOREIGN });
    expect(await lease(s, 'default:org/mine')).toMatchObject({ state: 'held', leaseId: 'L-mine', owner: SELF });
    const audit = await s.audit({ afterSeq: startSeq });
    // The lock events themselves are the recovery's, too.
    const lockEvents = audit.filter((e) => e.action === 'lock.transition').map((e) => [e.actorId, (e.metadata?.['event'] as { type: string }).type, e.actor]);
    expect(lockEvents).toEqual([
      [lockActorId('default:org/late-run'), 'RELEASE', BY],
      [lockActorId('default:org/prep'), 'RELEASE', BY],
      [lockActorId('default:org/expired'), 'EXPIRE', BY],
    ]);
    const released = audit.filter((e) => e.action === 'lease.released_after_restart');
    expect(released.map((e) => ({ actor: e.actor, actorId: e.actorId, taskId: e.taskId, metadata: e.metadata }))).toEqual([
      {
        actor: BY,
        actorId: lockActorId('default:org/late-run'),
        taskId: 'late-run',
        metadata: { repoKey: 'default:org/late-run', leaseId: 'L-late', owner: PREVIOUS, expiresAt: new Date(now + 59_000).toISOString() },
      },
      {
        actor: BY,
        actorId: lockActorId('default:org/prep'),
        taskId: 'prep',
        metadata: { repoKey: 'default:org/prep', leaseId: 'L-prep', owner: PREVIOUS, expiresAt: new Date(now + 59_000).toISOString() },
      },
    ]);
    expect(audit.filter((e) => e.action === 'lease.expired').map((e) => e.metadata?.['repoKey'])).toEqual(['default:org/expired']);
    // Leases before tasks: the last lease ended before the first task was interrupted.
    const leaseEnds = audit.filter((e) => e.action === 'lease.released_after_restart' || e.action === 'lease.expired').map((e) => e.seq);
    const interrupts = audit.filter((e) => e.action === 'task.transition' && (e.metadata?.['event'] as { type?: string })?.type === 'RECOVER_INTERRUPTED');
    expect(Math.max(...leaseEnds)).toBeLessThan(Math.min(...interrupts.map((e) => e.seq)));
    expect(interrupts.map((e) => e.taskId)).toEqual(['late-run', 'prep', 'expired', 'exhausted', 'abort']);
    expect(interrupts.every((e) => e.actor === BY)).toBe(true);
    // §5.6: interrupted → retry_wait (due now), over the retry limit → failed, aborting → aborted.
    for (const id of ['late-run', 'prep', 'expired']) {
      expect(after[id]).toMatchObject({ state: 'retry_wait', errorCode: 'interrupted_by_restart', nextRetryAt: new Date(now).toISOString() });
    }
    expect(after['exhausted']).toMatchObject({ state: 'failed', errorCode: 'retry_limit_exceeded' });
    expect(after['abort']).toMatchObject({ state: 'aborted', stoppedBy: 'admin:ops' });
    // Untouched: a valid lease of someone else (foreign, mine), a live worker (live), and every other state.
    for (const id of ['foreign', 'mine', 'live', 'q1', 'q2', 'due', 'due-early', 'no-deadline', 'later', 'later2', 'later3', 'wait', 'verify', 'done']) expect(after[id]).toEqual(before[id]);
    // Each step audited, by the recovery's actor, in the spec's order.
    expect(recoveryAudit(audit)).toEqual([
      { action: 'recovery.leases', actor: BY, metadata: { expired: 1, released: 2, kept: 2 } },
      { action: 'recovery.queued', actor: BY, metadata: { count: 2 } },
      { action: 'recovery.retry_wait', actor: BY, metadata: { count: 6, alreadyDue: 3 } },
      { action: 'recovery.interrupted', actor: BY, metadata: { toRetryWait: 3, toFailed: 1, toAborted: 1, skipped: 3 } },
      { action: 'recovery.untouched', actor: BY, metadata: { verifyingReply: 1, waitingUser: 1 } },
    ]);
    // The restored actors are live: the waiting task still takes the user's reply.
    expect((await rt.send(taskActorId('wait'), ev({ type: 'USER_REPLIED' }))).ok).toBe(true);
  });

  it('on an empty store audits every step with zero counts', async () => {
    const { store, runtime, close } = await createSchedulerRuntime();
    closers.push(() => close());
    const { warned, logger } = recordingLogger();
    const result = await recoverAfterRestart({ store, runtime, owner: SELF, now: Date.now(), by: BY, hasLiveWorker: () => false, logger });
    expect(result).toEqual({
      leasesExpired: 0, leasesReleased: 0, leasesKept: 0, queued: 0, retryWait: 0,
      interruptedToRetry: [], interruptedToFailed: [], abortingToAborted: [], verifyingReply: [], waitingUser: [],
    });
    expect(warned).toEqual([]);
    expect(recoveryAudit(await store.audit({}))).toEqual([
      { action: 'recovery.leases', actor: BY, metadata: { expired: 0, released: 0, kept: 0 } },
      { action: 'recovery.queued', actor: BY, metadata: { count: 0 } },
      { action: 'recovery.retry_wait', actor: BY, metadata: { count: 0, alreadyDue: 0 } },
      { action: 'recovery.interrupted', actor: BY, metadata: { toRetryWait: 0, toFailed: 0, toAborted: 0, skipped: 0 } },
      { action: 'recovery.untouched', actor: BY, metadata: { verifyingReply: 0, waitingUser: 0 } },
    ]);
  });

  it('logs and counts nothing for a lease or task whose actor refuses the event, and goes on', async () => {
    const { store, runtime, close } = await createSchedulerRuntime();
    closers.push(() => close());
    const now = Date.now();
    // Records without actors (the runtime answers unknown_actor): one expired lease, one lease of a
    // previous process, one running task.
    await store.transact(async (tx) => {
      await tx.put<LeaseRecord>('leases', 'default:org/gone', { repoKey: 'default:org/gone', leaseId: 'L-g', owner: FOREIGN, taskId: null, expiresAt: new Date(now - 1).toISOString(), state: 'held' });
      await tx.put<LeaseRecord>('leases', 'default:org/old', { repoKey: 'default:org/old', leaseId: 'L-o', owner: PREVIOUS, taskId: null, expiresAt: new Date(now + 60_000).toISOString(), state: 'held' });
    });
    await submitTask(store, runtime, 'ok', 'default:org/ok');
    await send(runtime, 'ok', { type: 'CLAIM', leaseId: 'L-ok' });
    await store.transact(async (tx) => {
      const t = (await tx.get<TaskRecord>('tasks', 'ok'))!;
      await tx.put<TaskRecord>('tasks', 'orphan', { ...t, taskId: 'orphan', deliveryKey: 'default:orphan', state: 'running', queueSeq: 0 });
    });
    const { warned, logger } = recordingLogger();
    const result = await recoverAfterRestart({ store, runtime, owner: SELF, now, by: BY, hasLiveWorker: () => false, logger });
    expect(result).toMatchObject({ leasesExpired: 0, leasesReleased: 0, leasesKept: 0, interruptedToRetry: ['ok'], interruptedToFailed: [] });
    expect(warned).toEqual([
      { obj: { repoKey: 'default:org/gone', reason: 'unknown_actor' }, msg: 'expired lease could not be ended' },
      { obj: { repoKey: 'default:org/old', reason: 'unknown_actor' }, msg: 'lease of a previous process could not be released' },
      { obj: { taskId: 'orphan', state: 'running', reason: 'unknown_actor' }, msg: 'interrupted task could not be recovered' },
    ]);
    expect((await store.audit({})).some((e) => e.action === 'lease.released_after_restart')).toBe(false);
    expect(recoveryAudit(await store.audit({})).find((e) => e.action === 'recovery.interrupted')!.metadata).toEqual({
      toRetryWait: 1, toFailed: 0, toAborted: 0, skipped: 1,
    });
  });
});
