import { afterEach, describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../src/domain/records.js';
import { createScheduler, type Scheduler } from '../../src/scheduler/index.js';
import {
  createSchedulerRuntime,
  holdIntervals,
  leaseIntervals,
  scriptedExecutor,
  submitTask,
  waitForTaskState,
  waitUntil,
  walkToSuccess,
} from '../support/scheduler-harness.js';

const REPOS = 20;
const PER_REPO = 10;
const MAX_CONCURRENT = 6;

describe('scheduler under load: 200 tasks over 20 repositories', () => {
  let cleanup: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await cleanup?.();
    cleanup = null;
  });

  it('never overlaps one repository, runs repositories in parallel, keeps FIFO per repository (from the audit log)', async () => {
    const { store, runtime, close } = await createSchedulerRuntime();
    const { executor, calls } = scriptedExecutor(runtime, (call) => walkToSuccess(call));
    const scheduler: Scheduler = createScheduler({
      store,
      runtime,
      executor,
      owner: 'default/1/1',
      maxConcurrentTasks: MAX_CONCURRENT,
      leaseTtlMs: 60_000,
    });
    cleanup = async () => {
      await scheduler.stop();
      await close();
    };
    scheduler.start();

    // Interleave repositories so a repository's tasks arrive spread over the whole submission.
    const taskIds: string[] = [];
    const repoOf = new Map<string, string>();
    for (let i = 0; i < PER_REPO; i++) {
      for (let r = 0; r < REPOS; r++) {
        const taskId = `t-${r}-${i}`;
        taskIds.push(taskId);
        repoOf.set(taskId, `default:org/repo-${r}`);
      }
    }
    await Promise.all(taskIds.map((id) => submitTask(store, runtime, id, repoOf.get(id)!)));
    await Promise.all(taskIds.map((id) => waitForTaskState(store, runtime, id, ['succeeded'], 30_000)));
    // The last executors return right after their task's final transition; their RELEASE follows.
    await waitUntil(async () => (await store.list<{ state: string }>('leases')).every((l) => l.state === 'free'), 'every lease released');
    await scheduler.settled();
    await runtime.settled();

    expect(calls).toHaveLength(200);
    const tasks = await store.list<TaskRecord>('tasks');
    expect(tasks.filter((t) => t.state === 'succeeded')).toHaveLength(200);

    const audit = await store.audit({});
    const intervals = holdIntervals(audit, (id) => repoOf.get(id)!);
    expect(intervals).toHaveLength(200);
    expect(intervals.every((i) => Number.isFinite(i.leave))).toBe(true);
    expect(intervals.every((i) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(i.leaseId))).toBe(true);
    expect(new Set(intervals.map((i) => i.leaseId)).size).toBe(200);

    // 1. No two tasks of one repository hold it at once.
    const byRepo = new Map<string, typeof intervals>();
    for (const i of intervals) byRepo.set(i.repoKey, [...(byRepo.get(i.repoKey) ?? []), i]);
    expect(byRepo.size).toBe(REPOS);
    for (const list of byRepo.values()) {
      const sorted = [...list].sort((a, b) => a.enter - b.enter);
      for (let k = 1; k < sorted.length; k++) expect(sorted[k]!.enter).toBeGreaterThan(sorted[k - 1]!.leave);
    }

    // 2. Each task's holding interval lies inside the lease its CLAIM named, for its repository.
    const leases = new Map(leaseIntervals(audit).map((l) => [l.leaseId, l]));
    for (const i of intervals) {
      const lease = leases.get(i.leaseId);
      expect(lease, i.taskId).toBeDefined();
      expect(lease!.repoKey).toBe(i.repoKey);
      expect(lease!.start).toBeLessThan(i.enter);
      expect(lease!.end).toBeGreaterThan(i.leave);
    }

    // 3. Repositories progress in parallel, and never more than the global cap at once.
    const points = intervals.flatMap((i) => [
      { seq: i.enter, d: +1, repo: i.repoKey },
      { seq: i.leave, d: -1, repo: i.repoKey },
    ]);
    points.sort((a, b) => a.seq - b.seq);
    let live = 0;
    let peak = 0;
    for (const p of points) {
      live += p.d;
      peak = Math.max(peak, live);
    }
    expect(peak).toBeGreaterThan(1);
    expect(peak).toBeLessThanOrEqual(MAX_CONCURRENT);
    const crossRepoOverlap = intervals.some((a) => intervals.some((b) => a.repoKey !== b.repoKey && a.enter < b.leave && b.enter < a.leave));
    expect(crossRepoOverlap).toBe(true);

    // 4. FIFO per repository: preparing entries in queueSeq order.
    const seqOf = new Map(tasks.map((t) => [t.taskId, t.queueSeq]));
    for (const list of byRepo.values()) {
      const order = [...list].sort((a, b) => a.enter - b.enter).map((i) => seqOf.get(i.taskId)!);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }

    // One lock per repository, and nothing was rejected on the way.
    expect(await store.list('leases')).toHaveLength(REPOS);
    expect(audit.filter((e) => e.level === 'alert')).toEqual([]);
  });
});
