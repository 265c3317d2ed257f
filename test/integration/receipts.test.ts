// The receipt outbox against the Gitea REST double over 127.0.0.1, with the real store, runtime and
// task actors. Every scenario ends by counting the comments on each issue.
// Gitea stand-in (not a real Gitea) for the faults a real one cannot produce on cue: 500s (failNext),
// slow answers (delay), and a locked issue that refuses the bot. Receipts on a real Gitea: real-gitea.e2e.test.ts.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EventObject } from 'xstate';
import type { CommentRecord, TaskRecord } from '../../src/domain/records.js';
import { formatReceiptMarker } from '../../src/domain/marker.js';
import { pendingReceiptRecord, receiptCommentKey } from '../../src/receipts/receipt-record.js';
import { createReceiptOutbox } from '../../src/receipts/receipt-outbox.js';
import { TASK_KIND, taskActorId } from '../../src/tasks/task-actor.js';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import {
  BOT,
  OWNER,
  REPO,
  createFetchGate,
  openWorld,
  removeDir,
  startGitea,
  taskRecord,
  type GiteaFixture,
  type World,
} from '../support/verification-world.js';
import { until } from '../support/until.js';

const ISSUES = [11, 12, 13, 14, 15, 16];
let gitea: GiteaFixture;
let world: World;
const dirs: string[] = [];

beforeEach(async () => {
  gitea = await startGitea(ISSUES);
  world = await openWorld(gitea);
  dirs.push(world.dir);
});
afterEach(async () => {
  await world.close();
  await gitea.close();
  for (const d of dirs.splice(0)) removeDir(d);
});

/** What intake does: task record + task actor (received → queued) + pending receipt, in one transaction. */
async function queueTask(number: number, events: TaskEvent[] = []): Promise<TaskRecord> {
  const task = taskRecord(number, { state: 'received' });
  const created = await world.store.transact(async (tx) => {
    await tx.insert('tasks', task.taskId, task);
    const c = await world.runtime.createInTx(tx, TASK_KIND, taskActorId(task.taskId), { taskId: task.taskId }, {
      events: [{ type: 'ACCEPT' }, ...events] as EventObject[],
      taskId: task.taskId,
    });
    await tx.insert('comments', receiptCommentKey(task.taskId, 'received'), pendingReceiptRecord(task, 'received'));
    return c;
  });
  created.start();
  return task;
}

async function send(task: TaskRecord, event: TaskEvent, by?: string): Promise<void> {
  const r = await world.runtime.send(taskActorId(task.taskId), event, { by: by ?? 'system' });
  expect(r.ok).toBe(true);
}

async function row(taskId: string, state: string): Promise<CommentRecord | undefined> {
  return world.store.get<CommentRecord>('comments', receiptCommentKey(taskId, state));
}

function bodies(issue: number): string[] {
  return gitea.comments(issue).map((c) => c.body);
}

