// Receipt notices against the Gitea REST double over 127.0.0.1, with the real store,
// runtime, task actors and receipt outbox: a task parked in blocked_workspace gets its receipt edited
// to say it is paused; once an operator unblocks it (UNBLOCK → queued), the receipt is edited back to
// the plain receipt with a note that it resumed — once, in the configured language (CCWEB_LOCALE).
import { afterEach, describe, expect, it } from 'vitest';
import type { EventObject } from 'xstate';
import type { CommentRecord, TaskRecord } from '../../src/domain/records.js';
import type { Locale } from '../../src/messages/catalogue.js';
import type { UsageLimits } from '../../src/domain/usage-records.js';
import type { RepositoryScope } from '../../src/domain/repository-scope.js';
import { createReceiptNotices, noticeKey, type ReceiptNotices } from '../../src/receipts/receipt-notice.js';
import { pendingReceiptRecord, receiptCommentKey } from '../../src/receipts/receipt-record.js';
import { TASK_KIND, taskActorId } from '../../src/tasks/task-actor.js';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import { openWorld, removeDir, startGitea, taskRecord, type GiteaFixture, type World } from '../support/verification-world.js';

let gitea: GiteaFixture | null = null;
let world: World | null = null;
let notices: ReceiptNotices | null = null;
afterEach(async () => {
  notices?.stop();
  await world?.close();
  await gitea?.close();
  if (world) removeDir(world.dir);
  notices = world = gitea = null;
});

async function setup(locale?: Locale, receipt: 'pending' | 'failed' = 'pending', scope?: Pick<RepositoryScope, 'owns' | 'leads'>, limits: UsageLimits = {}) {
  gitea = await startGitea([21]);
  world = await openWorld(gitea, locale ? { locale } : {});
  const w = world;
  notices = createReceiptNotices({ store: w.store, runtime: w.runtime, gitea: w.gitea, limits, retryDelaysMs: [10, 20, 40], ...(locale ? { locale } : {}), ...(scope ? { scope } : {}) });
  await w.outbox.start();
  await notices.start();
  const task = taskRecord(21, { state: 'received' });
  const created = await w.store.transact(async (tx) => {
    await tx.insert('tasks', task.taskId, task);
    const c = await w.runtime.createInTx(tx, TASK_KIND, taskActorId(task.taskId), { taskId: task.taskId }, { events: [{ type: 'ACCEPT' }] as EventObject[], taskId: task.taskId });
    // `failed`: as if Gitea had refused the receipt for good (the outbox's permanent-failure outcome).
    await tx.insert('comments', receiptCommentKey(task.taskId, 'received'), { ...pendingReceiptRecord(task, 'received'), status: receipt, errorCode: receipt === 'failed' ? 'gitea_forbidden' : null });
    return c;
  });
  created.start();
  return { w, g: gitea, n: notices, task };
}

async function send(w: World, task: TaskRecord, event: TaskEvent, by = 'system') {
  expect((await w.runtime.send(taskActorId(task.taskId), event, { by })).ok).toBe(true);
}

async function settle(w: World, n: ReceiptNotices) {
  await w.runtime.settled();
  await w.outbox.drain();
  await n.drain();
}

const edits = (g: GiteaFixture) => g.double.requests.filter((r) => r.method === 'PATCH').length;

