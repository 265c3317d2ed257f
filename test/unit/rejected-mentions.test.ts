// What a rejected or refused mention stores. The pure parts (the per-author day
// count, the excerpt) and the retention of what they leave; the whole path through HTTP, the store
// and a real Gitea is in test/integration/rejected-mention-bounds.test.ts.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../src/domain/records.js';
import {
  MENTION_REJECTED,
  REJECTED_TASKS_PER_AUTHOR_DAY,
  countRejectedMention,
  rejectedMentionKey,
  type RejectedMention,
  type RejectedMentionRecord,
} from '../../src/intake/rejected-mentions.js';
import { SECURITY_EVENTS } from '../../src/intake/security-events.js';
import { DAY_MS, sweepRetention } from '../../src/retention/retention-sweep.js';
import { EXCERPT_CHARS, taskWithExcerptOnly, textExcerpt } from '../../src/tasks/task-texts.js';
import { storeForTest } from '../support/test-runtime.js';

const AT = new Date('2026-05-06T10:00:00.000Z');

function mention(over: Partial<RejectedMention> = {}): RejectedMention {
  return {
    login: 'bob',
    repoKey: 'default:acme/widget',
    resourceKey: 'default:acme/widget:issue:1',
    deliveryId: 'd-1',
    commentId: 1,
    reason: 'actor_not_authorized',
    at: AT,
    retentionMs: 30 * DAY_MS,
    ...over,
  };
}

describe('countRejectedMention: one record per author and UTC day', () => {
  it(`the first ${REJECTED_TASKS_PER_AUTHOR_DAY} of a day get a task, the next is the first counted, then only the count grows`, () => {
    let record: RejectedMentionRecord | undefined;
    const decisions: Array<[boolean, boolean]> = [];
    for (let i = 1; i <= REJECTED_TASKS_PER_AUTHOR_DAY + 3; i++) {
      const r = countRejectedMention(record, mention({ deliveryId: `d-${i}`, commentId: i, at: new Date(AT.getTime() + i * 1000), reason: i % 2 ? 'actor_not_authorized' : 'permission_check_failed' }));
      decisions.push([r.ownTask, r.firstCounted]);
      expect(r.record.key).toBe(record?.key ?? r.record.key);
      record = r.record;
    }
    expect(decisions).toEqual([
      ...Array.from({ length: REJECTED_TASKS_PER_AUTHOR_DAY }, () => [true, false]),
      [false, true],
      [false, false],
      [false, false],
    ]);
    expect(record).toMatchObject({
      key: '2026-05-06T00:00:00.000Z:mention_rejected:gitea:user:bob',
      kind: MENTION_REJECTED,
      source: 'gitea:user:bob',
      windowStart: '2026-05-06T00:00:00.000Z',
      windowEnd: '2026-05-07T00:00:00.000Z',
      count: REJECTED_TASKS_PER_AUTHOR_DAY + 3,
      tasks: REJECTED_TASKS_PER_AUTHOR_DAY,
      reasons: { actor_not_authorized: 4, permission_check_failed: 4 },
      firstAt: '2026-05-06T10:00:01.000Z',
      lastAt: '2026-05-06T10:00:08.000Z',
      // The day's end plus the security-event retention.
      expiresAt: '2026-06-06T00:00:00.000Z',
    });
    expect(record!.sample).toMatchObject({ deliveryId: 'd-1', commentId: 1 });
    expect(record!.last).toMatchObject({ deliveryId: 'd-8', commentId: 8 });
  });

  it('logins are one author whatever their case; another day or author is another record', () => {
    expect(rejectedMentionKey('Bob', AT)).toBe(rejectedMentionKey('bob', AT));
    expect(rejectedMentionKey('bob', new Date('2026-05-07T00:00:00.000Z'))).not.toBe(rejectedMentionKey('bob', AT));
    expect(rejectedMentionKey('carol', AT)).not.toBe(rejectedMentionKey('bob', AT));
    expect(countRejectedMention(undefined, mention())).toMatchObject({ ownTask: true, firstCounted: false, record: { count: 1, tasks: 1 } });
  });

  it('values from the payload are bounded and printable', () => {
    const r = countRejectedMention(undefined, mention({ deliveryId: 'x'.repeat(5000), login: 'bob\u0000\n' })).record;
    expect(String(r.sample['deliveryId']).length).toBe(128);
    expect(r.source).toBe('gitea:user:bob??');
    expect(JSON.stringify(r).length).toBeLessThan(1500);
  });
});

