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
import { threadPreference } from '../../src/scheduler/thread-preference.js';
import type { SessionRecord } from '../../src/domain/records.js';
import type { Store } from '../../src/store/types.js';
import { auditWithEvent, schedulerKinds, scriptedExecutor, submitTask, waitUntil, walkToSuccess } from '../support/scheduler-harness.js';
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

  it('a task queued on a node at capacity is claimed at once by an idle node, whose own safety poll is 10 minutes away', async () => {
    const dir = await env.dir();
    const first = await env.open({ dir, indexes: STORE_INDEXES });
    const second = STORE_ENGINE === 'sqlite' ? first : await env.open({ dir, indexes: STORE_INDEXES });
    const release = new Map<string, () => void>();
    const node = (name: string, store: Store) => {
      // As the service sets up a node on a shared store: claimable transitions are announced on the database.
      const runtime = new ActorRuntime({ store, kinds: schedulerKinds(), shared: true, announce: announceClaimable });
      const { executor, calls } = scriptedExecutor(runtime, async (call) => {
        await new Promise<void>((r) => release.set(call.taskId, r));
        await walkToSuccess(call);
      });
      const scheduler = createScheduler({
        store,
        runtime,
        executor,
        owner: `${name}/1/1`,
        by: `scheduler:${name}`,
        maxConcurrentTasks: 1,
        leaseTtlMs: 60_000,
        heartbeatMs: 0,
        safetyPollMs: 600_000,
        othersMayTakeOver: true,
      });
      running.push(scheduler);
      return { runtime, scheduler, calls };
    };
    const busy = node('node-busy', first);
    busy.scheduler.start();
    await submitTask(first, busy.runtime, 'first', 'default:org/one');
    await waitUntil(async () => busy.calls.length === 1, 'the busy node to run its first task', 5_000);
    const idle = node('node-idle', second);
    idle.scheduler.start();
    await idle.scheduler.settled();

    // Queued through the busy node (its intake), which has no slot left.
    await submitTask(first, busy.runtime, 'second', 'default:org/two');
    await waitUntil(async () => idle.calls.length === 1, 'the idle node to claim the task the busy node queued', 5_000);
    expect(idle.calls[0]!.taskId).toBe('second');
    for (const r of release.values()) r();
    await waitUntil(async () => (await first.byIndex<TaskRecord>('tasks', 'state', 'succeeded')).length === 2, 'both tasks to succeed', 5_000);
  });

  describe("a conversation's new task and the node holding its Codex thread", () => {
    const REPO = 'default:org/talk';
    const session = (threadNode: string): SessionRecord => ({
      sessionKey: `${REPO}:issue:1`,
      resourceKey: `${REPO}:issue:1`,
      repoKey: REPO,
      kind: 'issue',
      number: 1,
      threadId: 'thread-1',
      runtime: { app: 'codexapp', mode: 'yolo' },
      mcp: { server: 'gitea', transport: 'stdio', hostRef: 'gitea-main' },
      status: 'active',
      threadNode,
      lastTaskId: null,
      lastTurnId: null,
      createdAt: new Date().toISOString(),
      updatedAt: new Date().toISOString(),
      version: 1,
    });
    const node = (name: string, store: Store, windowMs: number) => {
      const runtime = new ActorRuntime({ store, kinds: schedulerKinds(), shared: true, announce: announceClaimable });
      const { executor, calls } = scriptedExecutor(runtime, walkToSuccess);
      const scheduler = createScheduler({
        store,
        runtime,
        executor,
        owner: `${name}/1/1`,
        by: `scheduler:${name}`,
        maxConcurrentTasks: 2,
        leaseTtlMs: 60_000,
        heartbeatMs: 0,
        safetyPollMs: 600_000,
        othersMayTakeOver: true,
        threadPreference: threadPreference({ store, nodeId: name, windowMs }),
      });
      running.push(scheduler);
      return { runtime, scheduler, calls };
    };

    it('is left to that node: an idle node that looks first does not take it', async () => {
      const dir = await env.dir();
      const first = await env.open({ dir, indexes: STORE_INDEXES });
      const second = STORE_ENGINE === 'sqlite' ? first : await env.open({ dir, indexes: STORE_INDEXES });
      await first.transact((tx) => tx.insert('sessions', `${REPO}:issue:1`, session('node-b')));
      const a = node('node-a', first, 30_000);
      a.scheduler.start();
      await submitTask(first, a.runtime, 'follow-up', REPO);
      await new Promise((r) => setTimeout(r, 500));
      await a.scheduler.settled();
      expect(a.calls, 'node-a left the task to the node holding its thread').toHaveLength(0);
      const b = node('node-b', second, 30_000);
      b.scheduler.start();
      await waitUntil(async () => b.calls.length === 1, 'node-b to claim the task of its thread', 5_000);
      expect(a.calls).toHaveLength(0);
    });

    it('is taken by any node once the window has passed (the thread\'s node is busy or gone)', async () => {
      const store = await env.open({ dir: await env.dir(), indexes: STORE_INDEXES });
      await store.transact((tx) => tx.insert('sessions', `${REPO}:issue:1`, session('node-gone')));
      const a = node('node-a', store, 400);
      a.scheduler.start();
      const submitted = performance.now();
      await submitTask(store, a.runtime, 'follow-up', REPO);
      await waitUntil(async () => a.calls.length === 1, 'node-a to claim the task after the window', 5_000);
      expect(performance.now() - submitted).toBeGreaterThanOrEqual(400);
    });
  });
});