async function blockThenUnblock(locale?: Locale) {
  const { w, g, n, task } = await setup(locale);
  await settle(w, n);
  await send(w, task, { type: 'CLAIM', leaseId: 'l1' });
  await send(w, task, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
  await settle(w, n);
  const paused = g.comments(21).map((c) => c.body);
  await send(w, task, { type: 'UNBLOCK', by: 'admin:ops' }, 'admin:ops');
  await settle(w, n);
  return { w, g, n, task, paused, resumed: g.comments(21).map((c) => c.body) };
}

describe('receipt notices', () => {
  it('a task stopped by a 5 s agent-time budget: its receipt names the real figures in seconds and the budget', async () => {
    const { w, g, n, task } = await setup('en', 'pending', undefined, { taskWallMs: 5_000 });
    await settle(w, n);
    await send(w, task, { type: 'CLAIM', leaseId: 'l1' });
    await send(w, task, { type: 'WORKSPACE_READY' });
    await w.store.transact(async (tx) => {
      const t = (await tx.get<TaskRecord>('tasks', task.taskId))!;
      await tx.put<TaskRecord>('tasks', task.taskId, { ...t, usage: { totalTokens: 10, inputTokens: 8, cachedInputTokens: 0, outputTokens: 2, reasoningOutputTokens: 0, turns: 1, wallMs: 6_200, diffBytes: 0, model: null } });
    });
    await send(w, task, { type: 'TURN_FAILED', errorCode: 'budget_task_wall_time', retryable: false });
    await settle(w, n);
    expect(g.comments(21)).toHaveLength(1);
    const body = g.comments(21)[0]!.body;
    expect(body.split('\n')[0]).toBe(`giteabot: received — the request from @alice failed (task ${task.taskId}).`);
    expect(body).toContain('this task used 6 s of agent time and reached its limit of 5 s of agent time per task (`budget_task_wall_time`)');
    expect(body).not.toMatch(/minutes|unexpected/);
  });

  it('an unblocked task gets its receipt back with a note that it resumed, once (en)', async () => {
    const { w, g, n, task, paused, resumed } = await blockThenUnblock('en');
    expect(paused).toHaveLength(1);
    expect(paused[0]).toContain('giteabot: received');
    expect(paused[0]).toContain('**Paused:**');
    expect(resumed).toHaveLength(1);
    expect(resumed[0]).toMatch(/^giteabot: received — the request from @alice is queued \(task \S+\)\.\n\n\*\*Resumed:\*\* an operator unblocked task \S+; it is queued again\./);
    expect(resumed[0]).not.toContain('Paused');
    expect(await w.store.get<CommentRecord>('comments', noticeKey(task.taskId, 'resumed'))).toMatchObject({ status: 'sent', kind: 'notice' });
    expect(edits(g)).toBe(2);

    // Once: more transitions, kicks and a restart of the notices edit nothing again.
    n.stop();
    await n.start();
    await send(w, task, { type: 'CLAIM', leaseId: 'l2' });
    await settle(w, n);
    expect(edits(g)).toBe(2);
    expect((await w.store.audit({ taskId: task.taskId })).filter((e) => e.action === 'receipt.notice_edited')).toHaveLength(2);
  });

  it('speaks the default language (zh): 已暂停, then 已收到 with 已恢复', async () => {
    const { g, paused, resumed } = await blockThenUnblock();
    expect(paused[0]).toContain('已收到');
    expect(paused[0]).toContain('**已暂停：**');
    expect(resumed).toHaveLength(1);
    expect(resumed[0]).toMatch(/^giteabot: 已收到 — @alice 的请求已排队（任务 \S+）。\n\n\*\*已恢复：\*\* 管理员已解除任务 \S+ 的阻塞，任务已重新排队。/);
    expect(resumed[0]).not.toContain('已暂停');
    expect(edits(g)).toBe(2);
  });

  it('an unblock the notices did not see (service down) is caught up at start', async () => {
    const { w, g, n, task } = await setup('en');
    await settle(w, n);
    await send(w, task, { type: 'CLAIM', leaseId: 'l1' });
    await send(w, task, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
    await settle(w, n);
    n.stop();
    await send(w, task, { type: 'UNBLOCK', by: 'admin:ops' }, 'admin:ops');
    await w.runtime.settled();
    expect(g.comments(21)[0]!.body).toContain('**Paused:**');
    await n.start();
    await settle(w, n);
    expect(g.comments(21).map((c) => c.body)).toEqual([expect.stringContaining('**Resumed:**')]);
    expect(edits(g)).toBe(2);
  });

  it('without a receipt, the pause notice is a comment of its own, and that comment is edited on unblock', async () => {
    const { w, g, n, task } = await setup('en', 'failed');
    await settle(w, n);
    await send(w, task, { type: 'CLAIM', leaseId: 'l1' });
    await send(w, task, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
    await settle(w, n);
    expect(g.comments(21).map((c) => c.body)).toEqual([expect.stringMatching(/^giteabot: task \S+ — \*\*Paused:\*\*/)]);
    await send(w, task, { type: 'UNBLOCK', by: 'admin:ops' }, 'admin:ops');
    await settle(w, n);
    const bodies = g.comments(21).map((c) => c.body);
    expect(bodies).toHaveLength(1);
    expect(bodies[0]).toMatch(/^giteabot: task \S+ — \*\*Resumed:\*\* an operator unblocked task/);
    expect(bodies[0]).not.toContain('Paused');
    expect(g.posts(21)).toBe(1);
    expect(edits(g)).toBe(1);
  });

  it('a task cancelled while blocked keeps its pause notice: no resumed edit', async () => {
    const { w, g, n, task } = await setup('en');
    await settle(w, n);
    await send(w, task, { type: 'CLAIM', leaseId: 'l1' });
    await send(w, task, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
    await settle(w, n);
    await send(w, task, { type: 'CANCEL', by: 'admin:ops' }, 'admin:ops');
    await settle(w, n);
    expect(await w.store.get('comments', noticeKey(task.taskId, 'resumed'))).toBeUndefined();
    expect(edits(g)).toBe(1);
  });
});

describe('receipt notices with several nodes: only the repository owner edits', () => {
  /** A scope the test moves: whether this node owns the repository now. */
  function movableScope(owned: boolean) {
    const scope = { owned, owns: (_repoKey: string) => scope.owned, leads: () => true };
    return scope;
  }

  it("a blocked task of another node's repository: no edit here; once the repository is owned here, one", async () => {
    const scope = movableScope(false);
    const { w, g, n, task } = await setup('en', 'pending', scope);
    await settle(w, n);
    await send(w, task, { type: 'CLAIM', leaseId: 'l1' });
    await send(w, task, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
    // drain() waits only for this node's notices: it returns with the notice still pending.
    await settle(w, n);
    expect(edits(g)).toBe(0);
    expect((await w.store.get<CommentRecord>('comments', noticeKey(task.taskId, 'blocked_workspace')))?.status).toBe('pending');

    scope.owned = true;
    await n.catchUp();
    await settle(w, n);
    expect(edits(g)).toBe(1);
    expect(g.comments(21)[0]!.body).toContain('**Paused:**');
    expect((await w.store.get<CommentRecord>('comments', noticeKey(task.taskId, 'blocked_workspace')))?.status).toBe('sent');
  });

  it("start's catch-up records no notice for another node's repository; the owner's catch-up does", async () => {
    const scope = movableScope(true);
    const { w, g, n, task } = await setup('en', 'pending', scope);
    await settle(w, n);
    n.stop();
    await send(w, task, { type: 'CLAIM', leaseId: 'l1' });
    await send(w, task, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
    await w.runtime.settled();
    scope.owned = false;
    await n.start();
    await settle(w, n);
    expect(await w.store.get('comments', noticeKey(task.taskId, 'blocked_workspace'))).toBeUndefined();
    expect(edits(g)).toBe(0);

    scope.owned = true;
    await n.catchUp();
    await settle(w, n);
    expect((await w.store.get<CommentRecord>('comments', noticeKey(task.taskId, 'blocked_workspace')))?.status).toBe('sent');
    expect(edits(g)).toBe(1);
  });

  it('asks at every notice: ownership lost during a pass stops the edits that follow', async () => {
    const scope = movableScope(true);
    gitea = await startGitea([21, 22]);
    world = await openWorld(gitea, { locale: 'en' });
    const w = world;
    // Another node takes the repository over while the first edit is on its way.
    const client = {
      ...w.gitea,
      editIssueComment: (...args: Parameters<typeof w.gitea.editIssueComment>) => {
        scope.owned = false;
        return w.gitea.editIssueComment(...args);
      },
    };
    notices = createReceiptNotices({ store: w.store, runtime: w.runtime, gitea: client, limits: {}, retryDelaysMs: [10, 20, 40], locale: 'en', scope });
    const n = notices;
    const tasks = [taskRecord(21, { taskId: 'task-21', state: 'received' }), taskRecord(22, { taskId: 'task-22', state: 'received' })];
    for (const task of tasks) {
      const created = await w.store.transact(async (tx) => {
        await tx.insert('tasks', task.taskId, task);
        const c = await w.runtime.createInTx(tx, TASK_KIND, taskActorId(task.taskId), { taskId: task.taskId }, { events: [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: `l-${task.taskId}` }, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' }] as EventObject[], taskId: task.taskId });
        await tx.insert('comments', receiptCommentKey(task.taskId, 'received'), pendingReceiptRecord(task, 'received'));
        return c;
      });
      created.start();
    }
    await w.outbox.start();
    await w.runtime.settled();
    await w.outbox.drain();
    // Both receipts posted; both tasks blocked before the notices started: one pass for both.
    await n.start();
    await settle(w, n);
    const notes = await Promise.all(tasks.map((t) => w.store.get<CommentRecord>('comments', noticeKey(t.taskId, 'blocked_workspace'))));
    const sent = notes.filter((c) => c?.status === 'sent');
    expect(sent).toHaveLength(1);
    expect(edits(gitea)).toBe(1);
  });
});