describe('textExcerpt / taskWithExcerptOnly: an excerpt, the length and the sha256, never the text', () => {
  it('cuts a long text, keeps a short one, and hashes the whole text as UTF-8', () => {
    const long = 'é'.repeat(1_000_000);
    const e = textExcerpt(long);
    expect(e).toEqual({ excerpt: long.slice(0, EXCERPT_CHARS), length: 1_000_000, sha256: 'sha256:' + createHash('sha256').update(Buffer.from(long, 'utf8')).digest('hex') });
    expect(textExcerpt('@ccweb-bot hi').excerpt).toBe('@ccweb-bot hi');
  });

  it('never ends on half of a surrogate pair', () => {
    const text = 'a'.repeat(EXCERPT_CHARS - 1) + '😀'.repeat(10);
    const { excerpt } = textExcerpt(text);
    expect(excerpt).toBe('a'.repeat(EXCERPT_CHARS - 1));
    expect(Buffer.from(excerpt, 'utf8').toString('utf8')).toBe(excerpt);
  });

  it('the task keeps the excerpt and says so', () => {
    const task = taskWithExcerptOnly({ taskId: 't', instruction: 'y'.repeat(10_000) } as TaskRecord);
    expect(task).toMatchObject({ instruction: 'y'.repeat(EXCERPT_CHARS), instructionExcerptOnly: true, instructionLength: 10_000, instructionSha256: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    expect(JSON.stringify(task).length).toBeLessThan(EXCERPT_CHARS + 200);
  });
});

describe('retention: excerpt-only tasks go with the security events, other tasks as before', () => {
  it('deletes a rejected excerpt-only task after excerptOnlyTaskRetentionMs, keeps a finished writer task (task retention unset)', async () => {
    const store = await storeForTest();
    const created = '2026-05-06T10:00:00.000Z';
    const base = { createdAt: created, updatedAt: created, instruction: 'x' };
    await store.transact(async (tx) => {
      await tx.insert('tasks', 'rejected-excerpt', { ...base, taskId: 'rejected-excerpt', state: 'rejected', instructionExcerptOnly: true });
      await tx.insert('tasks', 'rejected-full', { ...base, taskId: 'rejected-full', state: 'rejected' });
      await tx.insert('tasks', 'writer-failed', { ...base, taskId: 'writer-failed', state: 'failed' });
      const { record } = countRejectedMention(undefined, mention({ at: new Date(created), retentionMs: 3 * DAY_MS }));
      await tx.put(SECURITY_EVENTS, record.key, record);
    });
    const policy = { deliveryRetentionMs: DAY_MS, taskRetentionMs: null, excerptOnlyTaskRetentionMs: 3 * DAY_MS };
    const at = (days: number) => ({ now: () => Date.parse(created) + days * DAY_MS });
    expect(await sweepRetention(store, policy, at(2.9))).toMatchObject({ tasks: 0, securityEvents: 0 });
    expect(await sweepRetention(store, policy, at(3.1))).toMatchObject({ tasks: 1, securityEvents: 0 });
    expect((await store.list<TaskRecord>('tasks')).map((t) => t.taskId)).toEqual(['rejected-full', 'writer-failed']);
    // The day's count lasts until its day ended plus the retention.
    expect(await sweepRetention(store, policy, at(3.6))).toMatchObject({ tasks: 0, securityEvents: 1 });
    // Without the setting, nothing changes for tasks.
    expect((await sweepRetention(store, { deliveryRetentionMs: DAY_MS, taskRetentionMs: null }, at(400))).tasks).toBe(0);
  });
});
