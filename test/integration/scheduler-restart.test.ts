import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { LeaseRecord, TaskRecord } from '../../src/domain/records.js';
import { leaseOwnerId } from '../../src/leases/lease-owner.js';
import { lockActorId } from '../../src/leases/repo-lock-actor.js';
import { createScheduler, type RecoveryResult } from '../../src/scheduler/index.js';
import type { AuditEvent, Store } from '../../src/store/types.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import {
  createSchedulerRuntime,
  FakeClock,
  holdIntervals,
  leaseIntervals,
  scriptedExecutor,
  submitTask,
  waitForTaskState,
  walkToSuccess,
} from '../support/scheduler-harness.js';

const CHILD = join(import.meta.dirname, '../support/scheduler-child.ts');
const REPO_OF: Record<string, string> = {
  prep: 'default:org/p',
  'prep-next': 'default:org/p',
  run: 'default:org/r',
  'run-exhausted': 'default:org/x',
  abort: 'default:org/a',
  retry: 'default:org/t',
  wait: 'default:org/w',
  verify: 'default:org/v',
  done: 'default:org/d',
};
/** Repositories whose lease the child held when it was killed. */
const HELD_AT_KILL = ['default:org/p', 'default:org/r', 'default:org/x', 'default:org/a', 'default:org/v'];

/** Runs the scheduler child until it has parked every task, then SIGKILLs it. */
function runChildAndKill(dir: string): Promise<{ owner: string }> {
  return new Promise((resolve, reject) => {
    // `--import tsx`, not the tsx CLI: the CLI's SIGKILL would leave its grandchild writing on.
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let ready: { owner: string } | null = null;
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^READY (.*)$/m.exec(out);
      if (m && !ready) {
        ready = JSON.parse(m[1]!) as { owner: string };
        child.kill('SIGKILL');
      }
    });
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL' && ready) resolve(ready);
      else reject(new Error(`child exited ${code} ${signal}: ${err.slice(-2000)}`));
    });
  });
}

const tasksIn = async (store: Store) => Object.fromEntries((await store.list<TaskRecord>('tasks')).map((t) => [t.taskId, t]));
const heldLeases = async (store: Store) => store.list<LeaseRecord>('leases', (l) => l.state === 'held');

/** Never two valid leases per repository, and every task's holding interval inside the lease it claimed. */
function expectOneLeaseAtATime(audit: AuditEvent[], taskIds: string[]): void {
  const leases = leaseIntervals(audit);
  const byRepo = new Map<string, typeof leases>();
  for (const l of leases) byRepo.set(l.repoKey, [...(byRepo.get(l.repoKey) ?? []), l]);
  for (const list of byRepo.values()) {
    for (let k = 1; k < list.length; k++) expect(list[k]!.start).toBeGreaterThan(list[k - 1]!.end);
  }
  const byId = new Map(leases.map((l) => [l.leaseId, l]));
  for (const hold of holdIntervals(audit, (id) => REPO_OF[id]!).filter((h) => taskIds.includes(h.taskId))) {
    const lease = byId.get(hold.leaseId)!;
    expect(lease.repoKey).toBe(hold.repoKey);
    expect(lease.start).toBeLessThan(hold.enter);
    // The lease of a killed process ends at recovery, and the task leaves its state right after.
    expect(hold.leave).toBeLessThan(Infinity);
  }
}

