// Claims by two nodes at once on one store, on each engine (project main: SQLite; project
// store-on-postgres: PostgreSQL, each node with its own connections to one database). Every node's
// scheduler scans the same queue at the same moments; a claim is one transaction (claim-transaction.ts)
// whose rows are taken with SKIP LOCKED on PostgreSQL. What must hold: every task claimed and run
// exactly once, no claim race wasted as a refused lease grant, a rejected transition or a failed claim
// transaction, and never two tasks of one repository running at once.
import { afterEach, describe, expect, it } from 'vitest';
import { STORE_INDEXES, type TaskRecord } from '../../src/domain/records.js';
import { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import { createScheduler, type Scheduler } from '../../src/scheduler/index.js';
import { announceClaimable } from '../../src/scheduler/claimable-channel.js';
import { claimTogether } from '../../src/scheduler/claim-transaction.js';
import { repoLockClient } from '../../src/scheduler/repo-lock-client.js';
import { claimPreference, type ClaimPreference } from '../../src/scheduler/claim-preference.js';
import { newSessionRecord } from '../../src/sessions/session-actor.js';
import type { SessionRecord } from '../../src/domain/records.js';
import type { Store } from '../../src/store/types.js';
import { auditWithEvent, schedulerKinds, scriptedExecutor, submitTask, waitUntil, walkToSuccess, type ExecutorCall } from '../support/scheduler-harness.js';
import { STORE_ENGINE, storeDirs } from '../support/store-helpers.js';

const env = storeDirs();
const running: Scheduler[] = [];
afterEach(async () => {
  for (const scheduler of running.splice(0)) await scheduler.stop();
  await env.cleanup();
});

const REPOS = 30;
const TASKS_PER_REPO = 3;
const SLOTS_PER_NODE = 4;

interface Logged {
  node: string;
  level: string;
  msg: string | undefined;
  obj: Record<string, unknown>;
}

describe('claims by several nodes at once', () => {
  it('every queued task is claimed and run exactly once; no lease grant or transition is refused; one running task per repository', async () => {
    const dir = await env.dir();
    const first = await env.open({ dir, indexes: STORE_INDEXES });
    // SQLite has one writer, so its nodes share the store; on PostgreSQL each node has its own pool.
    const second = STORE_ENGINE === 'sqlite' ? first : await env.open({ dir, indexes: STORE_INDEXES });

    const logged: Logged[] = [];
    const runningIn = new Map<string, string>();
    const overlaps: string[] = [];
    const runs = new Map<string, number>();
    const node = (name: string, store: Store) => {
      const runtime = new ActorRuntime({ store, kinds: schedulerKinds(), shared: true });
      const { executor } = scriptedExecutor(runtime, async (call) => {
        const repoKey = call.lease.repoKey;
        const other = runningIn.get(repoKey);
        if (other !== undefined) overlaps.push(`${repoKey}: ${call.taskId} started while ${other} ran`);
        runningIn.set(repoKey, call.taskId);
        runs.set(call.taskId, (runs.get(call.taskId) ?? 0) + 1);
        try {
          await walkToSuccess(call);
        } finally {
          if (runningIn.get(repoKey) === call.taskId) runningIn.delete(repoKey);
        }
      });
      const log = (level: string) => (obj: Record<string, unknown>, msg?: string) => void logged.push({ node: name, level, msg, obj });
      const scheduler = createScheduler({
        store,
        runtime,
        executor,
        owner: `${name}/1/1`,
        by: `scheduler:${name}`,
        maxConcurrentTasks: SLOTS_PER_NODE,
        leaseTtlMs: 60_000,
        heartbeatMs: 0,
        // Nodes hear of each other's work only through the store: both look again every few ms, so their scans meet.
        safetyPollMs: 5,
        othersMayTakeOver: true,
        logger: { info: log('info'), warn: log('warn'), error: log('error') },
      });
      running.push(scheduler);
      return { runtime, scheduler };
    };
    const a = node('node-a', first);
    const b = node('node-b', second);

    const taskIds: string[] = [];
    for (let t = 0; t < TASKS_PER_REPO; t++) {
      for (let r = 0; r < REPOS; r++) {
        const taskId = `t${r}-${t}`;
        taskIds.push(taskId);
        await submitTask(first, a.runtime, taskId, `default:org/repo-${r}`);
      }
    }
    a.scheduler.start();
    b.scheduler.start();
    await waitUntil(
      async () => (await first.byIndex<TaskRecord>('tasks', 'state', 'succeeded')).length === taskIds.length,
      'every task to succeed',
      15_000,
    );
    await Promise.all([a.scheduler.settled(), b.scheduler.settled()]);

    const audit = await first.audit({});
    // Each task claimed once (one CLAIM, one granted lease), run once, by either node.
    const claims = auditWithEvent(audit, 'task.transition', 'CLAIM');
    expect(claims.map((e) => e.taskId).sort()).toEqual([...taskIds].sort());
    expect(audit.filter((e) => e.action === 'lease.granted')).toHaveLength(taskIds.length);
    expect([...runs.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(runs.size).toBe(taskIds.length);
    // No claim race wasted: no rejected transition, no refused grant (it would fail its claim transaction), no lost lease.
    const wasted = {
      rejectedTransitions: audit.filter((e) => e.action === 'runtime.event_rejected').length,
      lostLeases: audit.filter((e) => e.action === 'scheduler.lease_lost').length,
      failedClaims: logged.filter((l) => l.msg === 'claim failed').length,
      errorsOrWarnings: logged.filter((l) => l.level !== 'info').length,
    };
    expect(wasted, JSON.stringify(logged.slice(0, 5))).toEqual({ rejectedTransitions: 0, lostLeases: 0, failedClaims: 0, errorsOrWarnings: 0 });
    expect(overlaps).toEqual([]);
    // Both nodes took part: the claims were contested, not taken by one node alone.
    const byNode = new Set(claims.map((e) => e.actor));
    expect(byNode).toEqual(new Set(['scheduler:node-a', 'scheduler:node-b']));
  });

  /** A node as the service sets one up on a shared store: claimable transitions announced on the database. */
  const sharedNode = (name: string, store: Store, options: { slots: number; script: (call: ExecutorCall) => Promise<void>; preference?: ClaimPreference }) => {
    const owner = `${name}/1/1`;
    const runtime = new ActorRuntime({ store, kinds: schedulerKinds(), shared: true, announce: announceClaimable(owner) });
    const { executor, calls } = scriptedExecutor(runtime, options.script);
    const scheduler = createScheduler({
      store,
      runtime,
      executor,
      owner,
      by: `scheduler:${name}`,
      maxConcurrentTasks: options.slots,
      leaseTtlMs: 60_000,
      heartbeatMs: 0,
      // Only announcements wake a node here.
      safetyPollMs: 600_000,
      othersMayTakeOver: true,
      ...(options.preference ? { claimPreference: options.preference } : {}),
    });
    running.push(scheduler);
    return { runtime, scheduler, calls };
  };

  it('a task queued on a node at capacity is claimed at once by an idle node, whose own safety poll is 10 minutes away', async () => {
    const dir = await env.dir();
    const first = await env.open({ dir, indexes: STORE_INDEXES });
    const second = STORE_ENGINE === 'sqlite' ? first : await env.open({ dir, indexes: STORE_INDEXES });
    const release = new Map<string, () => void>();
    const script = async (call: ExecutorCall) => {
      await new Promise<void>((r) => release.set(call.taskId, r));
      await walkToSuccess(call);
    };
    const busy = sharedNode('node-busy', first, { slots: 1, script });
    busy.scheduler.start();
    await submitTask(first, busy.runtime, 'first', 'default:org/one');
    await waitUntil(async () => busy.calls.length === 1, 'the busy node to run its first task', 5_000);
    const idle = sharedNode('node-idle', second, { slots: 1, script });
    idle.scheduler.start();
    await idle.scheduler.settled();

    // Queued through the busy node (its intake), which has no slot left.
    await submitTask(first, busy.runtime, 'second', 'default:org/two');
    await waitUntil(async () => idle.calls.length === 1, 'the idle node to claim the task the busy node queued', 5_000);
    expect(idle.calls[0]!.taskId).toBe('second');
    for (const r of release.values()) r();
    await waitUntil(async () => (await first.byIndex<TaskRecord>('tasks', 'state', 'succeeded')).length === 2, 'both tasks to succeed', 5_000);
  });

  it('a new task is left for a moment to the node that accepted it: another node that hears of it at once does not take it', async () => {
    const dir = await env.dir();
    const first = await env.open({ dir, indexes: STORE_INDEXES });
    const second = STORE_ENGINE === 'sqlite' ? first : await env.open({ dir, indexes: STORE_INDEXES });
    const a = sharedNode('node-a', first, { slots: 1, script: walkToSuccess, preference: claimPreference({ nodeId: 'node-a', acceptedWindowMs: 600_000 }) });
    const b = sharedNode('node-b', second, { slots: 1, script: walkToSuccess, preference: claimPreference({ nodeId: 'node-b', acceptedWindowMs: 600_000 }) });
    b.scheduler.start();
    await b.scheduler.settled();
    // Accepted by node-a, whose scheduler has not looked yet.
    await submitTask(first, a.runtime, 'mention', 'default:org/one', { acceptedBy: 'node-a' });
    await new Promise((r) => setTimeout(r, 200));
    await b.scheduler.settled();
    expect(b.calls, 'node-b left the task to the node that accepted it').toHaveLength(0);
    a.scheduler.start();
    await waitUntil(async () => a.calls.length === 1, 'node-a to claim what it accepted', 5_000);
    expect(b.calls).toHaveLength(0);
  });

  it('no task is claimed in a repository where another is still recorded as running after its lease ended', async () => {
    const store = await env.open({ dir: await env.dir(), indexes: STORE_INDEXES });
    const a = sharedNode('node-a', store, { slots: 1, script: () => new Promise<void>(() => undefined) });
    await submitTask(store, a.runtime, 'stuck', 'default:org/one');
    const [first] = await claimTogether({ runtime: a.runtime, picks: [{ taskId: 'stuck', repoKey: 'default:org/one', queueSeq: 0, event: 'CLAIM' }], owner: 'node-a/1/1', by: 'test', ttlMs: 1, now: Date.now, stopped: () => false });
    expect(first).toBeDefined();
    await new Promise((r) => setTimeout(r, 50));
    // Its holder died: the lease is ended (as another node's scheduler ends an expired one) before anyone moved the task on.
    expect(await repoLockClient({ runtime: a.runtime, by: 'test' }).expire('default:org/one', Date.now() + 120_000)).toBe(true);
    expect((await store.get<TaskRecord>('tasks', 'stuck'))?.state).toBe('preparing');
    await submitTask(store, a.runtime, 'next', 'default:org/one');
    const claimed = await claimTogether({ runtime: a.runtime, picks: [{ taskId: 'next', repoKey: 'default:org/one', queueSeq: 1, event: 'CLAIM' }], owner: 'node-b/1/1', by: 'test', ttlMs: 60_000, now: Date.now, stopped: () => false });
    expect(claimed).toEqual([]);
  });

  describe("a conversation's new task and the node holding its Codex thread", () => {
    const REPO = 'default:org/talk';
    /** The task, queued, and its conversation's session, whose thread `threadNode` holds. */
    const conversation = async (store: Store, runtime: ActorRuntime, threadNode: string) => {
      await submitTask(store, runtime, 'follow-up', REPO);
      const task = (await store.get<TaskRecord>('tasks', 'follow-up'))!;
      await store.transact((tx) => tx.insert<SessionRecord>('sessions', task.sessionKey, { ...newSessionRecord(task, 'gitea-main', new Date().toISOString()), threadNode }));
    };

    it('is left to that node: an idle node that looks first does not take it', async () => {
      const dir = await env.dir();
      const first = await env.open({ dir, indexes: STORE_INDEXES });
      const second = STORE_ENGINE === 'sqlite' ? first : await env.open({ dir, indexes: STORE_INDEXES });
      const a = sharedNode('node-a', first, { slots: 2, script: walkToSuccess, preference: claimPreference({ nodeId: 'node-a', threadWindowMs: 600_000 }) });
      await conversation(first, a.runtime, 'node-b');
      a.scheduler.start();
      await a.scheduler.settled();
      expect(a.calls, 'node-a left the task to the node holding its thread').toHaveLength(0);
      const b = sharedNode('node-b', second, { slots: 2, script: walkToSuccess, preference: claimPreference({ nodeId: 'node-b', threadWindowMs: 600_000 }) });
      b.scheduler.start();
      await waitUntil(async () => b.calls.length === 1, 'node-b to claim the task of its thread', 5_000);
      expect(a.calls).toHaveLength(0);
    });

    it("is taken by any node once the window has passed (the thread's node is busy or gone)", async () => {
      const store = await env.open({ dir: await env.dir(), indexes: STORE_INDEXES });
      let clock = 0;
      const a = sharedNode('node-a', store, { slots: 2, script: walkToSuccess, preference: claimPreference({ nodeId: 'node-a', threadWindowMs: 5_000, now: () => clock }) });
      await conversation(store, a.runtime, 'node-gone');
      a.scheduler.start();
      await a.scheduler.settled();
      clock = 4_999;
      await a.scheduler.wake();
      expect(a.calls, 'still inside the window').toHaveLength(0);
      clock = 5_000;
      await a.scheduler.wake();
      await waitUntil(async () => a.calls.length === 1, 'node-a to claim the task once the window passed', 5_000);
    });
  });
});
