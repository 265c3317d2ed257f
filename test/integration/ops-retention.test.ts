// Retention against real intake writes: expired deliveries go, recent ones and every task stay;
// a comment's dedup memory outlives its delivery while the task exists; with a task window set,
// finished tasks go (with their turns, comments and actor records) and the audit history stays.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import { listTasks, taskDetail } from '../../src/api/task-queries.js';
import type { CommentRecord, CommentTriggerRecord, DeliveryRecord, TaskRecord } from '../../src/domain/records.js';
import { pendingReceiptRecord, receiptCommentKey } from '../../src/receipts/receipt-record.js';
import type { Store } from '../../src/store/index.js';
import { DAY_MS, sweepRetention, startRetention } from '../../src/retention/retention-sweep.js';
import { archiveFinishedTasks, archiveTask } from '../../src/retention/task-archiver.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { writeBeforeFirstTransaction } from '../support/interleaved-store.js';
import { startIntakeHarness, type IntakeHarness } from '../support/intake-harness.js';
import { FIXTURE_SECRET, loadFixture, signedHeaders } from '../support/webhook-fixtures.js';

let h: IntakeHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Intake archives trigger records as it writes them: live ones and archived ones. */
const allTriggers = async (store: Store) => {
  const all = await store.list<CommentTriggerRecord>('comment_triggers');
  for await (const r of store.scanArchived<CommentTriggerRecord>('comment_triggers')) all.push(r);
  return all;
};

const WINDOW = { deliveryRetentionMs: 30 * DAY_MS, taskRetentionMs: null };

function post(harness: IntakeHarness, commentId: number, body: string, deliveryId = randomUUID()) {
  const fixture = loadFixture('issue_comment_created_on_issue');
  const p = JSON.parse(fixture.body.toString('utf8'));
  p.comment.id = commentId;
  p.comment.body = body;
  const raw = Buffer.from(JSON.stringify(p, null, 2), 'utf8');
  const ids = { 'X-Gitea-Delivery': deliveryId, 'X-Gogs-Delivery': deliveryId, 'X-GitHub-Delivery': deliveryId };
  return harness.post(raw, signedHeaders(fixture.headers, raw, FIXTURE_SECRET, ids)).then((r) => ({ ...r, deliveryId }));
}

async function world() {
  let clock = Date.now() - 40 * DAY_MS;
  h = await startIntakeHarness({ intake: { now: () => new Date(clock) } });
  const old = await post(h, 7001, '@ccweb-bot old request');
  const oldIgnored = await post(h, 7002, 'no mention, ignored');
  clock = Date.now();
  const recent = await post(h, 7003, '@ccweb-bot recent request');
  expect([old.status, oldIgnored.status, recent.status]).toEqual([202, 200, 202]);
  return { harness: h, old, oldIgnored, recent };
}

