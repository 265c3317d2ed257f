// The scheduler's decisions, each without a store, runtime or timer (src/scheduler/*-decisions.ts,
// scheduler-options.ts, wake-loop.ts). The I/O shell that uses them is covered by
// test/integration/scheduler-*.test.ts.
import { describe, expect, it } from 'vitest';
import type { LeaseRecord, TaskRecord } from '../../src/domain/records.js';
import { claimableNow, claimableUnderHold, claimEventOf, expectedStateOf } from '../../src/scheduler/claim-decisions.js';
import { expiredLeases, renewedExpiry, workUnder } from '../../src/scheduler/lease-decisions.js';
import type { ClaimCandidate } from '../../src/scheduler/pick-claims.js';
import { resolveSchedulerSettings } from '../../src/scheduler/scheduler-options.js';
import { nextWakeAt, wakesScheduler } from '../../src/scheduler/wake-decisions.js';
import { inflightSet, wakeLoop } from '../../src/scheduler/wake-loop.js';

const NOW = 1_800_000_000_000;
const iso = (ms: number) => new Date(ms).toISOString();
const task = (taskId: string, state: TaskRecord['state'], nextRetryAt: number | null = null) =>
  ({ taskId, repoKey: 'r', queueSeq: 1, state, nextRetryAt: nextRetryAt === null ? null : iso(nextRetryAt) }) as TaskRecord;
const lease = (repoKey: string, expiresAt: number | null, state: LeaseRecord['state'] = 'held'): LeaseRecord => ({
  repoKey,
  leaseId: `l-${repoKey}`,
  owner: 'o',
  taskId: 't',
  expiresAt: expiresAt === null ? null : iso(expiresAt),
  state,
});
const pick = (event: ClaimCandidate['event'], resumeState?: ClaimCandidate['resumeState']): ClaimCandidate => ({
  taskId: 't',
  repoKey: 'r',
  queueSeq: 1,
  event,
  ...(resumeState ? { resumeState } : {}),
});

describe('claim decisions', () => {
  it('under a provider hold only verifications may resume', () => {
    const tasks = [task('q', 'queued'), task('r', 'retry_wait'), task('v', 'verifying_reply'), task('p', 'publishing')];
    expect(claimableUnderHold(tasks, null).map((t) => t.taskId)).toEqual(['q', 'r', 'v', 'p']);
    expect(claimableUnderHold(tasks, NOW + 1000).map((t) => t.taskId)).toEqual(['v']);
  });
  it('expects the state each kind of claim starts from', () => {
    expect(expectedStateOf(pick('CLAIM'))).toBe('queued');
    expect(expectedStateOf(pick('RETRY_DUE'))).toBe('retry_wait');
    expect(expectedStateOf(pick('RESUME', 'publishing'))).toBe('publishing');
    expect(expectedStateOf(pick('RESUME'))).toBe('verifying_reply');
  });
  it('sends CLAIM or RETRY_DUE with the lease, and nothing for a RESUME', () => {
    expect(claimEventOf(pick('CLAIM'), 'L')).toEqual({ type: 'CLAIM', leaseId: 'L' });
    expect(claimEventOf(pick('RETRY_DUE'), 'L')).toEqual({ type: 'RETRY_DUE', leaseId: 'L' });
    expect(claimEventOf(pick('RESUME', 'verifying_reply'), 'L')).toBeNull();
  });
  it('takes a pick only when its task is locked here, still where the scan saw it, and its lock free or not made yet', () => {
    const ok = { taskState: 'queued', taskRecordLocked: true, lockActor: 'free' as const };
    expect(claimableNow(pick('CLAIM'), ok)).toBe(true);
    expect(claimableNow(pick('CLAIM'), { ...ok, lockActor: 'absent' })).toBe(true);
    expect(claimableNow(pick('RETRY_DUE'), { ...ok, taskState: 'retry_wait' })).toBe(true);
    expect(claimableNow(pick('CLAIM'), { ...ok, taskState: 'cancelled' })).toBe(false);
    // Another claimer holds the task's actor (no state read) or its record.
    expect(claimableNow(pick('CLAIM'), { ...ok, taskState: undefined })).toBe(false);
    expect(claimableNow(pick('CLAIM'), { ...ok, taskRecordLocked: false })).toBe(false);
    expect(claimableNow(pick('CLAIM'), { ...ok, lockActor: 'held' })).toBe(false);
    expect(claimableNow(pick('CLAIM'), { ...ok, lockActor: 'locked_elsewhere' })).toBe(false);
  });
});