describe('receipt outbox', () => {
  it('posts exactly one 已收到 receipt per task across 50 duplicate kicks', async () => {
    gitea.double.faults.delay(/\/comments$/, 20, { method: 'POST' });
    const tasks = [await queueTask(11), await queueTask(12), await queueTask(13)];
    await world.outbox.start();
    for (let i = 0; i < 50; i++) world.outbox.kick();
    await Promise.all(Array.from({ length: 5 }, () => world.outbox.drain()));

    for (const task of tasks) {
      const onGitea = gitea.comments(task.resource.number);
      expect(onGitea).toHaveLength(1);
      expect(onGitea[0]!.user.login).toBe(BOT);
      expect(onGitea[0]!.body).toContain('giteabot: 已收到');
      expect(onGitea[0]!.body).toContain('@alice');
      expect(onGitea[0]!.body).toContain(formatReceiptMarker(receiptCommentKey(task.taskId, 'received')));
      // Nothing of the untrusted comment text is echoed.
      expect(onGitea[0]!.body).not.toContain('IGNORE-ALL-RULES');
      expect(onGitea[0]!.body).not.toContain('<script>');
      expect(await row(task.taskId, 'received')).toMatchObject({ status: 'sent', commentId: onGitea[0]!.id });
      const a = (await world.store.audit({ taskId: task.taskId })).map((e) => e.action);
      expect(a.filter((x) => x === 'receipt.send_intent')).toHaveLength(1);
      expect(a.indexOf('receipt.send_intent')).toBeLessThan(a.indexOf('receipt.send_result'));
    }
    expect(gitea.posts()).toBe(3);
    // More kicks after the fact change nothing.
    for (let i = 0; i < 50; i++) world.outbox.kick();
    await world.outbox.drain();
    expect(gitea.posts()).toBe(3);
  });

  it('a task that reaches queued while the outbox runs is picked up without an explicit kick', async () => {
    await world.outbox.start();
    const task = await queueTask(11);
    await world.runtime.settled();
    await world.outbox.drain();
    expect(bodies(11)).toHaveLength(1);
    expect((await row(task.taskId, 'received'))?.status).toBe('sent');
  });

  it('retries transient 500s with backoff, then posts once', async () => {
    gitea.double.faults.failNext(/\/comments$/, 500, 2, { method: 'POST' });
    const task = await queueTask(11);
    await world.outbox.start();
    await world.outbox.drain();

    expect((await row(task.taskId, 'received'))?.status).toBe('sent');
    expect(gitea.posts(11)).toBe(3);
    expect(bodies(11)).toHaveLength(1);
  });

  it('a POST Gitea performed but answered 500 is found by its marker, not posted again', async () => {
    gitea.double.faults.failNext(/\/comments$/, 500, 1, { method: 'POST', afterEffect: true });
    const task = await queueTask(11);
    await world.outbox.start();
    await world.outbox.drain();

    const onGitea = gitea.comments(11);
    expect(onGitea).toHaveLength(1);
    expect(await row(task.taskId, 'received')).toMatchObject({ status: 'sent', commentId: onGitea[0]!.id });
    expect((await world.store.audit({ taskId: task.taskId })).map((e) => e.action)).toContain('receipt.adopted');
    expect(gitea.posts(11)).toBe(1);
  });

  it('a restart after the intent, with the POST landed but no result: found by marker, not re-posted', async () => {
    const gate = createFetchGate();
    await world.close();
    world = await openWorld(gitea, { dir: world.dir, fetch: gate.fetch });
    const task = await queueTask(11);
    const landed = gate.hang('POST', /\/issues\/11\/comments$/, 'after');
    await world.outbox.start();
    await landed;
    expect(bodies(11)).toHaveLength(1);
    await world.crash();

    world = await openWorld(gitea, { dir: world.dir });
    expect((await row(task.taskId, 'received'))?.status).toBe('pending');
    await world.outbox.start();
    await world.outbox.drain();

    const onGitea = gitea.comments(11);
    expect(onGitea).toHaveLength(1);
    expect(await row(task.taskId, 'received')).toMatchObject({ status: 'sent', commentId: onGitea[0]!.id });
    expect((await world.store.audit({ taskId: task.taskId })).map((e) => e.action)).toContain('receipt.adopted');
    expect(gitea.posts(11)).toBe(1);
  });

  it('a restart after the intent, with the POST never sent: looks, finds nothing, posts once', async () => {
    const gate = createFetchGate();
    await world.close();
    world = await openWorld(gitea, { dir: world.dir, fetch: gate.fetch });
    const task = await queueTask(11);
    const stuck = gate.hang('POST', /\/issues\/11\/comments$/, 'before');
    await world.outbox.start();
    await stuck;
    await world.crash();

    world = await openWorld(gitea, { dir: world.dir });
    await world.outbox.start();
    await world.outbox.drain();

    expect(bodies(11)).toHaveLength(1);
    expect((await row(task.taskId, 'received'))?.status).toBe('sent');
    const gets = gitea.double.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/issues/11/comments'));
    expect(gets).toHaveLength(1);
    expect(gitea.posts(11)).toBe(1);
  });

  it('a locked issue (403) fails the receipt at once with an alert', async () => {
    gitea.double.setLocked(OWNER, REPO, 11, true);
    const task = await queueTask(11);
    await world.outbox.start();
    await world.outbox.drain();

    expect(await row(task.taskId, 'received')).toMatchObject({ status: 'failed', errorCode: 'gitea_forbidden' });
    expect((await world.store.audit({ taskId: task.taskId })).some((e) => e.action === 'receipt.failed' && e.level === 'alert')).toBe(true);
    expect(gitea.posts(11)).toBe(1);
    expect(bodies(11)).toHaveLength(0);
  });

  it('gives up after the bounded retries with an alert', async () => {
    gitea.double.faults.failNext(/\/comments$/, 503, 100, { method: 'POST' });
    const task = await queueTask(11);
    await world.outbox.start();
    await world.outbox.drain();

    expect(await row(task.taskId, 'received')).toMatchObject({ status: 'failed', errorCode: 'gitea_server_error' });
    // 1 attempt + 3 retries (retryDelaysMs has 3 entries); the retries looked for an earlier copy first.
    expect(gitea.posts(11)).toBe(4);
    expect(bodies(11)).toHaveLength(0);
  });

  it('one failure receipt per failure state, in plain words; none for success', async () => {
    await world.outbox.start();
    const failed = await queueTask(11);
    const failedReply = await queueTask(12);
    const aborted = await queueTask(13);
    const cancelled = await queueTask(14);
    const succeeded = await queueTask(15);

    await send(failed, { type: 'CLAIM', leaseId: 'l1' });
    await send(failed, { type: 'PREPARE_FAILED', errorCode: 'mcp_command_missing', retryable: false });
    await send(failedReply, { type: 'CLAIM', leaseId: 'l2' });
    await send(failedReply, { type: 'WORKSPACE_READY' });
    await send(failedReply, { type: 'TURN_REPLIED' });
    await send(failedReply, { type: 'REPLY_FAILED', errorCode: 'rest_fallback_unconfirmed' });
    await send(aborted, { type: 'CLAIM', leaseId: 'l3' });
    await send(aborted, { type: 'WORKSPACE_READY' });
    await send(aborted, { type: 'ABORT', by: 'admin:alice' }, 'admin:alice');
    await send(aborted, { type: 'ABORT_CONFIRMED' });
    await send(cancelled, { type: 'CANCEL', by: 'gitea:user:bob' }, 'gitea:user:bob');
    await send(succeeded, { type: 'CLAIM', leaseId: 'l5' });
    await send(succeeded, { type: 'WORKSPACE_READY' });
    await send(succeeded, { type: 'TURN_REPLIED' });
    await send(succeeded, { type: 'REPLY_CONFIRMED' });
    await world.runtime.settled();
    for (let i = 0; i < 20; i++) world.outbox.kick();
    await world.outbox.drain();

    const expectTwo = (issue: number, phrase: RegExp) => {
      const b = bodies(issue);
      expect(b).toHaveLength(2);
      expect(b[0]).toContain('已收到');
      expect(b[1]).toMatch(phrase);
    };
    // In the default language (CCWEB_LOCALE unset: zh).
    expectTwo(11, /^giteabot: 任务 \S+ 失败：Gitea 工具服务无法启动（找不到命令）（错误码：`mcp_command_missing`）。/);
    expectTwo(12, /回答没有出现在这里：.*`rest_fallback_unconfirmed`/);
    expectTwo(13, /在运行中被 管理员 alice 中止/);
    expectTwo(14, /在完成前被 @bob 取消/);
    expect(bodies(15)).toHaveLength(1);
    expect(bodies(15)[0]).toContain('已收到');

    expect(await row(failed.taskId, 'failed')).toMatchObject({ status: 'sent', kind: 'status' });
    expect(bodies(11)[1]).toContain(formatReceiptMarker(receiptCommentKey(failed.taskId, 'failed')));
    expect((await world.store.list<CommentRecord>('comments', (r) => r.taskId === succeeded.taskId)).map((r) => r.commentKey)).toEqual([
      receiptCommentKey(succeeded.taskId, 'received'),
    ]);
    // A restart of the outbox does not add any.
    world.outbox.stop();
    await world.outbox.start();
    await world.outbox.drain();
    expect(gitea.posts()).toBe(9);
  });

  it('at start, tasks that ended without a failure receipt get one (in English with locale en)', async () => {
    await world.close();
    world = await openWorld(gitea, { locale: 'en' });
    dirs.push(world.dir);
    // These ended before any outbox listened (e.g. the process died right after the transition).
    const failed = await queueTask(11, [{ type: 'CLAIM', leaseId: 'l1' }, { type: 'FAIL', errorCode: 'workspace_dirty' }]);
    const cancelled = await queueTask(12, [{ type: 'CANCEL', by: 'admin:carol' }]);
    await world.runtime.settled();

    await world.outbox.start();
    await world.outbox.drain();

    expect(bodies(11)).toHaveLength(2);
    expect(bodies(11)[0]).toMatch(/^giteabot: received — the request from @\S+ is queued \(task /);
    expect(bodies(11)[1]).toMatch(/failed: the workspace has local changes/);
    expect(bodies(12)).toHaveLength(2);
    expect(bodies(12)[1]).toMatch(/cancelled by operator carol/);
    expect((await row(failed.taskId, 'failed'))?.status).toBe('sent');
    expect((await row(cancelled.taskId, 'cancelled'))?.status).toBe('sent');
  });
});

describe('receipt outbox with several nodes: only the repository owner sends', () => {
  /** A scope the test moves: which repositories this node owns now, and whether it leads. */
  function movableScope(owned: boolean, leading = false) {
    const scope = { owned, leading, owns: (_repoKey: string) => scope.owned, leads: () => scope.leading };
    return scope;
  }

  it('every node alike: three outboxes send from one store at once, each row is sent by one of them, every receipt posted once', async () => {
    // Slow POSTs: every node reaches each row while another's POST is still on its way.
    gitea.double.faults.delay(/\/comments$/, 150, { method: 'POST' });
    const tasks = [await queueTask(11), await queueTask(12), await queueTask(13)];
    const nodes = ['node-a', 'node-b', 'node-c'].map((node) => createReceiptOutbox({ store: world.store, runtime: world.runtime, gitea: world.gitea, botLogin: BOT, retryDelaysMs: [10], processId: `${node}/1/1`, sendClaimMs: 1_000 }));
    try {
      await Promise.all(nodes.map((n) => n.start()));
      for (const n of nodes) n.kick();
      await Promise.all(nodes.map((n) => n.drain()));
      // A node that found a row claimed leaves it to the claimant: wait until every row is sent.
      for (let i = 0; i < 100 && (await Promise.all(tasks.map((t) => row(t.taskId, 'received')))).some((r) => r?.status !== 'sent'); i++) {
        await new Promise((r) => setTimeout(r, 50));
        for (const n of nodes) n.kick();
      }
    } finally {
      for (const n of nodes) n.stop();
    }
    for (const task of tasks) {
      expect((await row(task.taskId, 'received'))?.status).toBe('sent');
      expect(bodies(task.resource.number)).toHaveLength(1);
    }
    expect(gitea.posts()).toBe(3);
  });

  it("leaves another node's repository's receipts alone, and sends them once the repository is owned here", async () => {
    const scope = movableScope(false, true);
    await world.close();
    world = await openWorld(gitea, { scope });
    dirs.push(world.dir);
    const task = await queueTask(11, [{ type: 'CANCEL', by: 'admin:carol' }]);
    await world.runtime.settled();
    world.outbox.stop();

    await world.outbox.start();
    for (let i = 0; i < 5; i++) world.outbox.kick();
    // drain() waits only for this node's rows: it returns although the row is still pending.
    await world.outbox.drain();
    expect(gitea.posts()).toBe(0);
    expect((await row(task.taskId, 'received'))?.status).toBe('pending');
    // Not even the failure receipt row is made here at start: that is the owner's catch-up.
    expect(await row(task.taskId, 'cancelled')).toBeUndefined();

    // This node takes the repository over: its catch-up makes the failure receipt, its pass sends both.
    scope.owned = true;
    await world.outbox.catchUp();
    await world.outbox.drain();
    expect(bodies(11)).toHaveLength(2);
    expect((await row(task.taskId, 'received'))?.status).toBe('sent');
    expect((await row(task.taskId, 'cancelled'))?.status).toBe('sent');
  });

  it('asks at every row: ownership lost during a pass stops the sends that follow', async () => {
    const scope = movableScope(true);
    // Another node takes the repository over while the first receipt's POST is on its way.
    const takenOver: typeof globalThis.fetch = (input, init) => {
      const req = input instanceof Request ? input : new Request(input, init);
      if (req.method === 'POST') scope.owned = false;
      return globalThis.fetch(req);
    };
    await world.close();
    world = await openWorld(gitea, { scope, fetch: takenOver });
    dirs.push(world.dir);
    const first = await queueTask(11);
    const second = await queueTask(12);
    await world.outbox.start();
    await world.outbox.drain();
    expect((await row(first.taskId, 'received'))?.status).toBe('sent');
    expect((await row(second.taskId, 'received'))?.status).toBe('pending');
    expect(gitea.posts()).toBe(1);
  });

  it("a repository that changes hands while its receipt's POST is on its way: the new owner leaves the row alone while that POST may land, then finds it on Gitea and adopts it", async () => {
    const scopeA = movableScope(true);
    // Node a's POST is held on its way to Gitea until the test lets it go; then it lands, and node a
    // dies before it hears the answer (it never records the result).
    let letGo!: () => void;
    const held = new Promise<void>((r) => (letGo = r));
    let postReached!: () => void;
    const reached = new Promise<void>((r) => (postReached = r));
    let landed!: () => void;
    const postLanded = new Promise<void>((r) => (landed = r));
    const slowThenDead: typeof globalThis.fetch = async (input, init) => {
      const req = input instanceof Request ? input : new Request(input, init);
      if (req.method !== 'POST') return globalThis.fetch(req);
      postReached();
      await held;
      await (await globalThis.fetch(req)).arrayBuffer();
      landed();
      return new Promise<Response>(() => undefined);
    };
    await world.close();
    world = await openWorld(gitea, { scope: scopeA, fetch: slowThenDead, processId: 'node-a/100/1', sendClaimMs: 5_000 });
    dirs.push(world.dir);
    const task = await queueTask(11);
    await world.outbox.start();
    await reached;
    // The repository moves to node b (same store, its own outbox and process) while a's POST is held.
    scopeA.owned = false;
    world.outbox.stop();
    const logB: string[] = [];
    const b = createReceiptOutbox({
      store: world.store,
      runtime: world.runtime,
      gitea: world.gitea,
      botLogin: BOT,
      processId: 'node-b/200/2',
      sendClaimMs: 5_000,
      retryDelaysMs: [10, 20, 40],
      logger: (msg) => void logB.push(msg),
    });
    await b.start();
    await until('b leaves the row to a', () => logB.includes('receipt left to the node that is sending it'), 5_000);
    letGo();
    await postLanded;
    await b.drain();
    b.stop();
    expect(gitea.posts(11)).toBe(1);
    expect(bodies(11)).toHaveLength(1);
    expect((await row(task.taskId, 'received'))?.status).toBe('sent');
    expect((await world.store.audit({ taskId: task.taskId })).map((e) => e.action)).toContain('receipt.adopted');
  });

  it('a row whose task is gone is marked failed by the leading node only', async () => {
    const scope = movableScope(false, false);
    await world.close();
    world = await openWorld(gitea, { scope });
    dirs.push(world.dir);
    const orphan = pendingReceiptRecord({ taskId: 'task-gone', resourceKey: `default:${OWNER}/${REPO}:issue:11` }, 'received');
    await world.store.transact((tx) => tx.insert('comments', orphan.commentKey, orphan));
    await world.outbox.start();
    await world.outbox.drain();
    expect((await world.store.get<CommentRecord>('comments', orphan.commentKey))?.status).toBe('pending');
    scope.leading = true;
    world.outbox.kick();
    await world.outbox.drain();
    expect(await world.store.get<CommentRecord>('comments', orphan.commentKey)).toMatchObject({ status: 'failed', errorCode: 'task_missing' });
    expect(gitea.posts()).toBe(0);
  });
});
