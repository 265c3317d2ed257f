// Pure intake helpers: repeat answers, stop targets, record builders.
import { describe, expect, it } from 'vitest';
import { accepted, repeatOf, REPOSITORY_DISABLED, ignored } from '../../src/intake/intake-response.js';
import { deliveryRecord, payloadHash, taskRecord } from '../../src/intake/intake-records.js';
import { pendingReceiptRecord } from '../../src/receipts/receipt-record.js';
import { stopTargets } from '../../src/intake/stop-tasks.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { normalizeComment } from '../../src/webhook/normalize-comment.js';
import { loadFixture } from '../support/webhook-fixtures.js';

describe('repeatOf', () => {
  it('a repeated 202 becomes 200 with the same body; other statuses are kept', () => {
    expect(repeatOf(accepted('d1', 't1'))).toEqual({ status: 200, body: { deliveryId: 'd1', taskId: 't1', state: 'queued' } });
    expect(repeatOf(REPOSITORY_DISABLED)).toEqual(REPOSITORY_DISABLED);
    expect(repeatOf(ignored('no_mention'))).toEqual(ignored('no_mention'));
  });
});

describe('stopTargets', () => {
  it('every non-terminal state: CANCEL with nothing in flight, ABORT with work in flight, aborting reached without an event; in queue order', async () => {
    const states: Array<[string, number]> = [
      ['running', 5],
      ['queued', 3],
      ['waiting_user', 9],
      ['blocked_workspace', 1],
      ['preparing', 2],
      ['retry_wait', 4],
      ['verifying_reply', 6],
      ['aborting', 7],
      ['succeeded', 8],
      ['publishing', 10],
      ['cancelled', 11],
    ];
    const tasks = states.map(([state, queueSeq]) => ({ taskId: `t-${state}`, state, queueSeq, resourceKey: 'r' }) as unknown as TaskRecord);
    const store = { byIndex: async <T>() => tasks as unknown as T[] };
    expect(await stopTargets(store as never, 'r')).toEqual([
      { taskId: 't-blocked_workspace', event: 'CANCEL' },
      { taskId: 't-preparing', event: 'ABORT' },
      { taskId: 't-queued', event: 'CANCEL' },
      { taskId: 't-retry_wait', event: 'CANCEL' },
      { taskId: 't-running', event: 'ABORT' },
      { taskId: 't-verifying_reply', event: 'ABORT' },
      { taskId: 't-aborting', event: null },
      { taskId: 't-waiting_user', event: 'CANCEL' },
      { taskId: 't-publishing', event: 'ABORT' },
    ]);
  });
});

describe('record builders', () => {
  const f = loadFixture('issue_comment_created_on_issue');
  const n = normalizeComment(f.headers, f.body, { botLogin: 'ccweb-bot' });
  if (!n.ok) throw new Error(n.issues);
  const at = new Date('2026-07-20T09:15:43.000Z');

  it('task: received at stateVersion 0 (the actor projection moves it), instruction untouched', () => {
    const t = taskRecord(n.value, 'gitea-task-x', 42, at);
    expect(t).toMatchObject({ state: 'received', stateVersion: 0, queueSeq: 42, instruction: '@ccweb-bot please fix the failing build on main' });
  });

  it('delivery: expiresAt = receivedAt + retention; response copied', () => {
    const response = accepted('d', 't');
    const d = deliveryRecord({
      deliveryKey: 'default:d',
      deliveryId: 'd',
      eventType: 'issue_comment',
      receivedAt: at,
      retentionMs: 1000,
      normalized: true,
      taskId: 't',
      status: 'accepted',
      reason: null,
      payloadHash: payloadHash(f.body),
      response,
    });
    expect(d.expiresAt).toBe('2026-07-20T09:15:44.000Z');
    expect(d.response).toEqual(response);
    expect(d.response.body).not.toBe(response.body);
  });

  it('receipt intent: key <taskId>:status:received with its marker', () => {
    expect(pendingReceiptRecord({ taskId: 't1', resourceKey: 'r' }, 'received', at)).toMatchObject({ commentKey: 't1:status:received', marker: '<!-- ccweb receipt=t1:status:received -->', status: 'pending' });
  });
});