describe('lease decisions', () => {
  it('finds held leases whose expiry has come, never free ones or ones without expiry', () => {
    const leases = [lease('a', NOW), lease('b', NOW + 1), lease('c', NOW - 5, 'free'), lease('d', null), lease('e', NOW - 1)];
    expect(expiredLeases(leases, NOW).map((l) => l.repoKey)).toEqual(['a', 'e']);
  });
  it('a heartbeat never shortens a lease', () => {
    expect(renewedExpiry(NOW + 10, NOW, 100)).toBe(NOW + 100);
    expect(renewedExpiry(NOW + 500, NOW, 100)).toBe(NOW + 500);
  });
  it('work under a lease is the task\'s current work when the task recorded that lease, or when it is a resumed step', () => {
    expect(workUnder('running', 'L', 'L')).toBe('recorded');
    expect(workUnder('verifying_reply', 'L', 'L')).toBe('recorded');
    expect(workUnder('preparing', 'newer', 'L')).toBeNull();
    expect(workUnder('aborting', null, 'L')).toBeNull();
    // A restart's resume of publishing or verifying_reply records no lease.
    expect(workUnder('verifying_reply', null, 'L')).toBe('resumed');
    expect(workUnder('publishing', 'other', 'L')).toBe('resumed');
    expect(workUnder('waiting_user', null, 'L')).toBeNull();
  });
});

describe('wake decisions', () => {
  it('wakes at the earliest of a retry deadline and a lease expiry still ahead', () => {
    const tasks = [task('r', 'retry_wait', NOW + 300)];
    expect(nextWakeAt({ heldUntil: null, tasks, leases: [], now: NOW })).toBe(NOW + 300);
    expect(nextWakeAt({ heldUntil: null, tasks, leases: [lease('a', NOW + 100), lease('b', NOW - 1)], now: NOW })).toBe(NOW + 100);
    expect(nextWakeAt({ heldUntil: null, tasks, leases: [lease('a', NOW + 100, 'free')], now: NOW })).toBe(NOW + 300);
    expect(nextWakeAt({ heldUntil: null, tasks: [], leases: [], now: NOW })).toBeNull();
  });
  it('wakes soon for a task the claim left to another transaction, unless something comes sooner or a hold is on', () => {
    const tasks = [task('r', 'retry_wait', NOW + 300)];
    expect(nextWakeAt({ heldUntil: null, tasks: [], leases: [], now: NOW, recheckAt: NOW + 1000 })).toBe(NOW + 1000);
    expect(nextWakeAt({ heldUntil: null, tasks, leases: [], now: NOW, recheckAt: NOW + 1000 })).toBe(NOW + 300);
    expect(nextWakeAt({ heldUntil: null, tasks, leases: [], now: NOW, recheckAt: NOW + 100 })).toBe(NOW + 100);
    expect(nextWakeAt({ heldUntil: NOW + 5000, tasks: [], leases: [], now: NOW, recheckAt: NOW + 100 })).toBe(NOW + 5000);
  });
  it('under a provider hold wakes at its end, not at a retry deadline', () => {
    expect(nextWakeAt({ heldUntil: NOW + 5000, tasks: [task('r', 'retry_wait', NOW + 300)], leases: [], now: NOW })).toBe(NOW + 5000);
    expect(nextWakeAt({ heldUntil: NOW + 5000, tasks: [], leases: [lease('a', NOW + 100)], now: NOW })).toBe(NOW + 100);
  });
  it('wakes on a task becoming claimable or a lock coming free, nothing else', () => {
    expect(wakesScheduler({ kind: 'task', toState: 'queued' })).toBe(true);
    expect(wakesScheduler({ kind: 'task', toState: 'retry_wait' })).toBe(true);
    expect(wakesScheduler({ kind: 'task', toState: 'running' })).toBe(false);
    expect(wakesScheduler({ kind: 'lock', toState: 'free' })).toBe(true);
    expect(wakesScheduler({ kind: 'lock', toState: 'held' })).toBe(false);
    expect(wakesScheduler({ kind: 'session', toState: 'free' })).toBe(false);
  });
});

