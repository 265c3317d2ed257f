import { describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../src/domain/records.js';
import { instanceOfOwner, isPreviousProcessOf, leaseOwnerId } from '../../src/leases/lease-owner.js';
import { nextRetryDue, pickClaims } from '../../src/scheduler/pick-claims.js';

const NOW = 1_800_000_000_000;
const iso = (ms: number) => new Date(ms).toISOString();
function t(taskId: string, repoKey: string, queueSeq: number, state: TaskRecord['state'] = 'queued', nextRetryAt: number | null = null): TaskRecord {
  return { taskId, repoKey, queueSeq, state, nextRetryAt: nextRetryAt === null ? null : iso(nextRetryAt) } as TaskRecord;
}
const pick = (tasks: TaskRecord[], over: Partial<Parameters<typeof pickClaims>[0]> = {}) =>
  pickClaims({ tasks, now: NOW, busy: () => false, disabled: () => false, slots: 10, ...over }).map((c) => `${c.taskId}:${c.event}`);

describe('pickClaims', () => {
  it('takes one head per repository, oldest queueSeq first', () => {
    expect(pick([t('a2', 'A', 5), t('b1', 'B', 2), t('a1', 'A', 1), t('b2', 'B', 9)])).toEqual(['a1:CLAIM', 'b1:CLAIM']);
  });
  it('puts a due retry before older queued work of its repository, and not-yet-due retries nowhere', () => {
    const tasks = [t('q', 'A', 1), t('r', 'A', 7, 'retry_wait', NOW), t('later', 'B', 3, 'retry_wait', NOW + 1), t('b', 'B', 4)];
    expect(pick(tasks)).toEqual(['r:RETRY_DUE', 'b:CLAIM']);
  });
  it('skips busy and disabled repositories and respects the free slots', () => {
    const tasks = [t('a', 'A', 1), t('b', 'B', 2), t('c', 'C', 3), t('d', 'D', 4)];
    expect(pick(tasks, { busy: (r) => r === 'A', disabled: (r) => r === 'C', slots: 5 })).toEqual(['b:CLAIM', 'd:CLAIM']);
    expect(pick(tasks, { slots: 2 })).toEqual(['a:CLAIM', 'b:CLAIM']);
    expect(pick(tasks, { slots: 0 })).toEqual([]);
  });
  it('ignores states it does not claim from', () => {
    expect(pick([t('x', 'A', 1, 'blocked_workspace'), t('y', 'A', 2, 'preparing'), t('z', 'A', 3, 'waiting_user')])).toEqual([]);
  });
  it('finds the next retry deadline still ahead', () => {
    expect(nextRetryDue([t('a', 'A', 1, 'retry_wait', NOW + 50), t('b', 'B', 1, 'retry_wait', NOW + 20), t('c', 'C', 1, 'retry_wait', NOW)], NOW)).toBe(NOW + 20);
    expect(nextRetryDue([t('a', 'A', 1)], NOW)).toBeNull();
  });
  it('finds the earliest deadline whatever the order, and only among retry_wait tasks', () => {
    expect(nextRetryDue([t('b', 'B', 1, 'retry_wait', NOW + 20), t('a', 'A', 1, 'retry_wait', NOW + 50)], NOW)).toBe(NOW + 20);
    // A deadline left on a task that moved on (e.g. back to queued) is not the scheduler's business.
    expect(nextRetryDue([t('q', 'A', 1, 'queued', NOW + 10)], NOW)).toBeNull();
  });
  it('orders the heads of different repositories: resumes, then retries, then new work, each by arrival', () => {
    const tasks = [
      t('c', 'C', 1),
      t('b', 'B', 5, 'retry_wait', NOW),
      t('d', 'D', 0),
      t('a', 'A', 9, 'verifying_reply'),
      t('e', 'E', 3, 'retry_wait', NOW - 5),
    ];
    expect(pick(tasks)).toEqual(['a:RESUME', 'e:RETRY_DUE', 'b:RETRY_DUE', 'd:CLAIM', 'c:CLAIM']);
    expect(pick(tasks, { slots: 2 })).toEqual(['a:RESUME', 'e:RETRY_DUE']);
  });
  it('a retry_wait task without a deadline is due at once', () => {
    expect(pick([t('q', 'A', 1), t('r', 'A', 2, 'retry_wait', null)])).toEqual(['r:RETRY_DUE']);
  });
});

describe('lease owners', () => {
  it('recognises an earlier process of the same instance, and only that', () => {
    const self = leaseOwnerId('default', 200, 2);
    expect(self).toBe('default/200/2');
    expect(instanceOfOwner(self)).toBe('default');
    expect(isPreviousProcessOf('default/100/1', self)).toBe(true);
    expect(isPreviousProcessOf(self, self)).toBe(false);
    expect(isPreviousProcessOf('other/100/1', self)).toBe(false);
    expect(isPreviousProcessOf('garbage', self)).toBe(false);
    expect(() => leaseOwnerId('a/b')).toThrow();
  });
});

describe('pickClaims: verifications left behind by a restart', () => {
  it('resumes a verifying_reply task before retries and new work of its repository', async () => {
    const { pickClaims } = await import('../../src/scheduler/pick-claims.js');
    const base = { repoKey: 'default:a/b', nextRetryAt: null } as const;
    const picks = pickClaims({
      tasks: [
        { ...base, taskId: 'q', state: 'queued', queueSeq: 1 },
        { ...base, taskId: 'r', state: 'retry_wait', queueSeq: 2 },
        { ...base, taskId: 'v', state: 'verifying_reply', queueSeq: 3 },
      ] as never,
      now: 0,
      busy: () => false,
      disabled: () => false,
      slots: 5,
    });
    expect(picks).toEqual([{ taskId: 'v', repoKey: 'default:a/b', queueSeq: 3, event: 'RESUME', resumeState: 'verifying_reply' }]);
  });

  it('resumes a publishing task (change delivery) left behind by a restart, before new work', async () => {
    const { pickClaims } = await import('../../src/scheduler/pick-claims.js');
    const base = { repoKey: 'default:a/b', nextRetryAt: null } as const;
    const picks = pickClaims({
      tasks: [
        { ...base, taskId: 'q', state: 'queued', queueSeq: 1 },
        { ...base, taskId: 'p', state: 'publishing', queueSeq: 2 },
      ] as never,
      now: 0,
      busy: () => false,
      disabled: () => false,
      slots: 5,
    });
    expect(picks).toEqual([{ taskId: 'p', repoKey: 'default:a/b', queueSeq: 2, event: 'RESUME', resumeState: 'publishing' }]);
  });
});