describe('retention sweep', () => {
  it('deletes expired deliveries in small batches, keeps recent ones, every task and the audit', async () => {
    const { harness, old, oldIgnored, recent } = await world();
    const { store } = harness;
    const auditBefore = (await store.audit()).length;
    const result = await sweepRetention(store, WINDOW, { batchSize: 1 });
    expect(result).toMatchObject({ deliveries: 2, triggers: 0, tasks: 0 });
    expect(result.batches).toBe(2);
    expect(await store.get('webhook_deliveries', `default:${old.deliveryId}`)).toBeUndefined();
    expect(await store.get('webhook_deliveries', `default:${oldIgnored.deliveryId}`)).toBeUndefined();
    expect((await store.get<DeliveryRecord>('webhook_deliveries', `default:${recent.deliveryId}`))?.taskId).toBe(recent.body.taskId);
    expect((await store.get<TaskRecord>('tasks', old.body.taskId))?.state).toBe('queued');
    expect((await store.get<TaskRecord>('tasks', recent.body.taskId))?.state).toBe('queued');
    // The old task still exists, so its comment's dedup record must too.
    expect((await allTriggers(store)).map((t) => t.taskId).sort()).toEqual([old.body.taskId, recent.body.taskId].sort());
    expect((await store.audit()).length).toBe(auditBefore);

    // A late repeat of the forgotten delivery, and a Replay of its comment, are duplicates — no second task.
    const repeat = await post(harness, 7001, '@ccweb-bot old request', old.deliveryId);
    const replay = await post(harness, 7001, '@ccweb-bot old request');
    for (const r of [repeat, replay]) expect([r.status, r.body]).toEqual([200, { status: 'duplicate', taskId: old.body.taskId }]);
    expect(await store.count('tasks')).toBe(2);
  });

  it('with a task window, removes finished tasks with their records and then their triggers; the audit stays', async () => {
    const { harness, old, recent } = await world();
    const { store, runtime } = harness;
    const cancel: TaskEvent = { type: 'CANCEL', by: 'admin:test' };
    const sent = await runtime.send(taskActorId(old.body.taskId), cancel, { by: 'admin:test' });
    expect(sent.ok).toBe(true);
    await runtime.settled();
    const oldAudit = (await store.audit({ taskId: old.body.taskId })).length;
    expect((await store.byIndex('comments', 'taskId', old.body.taskId)).length).toBe(1);

    const later = Date.now() + 2 * DAY_MS;
    const result = await sweepRetention(store, { deliveryRetentionMs: 30 * DAY_MS, taskRetentionMs: DAY_MS }, { now: () => later });
    expect(result).toMatchObject({ tasks: 1, triggers: 1 });
    expect(await store.get('tasks', old.body.taskId)).toBeUndefined();
    expect(await store.byIndex('comments', 'taskId', old.body.taskId)).toEqual([]);
    expect(await store.get('actors', taskActorId(old.body.taskId))).toBeUndefined();
    expect((await store.get<TaskRecord>('tasks', recent.body.taskId))?.state).toBe('queued');
    expect(await store.get('actors', taskActorId(recent.body.taskId))).toBeDefined();
    expect((await allTriggers(store)).map((t) => t.taskId)).toEqual([recent.body.taskId]);
    expect((await store.audit({ taskId: old.body.taskId })).length).toBe(oldAudit);
  });

  it('a record of an expired task written after the candidates were picked goes with it', async () => {
    h = await startIntakeHarness();
    const { store, runtime } = h;
    const old = await post(h, 7201, '@ccweb-bot soon finished');
    const oldId = String(old.body.taskId);
    expect((await runtime.send(taskActorId(oldId), { type: 'CANCEL', by: 'admin:test' } as TaskEvent, { by: 'admin:test' })).ok).toBe(true);
    await runtime.settled();
    const task = (await store.get<TaskRecord>('tasks', oldId))!;
    const late = { ...pendingReceiptRecord(task, 'cancelled'), status: 'sent' as const, commentId: 2 };
    const racing = writeBeforeFirstTransaction(store, () => store.transact((tx) => tx.insert('comments', late.commentKey, late)));
    // No delivery has expired: the sweep's first transaction is the one deleting the task.
    const later = Date.now() + 2 * DAY_MS;
    const result = await sweepRetention(racing, { deliveryRetentionMs: 30 * DAY_MS, taskRetentionMs: DAY_MS }, { now: () => later });
    expect(result).toMatchObject({ deliveries: 0, tasks: 1 });
    expect(await store.get('tasks', oldId)).toBeUndefined();
    expect(await store.get('comments', late.commentKey)).toBeUndefined();
    expect(await store.byIndex('comments', 'taskId', oldId)).toEqual([]);
  });

  it('the periodic worker sweeps only while its node leads the cluster, asked at each sweep', async () => {
    const { harness, old } = await world();
    let leading = false;
    const asked: boolean[] = [];
    const scope = {
      owns: () => true,
      leads: () => {
        asked.push(leading);
        return leading;
      },
    };
    const worker = startRetention({ store: harness.store, policy: WINDOW, firstDelayMs: 0, intervalMs: 20, scope });
    const gone = async () => await harness.store.get('webhook_deliveries', `default:${old.deliveryId}`) === undefined;
    const until = async (done: () => boolean | Promise<boolean>) => {
      const deadline = Date.now() + 10_000;
      while (!(await done()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    };
    // Several sweeps came round while another node led: nothing swept.
    await until(() => asked.length >= 3);
    expect(await gone()).toBe(false);
    // Leadership moved here: the next sweep runs.
    leading = true;
    await until(gone);
    await worker.stop();
    expect(await gone()).toBe(true);
    expect(await harness.store.count('tasks')).toBe(2);
  });

  it('the periodic worker sweeps on its own and stops cleanly', async () => {
    const { harness, old } = await world();
    const worker = startRetention({ store: harness.store, policy: WINDOW, firstDelayMs: 0, intervalMs: 60_000 });
    const deadline = Date.now() + 10_000;
    while (await harness.store.get('webhook_deliveries', `default:${old.deliveryId}`) !== undefined && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    await worker.stop();
    expect(await harness.store.get('webhook_deliveries', `default:${old.deliveryId}`)).toBeUndefined();
    expect(await harness.store.count('tasks')).toBe(2);
  });
});

describe('archiving finished tasks', () => {
  /** Cancels a task and marks its receipts sent, as the outbox would have. */
  async function finish(harness: IntakeHarness, taskId: string) {
    const { store, runtime } = harness;
    expect((await runtime.send(taskActorId(taskId), { type: 'CANCEL', by: 'admin:test' } as TaskEvent, { by: 'admin:test' })).ok).toBe(true);
    await runtime.settled();
    await store.transact(async (tx) => {
      const received = (await tx.get<CommentRecord>('comments', receiptCommentKey(taskId, 'received')))!;
      await tx.put('comments', received.commentKey, { ...received, status: 'sent', commentId: 1 });
      const failure = pendingReceiptRecord({ taskId, resourceKey: received.resourceKey }, 'cancelled');
      await tx.insert('comments', failure.commentKey, { ...failure, status: 'sent', commentId: 2 });
    });
  }

  /** Takes a task to `succeeded` and marks its receipt sent: no failure receipt holds it back. */
  async function succeed(harness: IntakeHarness, taskId: string) {
    const { store, runtime } = harness;
    for (const event of [{ type: 'CLAIM', leaseId: `lease-${taskId}` }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' }, { type: 'REPLY_CONFIRMED' }] as TaskEvent[]) {
      expect((await runtime.send(taskActorId(taskId), event, { by: 'system' })).ok).toBe(true);
    }
    await runtime.settled();
    await store.transact(async (tx) => {
      const received = (await tx.get<CommentRecord>('comments', receiptCommentKey(taskId, 'received')))!;
      await tx.put('comments', received.commentKey, { ...received, status: 'sent', commentId: 1 });
    });
  }

  it.each(['pending', 'sent'] as const)('a %s comment of the task committed after the candidates were picked is decided on and archived with it', async (status) => {
    const { harness, old } = await world();
    const { store } = harness;
    const oldId = String(old.body.taskId);
    await succeed(harness, oldId);
    const task = (await store.get<TaskRecord>('tasks', oldId))!;
    const late = { ...pendingReceiptRecord(task, 'late'), status, commentId: status === 'sent' ? 3 : null };
    const racing = writeBeforeFirstTransaction(store, () => store.transact((tx) => tx.insert('comments', late.commentKey, late)));
    const now = Date.now() + 60_000;
    const result = await archiveFinishedTasks(racing, { archiveAfterMs: 0, now: () => now });
    const after = (await store.get<TaskRecord>('tasks', oldId))!;
    const hot = (await store.list<TaskRecord>('tasks')).map((t) => t.taskId);
    if (status === 'pending') {
      // Its receipt is still to post: the task stays, with every record, in memory.
      expect(result.tasks).toBe(0);
      expect(hot).toContain(oldId);
      expect(after.archive).toBeUndefined();
    } else {
      expect(result.tasks).toBe(1);
      expect(hot).not.toContain(oldId);
      expect(after.archive?.records.comments).toContain(late.commentKey);
      expect((await store.byIndex<CommentRecord>('comments', 'taskId', oldId)).map((c) => c.commentKey)).toEqual([]);
    }
  });

  it('a task arriving on the resource after the candidates were picked keeps the session in memory', async () => {
    h = await startIntakeHarness();
    const harness = h;
    const { store } = harness;
    const first = await post(harness, 7101, '@ccweb-bot first request');
    const firstId = String(first.body.taskId);
    await succeed(harness, firstId);
    const { sessionKey } = (await store.get<TaskRecord>('tasks', firstId))!;
    // The session manager's first write brings the session back to memory.
    await store.transact(async (tx) => {
      await tx.put('sessions', sessionKey, (await tx.get('sessions', sessionKey))!);
    });
    expect((await store.list('sessions')).length).toBe(1);
    let second: Awaited<ReturnType<typeof post>> | undefined;
    const racing = writeBeforeFirstTransaction(store, async () => {
      second = await post(harness, 7102, '@ccweb-bot second request, same issue');
    });
    const result = await archiveFinishedTasks(racing, { archiveAfterMs: 0, now: () => Date.now() + 60_000 });
    expect(second?.status).toBe(202);
    const secondTask = (await store.get<TaskRecord>('tasks', String(second?.body.taskId)))!;
    expect([secondTask.state, secondTask.sessionKey]).toEqual(['queued', sessionKey]);
    // The finished task goes; the session its resource's queued task will resume stays.
    expect(result.tasks).toBe(1);
    expect((await store.list<{ resourceKey: string }>('sessions')).length).toBe(1);
  });

  it('moves settled finished tasks and their records to the cold tier; reads by key, dedup and the detail view still work', async () => {
    const { harness, old, recent } = await world();
    const { store } = harness;
    const oldId = String(old.body.taskId);
    await finish(harness, oldId);
    const fresh = await post(harness, 7005, '@ccweb-bot finished recently');
    const freshId = String(fresh.body.taskId);
    await finish(harness, freshId);
    const unsettled = await post(harness, 7004, '@ccweb-bot cancelled, receipt not sent yet');
    expect((await harness.runtime.send(taskActorId(String(unsettled.body.taskId)), { type: 'CANCEL', by: 'admin:test' } as TaskEvent, { by: 'admin:test' })).ok).toBe(true);
    await harness.runtime.settled();
    const detailBefore = (await taskDetail(store, freshId))!;
    const hotBefore = { comments: await store.count('comments'), actors: await store.count('actors') };

    // Too recent for the window: nothing moves.
    expect((await sweepRetention(store, { ...WINDOW, archiveAfterMs: DAY_MS })).archived).toBe(0);
    const result = await sweepRetention(store, { ...WINDOW, archiveAfterMs: 0 }, { now: () => Date.now() + 60_000 });
    // The queued task and the one whose failure receipt is still pending stay.
    expect(result.archived).toBe(2);
    expect((await store.list<TaskRecord>('tasks')).map((t) => t.taskId).sort()).toEqual([recent.body.taskId, unsettled.body.taskId].sort());
    expect(await store.archivedCount('tasks')).toBe(2);
    expect(await store.count('comments')).toBe(hotBefore.comments - 4);
    expect(await store.count('actors')).toBe(hotBefore.actors - 2);
    // The old delivery expired in the same sweep; the fresh one is archived, not gone.
    expect(await store.get('webhook_deliveries', `default:${old.deliveryId}`)).toBeUndefined();
    expect(await store.get('webhook_deliveries', `default:${fresh.deliveryId}`)).toBeDefined();
    // Intake archived the delivery records as it wrote them: none is in memory.
    expect(await store.count('webhook_deliveries')).toBe(0);

    const archived = (await store.get<TaskRecord & { archive?: { records: Record<string, string[]> } }>('tasks', oldId))!;
    expect(detailBefore['comments']).toHaveLength(2);
    expect(archived.state).toBe('cancelled');
    expect(archived.archive?.records['comments']).toHaveLength(2);
    // The operators' detail view is unchanged apart from the archive note.
    const detailAfter = (await taskDetail(store, freshId))!;
    expect({ ...detailAfter, task: undefined }).toEqual({ ...detailBefore, task: undefined });
    expect(await listTasks(store, { page: 1, pageSize: 50 })).toMatchObject({ total: 2, archivedTasks: 2 });

    // Repeats of a delivery and Replays of a comment are still duplicates of the archived task.
    const repeat = await post(harness, 7001, '@ccweb-bot old request', old.deliveryId);
    const replay = await post(harness, 7001, '@ccweb-bot old request');
    for (const r of [repeat, replay]) expect([r.status, r.body]).toEqual([200, { status: 'duplicate', taskId: oldId }]);
    const freshRepeat = await post(harness, 7005, '@ccweb-bot finished recently', fresh.deliveryId);
    // Answered from the archived delivery record: the first answer again (202 becomes 200).
    expect([freshRepeat.status, freshRepeat.body]).toEqual([200, fresh.body]);
    expect(await store.count('tasks') + await store.archivedCount('tasks')).toBe(4);

    // With a task window, an archived task goes with every record it listed.
    const later = Date.now() + 2 * DAY_MS;
    const expired = await sweepRetention(store, { deliveryRetentionMs: 30 * DAY_MS, taskRetentionMs: DAY_MS, archiveAfterMs: null }, { now: () => later });
    expect(expired.tasks).toBe(3); // both archived ones and the unsettled cancelled one
    expect(await store.get('tasks', oldId)).toBeUndefined();
    expect(await store.get('actors', taskActorId(oldId))).toBeUndefined();
    for (const key of archived.archive!.records['comments']!) expect(await store.get('comments', key)).toBeUndefined();
    expect(await store.archivedCount('tasks')).toBe(0);
    expect((await store.list<TaskRecord>('tasks')).map((t) => t.taskId).sort()).toEqual([recent.body.taskId].sort());
  });

  it('a task another sweep archived meanwhile is left as it is (two nodes sweeping while the leader changes)', async () => {
    const { harness, old } = await world();
    const { store } = harness;
    const oldId = String(old.body.taskId);
    await succeed(harness, oldId);
    const now = Date.now() + 60_000;
    expect((await sweepRetention(store, { ...WINDOW, archiveAfterMs: 0 }, { now: () => now })).archived).toBe(1);
    const archived = (await store.get<TaskRecord>('tasks', oldId))!;
    expect(archived.archive?.records.comments).toHaveLength(1);

    // The other node picked its candidates before this archive was applied; its batch runs now.
    expect(await store.transact((tx) => archiveTask(tx, oldId, now, new Date(now + 1).toISOString()))).toBe(false);
    expect(await store.get<TaskRecord>('tasks', oldId)).toEqual(archived);
    expect((await store.list<TaskRecord>('tasks')).map((t) => t.taskId)).not.toContain(oldId);
  });
});