describe('scheduler settings', () => {
  it('applies defaults: heartbeat a third of the TTL', () => {
    expect(resolveSchedulerSettings({})).toEqual({ maxConcurrent: 2, ttlMs: 60_000, heartbeatMs: 20_000, safetyPollMs: 30_000, by: 'scheduler' });
    expect(resolveSchedulerSettings({ leaseTtlMs: 2 }).heartbeatMs).toBe(1);
    expect(resolveSchedulerSettings({ heartbeatMs: 0 }).heartbeatMs).toBe(0);
  });
  it('rejects a cap below one and a heartbeat no shorter than the TTL', () => {
    expect(() => resolveSchedulerSettings({ maxConcurrentTasks: 0 })).toThrow(/maxConcurrentTasks/);
    expect(() => resolveSchedulerSettings({ maxConcurrentTasks: 1.5 })).toThrow(/maxConcurrentTasks/);
    expect(() => resolveSchedulerSettings({ leaseTtlMs: 100, heartbeatMs: 100 })).toThrow(/heartbeatMs/);
    expect(resolveSchedulerSettings({ leaseTtlMs: 100, heartbeatMs: 99 }).heartbeatMs).toBe(99);
    expect(resolveSchedulerSettings({ maxConcurrentTasks: 1 }).maxConcurrent).toBe(1);
  });
});

describe('wake loop', () => {
  it('coalesces a burst of wake-ups into one scan, and a wake-up during a scan into one more', async () => {
    let scans = 0;
    let release: (() => void) | null = null;
    const { track, settled } = inflightSet();
    const wake = wakeLoop({
      scan: async () => {
        scans += 1;
        if (scans === 1) await new Promise<void>((r) => (release = r));
      },
      canRun: () => true,
      onError: () => {},
      track,
    });
    const first = wake();
    void wake();
    void wake();
    await new Promise((r) => setTimeout(r, 5));
    expect(scans).toBe(1);
    void wake();
    void wake();
    release!();
    await first;
    expect(scans).toBe(2);
    await settled();
  });
  it('never runs two scans at once: a wake-up during a scan waits for it', async () => {
    let running = 0;
    let peak = 0;
    let release: (() => void) | null = null;
    const wake = wakeLoop({
      scan: async () => {
        running += 1;
        peak = Math.max(peak, running);
        if (!release) await new Promise<void>((r) => (release = r));
        running -= 1;
      },
      canRun: () => true,
      onError: () => {},
      track: (p) => p,
    });
    const first = wake();
    await new Promise((r) => setTimeout(r, 5));
    const second = wake();
    await new Promise((r) => setTimeout(r, 5));
    expect(peak).toBe(1);
    release!();
    await Promise.all([first, second]);
    expect(peak).toBe(1);
  });
  it('waits a microtask first, so wake-ups in one synchronous burst cost one scan', async () => {
    let scans = 0;
    const wake = wakeLoop({ scan: async () => void (scans += 1), canRun: () => true, onError: () => {}, track: (p) => p });
    const done = wake();
    void wake();
    void wake();
    await done;
    expect(scans).toBe(1);
  });
  it('a failed scan does not end the loop: a wake-up that came during it still gets its scan', async () => {
    const errors: unknown[] = [];
    let scans = 0;
    let wakeDuringScan: (() => unknown) | null = null;
    const wake = wakeLoop({
      scan: async () => {
        scans += 1;
        if (scans === 1) {
          wakeDuringScan?.();
          throw new Error('boom');
        }
      },
      canRun: () => true,
      onError: (e) => errors.push(e),
      track: (p) => p,
    });
    wakeDuringScan = wake;
    await wake();
    expect(scans).toBe(2);
    expect(errors).toHaveLength(1);
  });
  it('when it may not run, scans nothing and registers no in-flight work', async () => {
    let scans = 0;
    let tracked = 0;
    const wake = wakeLoop({
      scan: async () => void (scans += 1),
      canRun: () => false,
      onError: () => {},
      track: (p) => {
        tracked += 1;
        return p;
      },
    });
    await wake();
    expect(scans).toBe(0);
    expect(tracked).toBe(0);
  });
});

describe('in-flight set', () => {
  it('settled() also waits for work tracked while it was waiting', async () => {
    const { track, settled } = inflightSet();
    let secondDone = false;
    void track(
      (async () => {
        await new Promise((r) => setTimeout(r, 5));
        void track(new Promise<void>((r) => setTimeout(() => ((secondDone = true), r()), 20)));
      })(),
    );
    await settled();
    expect(secondDone).toBe(true);
  });
});