describe('restart recovery after SIGKILL (spec §5.5)', () => {
  let cleanup: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await cleanup?.();
    cleanup = null;
  });

  it('releases the dead process leases, interrupts preparing/running, ends aborting, keeps the rest; then work resumes in FIFO order', async () => {
    const first = await createSchedulerRuntime();
    const dir = first.dir;
    await first.close(false);
    const { owner: childOwner } = await runChildAndKill(dir);

    const { store, runtime, close } = await createSchedulerRuntime(dir);
    // As the service does at start, before recovery.
    await runtime.restoreAll();
    const before = await tasksIn(store);
    // What the crash left behind.
    expect(Object.fromEntries(Object.entries(before).map(([id, t]) => [id, t.state]))).toEqual({
      prep: 'preparing',
      'prep-next': 'queued',
      run: 'running',
      'run-exhausted': 'running',
      abort: 'aborting',
      retry: 'retry_wait',
      wait: 'waiting_user',
      verify: 'verifying_reply',
      done: 'succeeded',
    });
    expect((await heldLeases(store)).map((l) => l.repoKey).sort()).toEqual([...HELD_AT_KILL].sort());
    expect((await heldLeases(store)).every((l) => l.owner === childOwner)).toBe(true);

    const owner = leaseOwnerId('default');
    expect(owner).not.toBe(childOwner);
    const { executor, calls } = scriptedExecutor(runtime, (call) => walkToSuccess(call));
    // A hand-moved clock from "now", so the re-armed retry timer can be shown to fire.
    const clock = new FakeClock(Date.now());
    const scheduler = createScheduler({ store, runtime, executor, owner, maxConcurrentTasks: 4, clock });
    cleanup = async () => {
      await scheduler.stop();
      await close();
    };
    const recoveryStart = (await store.audit({})).at(-1)!.seq;
    const result: RecoveryResult = await scheduler.recover();

    expect(result).toEqual({
      leasesExpired: 0,
      leasesReleased: 5,
      leasesKept: 0,
      queued: 1,
      retryWait: 1,
      interruptedToRetry: ['prep', 'run'],
      interruptedToFailed: ['run-exhausted'],
      abortingToAborted: ['abort'],
      verifyingReply: ['verify'],
      waitingUser: ['wait'],
    });
    const after = await tasksIn(store);
    // Rule 1: every lease of the dead process released, audited; no valid lease remains.
    expect(await heldLeases(store)).toEqual([]);
    const audit = await store.audit({ afterSeq: recoveryStart });
    const released = audit.filter((e) => e.action === 'lease.released_after_restart');
    expect(released.map((e) => e.metadata!['repoKey']).sort()).toEqual([...HELD_AT_KILL].sort());
    expect(released.every((e) => e.metadata!['owner'] === childOwner)).toBe(true);
    // Rule 4: interrupted work.
    expect(after['prep']).toMatchObject({ state: 'retry_wait', errorCode: 'interrupted_by_restart', attempt: 1, leaseId: null });
    expect(after['run']).toMatchObject({ state: 'retry_wait', errorCode: 'interrupted_by_restart', attempt: 1 });
    expect(after['run-exhausted']).toMatchObject({ state: 'failed', errorCode: 'retry_limit_exceeded', attempt: 1 });
    expect(after['abort']).toMatchObject({ state: 'aborted', stoppedBy: 'admin:test' });
    // Rules 2, 3 and the untouched ones: same record, same version.
    for (const id of ['prep-next', 'retry', 'wait', 'verify', 'done']) expect(after[id]).toEqual(before[id]);
    // Each step audited, in the spec's order.
    const steps = audit.filter((e) => e.action.startsWith('recovery.')).map((e) => e.action);
    expect(steps).toEqual(['recovery.leases', 'recovery.queued', 'recovery.retry_wait', 'recovery.interrupted', 'recovery.untouched']);
    const lastRelease = Math.max(...released.map((e) => e.seq));
    const firstInterrupt = Math.min(
      ...audit.filter((e) => e.action === 'task.transition' && (e.metadata?.['event'] as { type?: string })?.type === 'RECOVER_INTERRUPTED').map((e) => e.seq),
    );
    expect(lastRelease).toBeLessThan(firstInterrupt);

    // Work resumes: the interrupted task goes before the one queued behind it (retry first, FIFO).
    scheduler.start();
    for (const id of ['prep', 'prep-next', 'run', 'verify']) await waitForTaskState(store, runtime, id, ['succeeded']);
    await scheduler.settled();
    // The verification nobody was driving any more is resumed under a new lease (RESUME), once.
    expect(calls.map((c) => c.taskId).sort()).toEqual(['prep', 'prep-next', 'run', 'verify']);
    expect((await tasksIn(store))['retry']!.state).toBe('retry_wait'); // its nextRetryAt is 10 minutes away
    // Rule 3: the retry_wait deadline written before the crash is honoured after it.
    const retryAt = Date.parse((await tasksIn(store))['retry']!.nextRetryAt!);
    clock.advance(retryAt - clock.now() - 1);
    await scheduler.settled();
    expect((await tasksIn(store))['retry']!.state).toBe('retry_wait');
    clock.advance(1);
    await waitForTaskState(store, runtime, 'retry', ['succeeded']);
    const whole = await store.audit({});
    const pOrder = holdIntervals(whole, (id) => REPO_OF[id]!)
      .filter((h) => h.repoKey === 'default:org/p')
      .map((h) => h.taskId);
    expect(pOrder).toEqual(['prep', 'prep', 'prep-next']);
    expectOneLeaseAtATime(whole, ['prep', 'prep-next', 'run', 'run-exhausted', 'abort']);
    // The restarted actors are live: waiting_user still accepts the user's reply.
    expect(await runtime.has(taskActorId('wait'))).toBe(true);
  });

  it('ends expired leases with EXPIRE (audited) instead of releasing them', async () => {
    const first = await createSchedulerRuntime();
    const dir = first.dir;
    await first.close(false);
    const { owner: childOwner } = await runChildAndKill(dir);

    // The database's clock (the store's, which judges leases) moves with the scheduler's below.
    let dbNow: number | undefined;
    const { store, runtime, close } = await createSchedulerRuntime(dir, { now: () => dbNow ?? Date.now() });
    // As the service does at start, before recovery.
    await runtime.restoreAll();
    const expiries = (await heldLeases(store)).map((l) => Date.parse(l.expiresAt!));
    const later = Math.max(...expiries) + 1; // the restart came after every lease's TTL
    // The database read its clock for each grant a moment after the node did: a second covers that.
    dbNow = later + 1000;
    const { executor } = scriptedExecutor(runtime, (call) => walkToSuccess(call));
    const scheduler = createScheduler({ store, runtime, executor, owner: leaseOwnerId('default'), now: () => later });
    cleanup = async () => {
      await scheduler.stop();
      await close();
    };
    const result = await scheduler.recover();
    expect(result).toMatchObject({ leasesExpired: 5, leasesReleased: 0, leasesKept: 0 });
    expect(await heldLeases(store)).toEqual([]);
    const expired = (await store.audit({})).filter((e) => e.action === 'lease.expired');
    expect(expired.map((e) => e.metadata!['repoKey']).sort()).toEqual([...HELD_AT_KILL].sort());
    expect(expired.every((e) => e.metadata!['owner'] === childOwner)).toBe(true);
    expect((await store.audit({})).some((e) => e.action === 'lease.released_after_restart')).toBe(false);
    expect(result.interruptedToRetry).toEqual(['prep', 'run']);
  });

  it('keeps an unexpired lease of another instance, and does not interrupt its task', async () => {
    const { store, runtime, close } = await createSchedulerRuntime();
    const { executor } = scriptedExecutor(runtime, (call) => walkToSuccess(call));
    const now = Date.now();
    const scheduler = createScheduler({ store, runtime, executor, owner: leaseOwnerId('default'), now: () => now });
    cleanup = async () => {
      await scheduler.stop();
      await close();
    };
    await submitTask(store, runtime, 'foreign', 'default:org/f');
    await runtime.create('lock', lockActorId('default:org/f'), { repoKey: 'default:org/f' }, {
      events: [{ type: 'ACQUIRE', leaseId: 'lease-other', owner: 'other/1/1', taskId: 'foreign', now, ttlMs: 60_000 } as never],
    });
    await runtime.send(taskActorId('foreign'), { type: 'CLAIM', leaseId: 'lease-other' } as never);
    const result = await scheduler.recover();
    expect(result).toMatchObject({ leasesKept: 1, leasesReleased: 0, leasesExpired: 0, interruptedToRetry: [] });
    expect((await store.get<TaskRecord>('tasks', 'foreign'))!.state).toBe('preparing');
    expect(await store.get<LeaseRecord>('leases', 'default:org/f')).toMatchObject({ state: 'held', leaseId: 'lease-other' });
  });
});
