// The receipt as the task's tracking comment, its worker with several nodes:
// against the Gitea REST double over 127.0.0.1, with the real store, runtime, task actors and
// receipt outbox, a node edits a receipt only while it owns the task's repository, asked at each visit.
import { afterEach, describe, expect, it } from 'vitest';
import type { EventObject } from 'xstate';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import type { CommentRecord, TaskRecord } from '../../src/domain/records.js';
import { createReceiptProgress, type ReceiptProgress } from '../../src/receipts/receipt-progress-worker.js';
import { pendingReceiptRecord, receiptCommentKey } from '../../src/receipts/receipt-record.js';
import { TASK_KIND, taskActorId } from '../../src/tasks/task-actor.js';
import { openWorld, removeDir, startGitea, taskRecord, type GiteaFixture, type World } from '../support/verification-world.js';

let gitea: GiteaFixture | null = null;
let world: World | null = null;
let progress: ReceiptProgress | null = null;
afterEach(async () => {
  progress?.stop();
  await world?.close();
  await gitea?.close();
  if (world) removeDir(world.dir);
  progress = world = gitea = null;
});

/** A scope the test moves: whether this node owns the repository now. */
function movableScope(owned: boolean) {
  const scope = { owned, owns: (_repoKey: string) => scope.owned, leads: () => true };
  return scope;
}

/** A queued task whose receipt the outbox has posted, and a progress worker under `scope`. */
async function setup(scope: ReturnType<typeof movableScope>, intervalMs = 0) {
  gitea = await startGitea([31]);
  world = await openWorld(gitea, { locale: 'en' });
  const w = world;
  const task = taskRecord(31, { state: 'received' });
  const created = await w.store.transact(async (tx) => {
    await tx.insert('tasks', task.taskId, task);
    const c = await w.runtime.createInTx(tx, TASK_KIND, taskActorId(task.taskId), { taskId: task.taskId }, { events: [{ type: 'ACCEPT' }] as EventObject[], taskId: task.taskId });
    await tx.insert('comments', receiptCommentKey(task.taskId, 'received'), pendingReceiptRecord(task, 'received'));
    return c;
  });
  created.start();
  await w.outbox.start();
  await w.runtime.settled();
  await w.outbox.drain();
  expect((await w.store.get<CommentRecord>('comments', receiptCommentKey(task.taskId, 'received')))?.status).toBe('sent');
  progress = createReceiptProgress({ store: w.store, runtime: w.runtime, gitea: w.gitea, locale: 'en', intervalMs, tickMs: 10, scope });
  return { w, g: gitea, p: progress, task };
}

const edits = (g: GiteaFixture) => g.double.requests.filter((r) => r.method === 'PATCH').length;
const ticks = (n: number) => new Promise((r) => setTimeout(r, n * 10));

async function until(done: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await done()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

describe('receipt progress with several nodes: only the repository owner edits', () => {
  it("a transition of another node's repository's task edits nothing here; once owned, the receipt is edited", async () => {
    const scope = movableScope(false);
    const { w, g, p, task } = await setup(scope);
    await p.start();
    const cancel: TaskEvent = { type: 'CANCEL', by: 'admin:carol' };
    expect((await w.runtime.send(taskActorId(task.taskId), cancel, { by: 'admin:carol' })).ok).toBe(true);
    await w.runtime.settled();
    await p.drain();
    await ticks(5);
    expect(edits(g)).toBe(0);

    scope.owned = true;
    p.touch(task.taskId);
    await p.drain();
    expect(edits(g)).toBe(1);
    expect(g.comments(31)[0]!.body).toContain('**Stage:** stopped');
    expect((await w.store.get<CommentRecord>('comments', receiptCommentKey(task.taskId, 'received')))?.progress).toMatchObject({ final: true });
  });

  it("start looks at no receipt of another node's repository; catchUp after a takeover does", async () => {
    const scope = movableScope(false);
    const { w, g, p, task } = await setup(scope);
    expect((await w.store.get<TaskRecord>('tasks', task.taskId))?.state).toBe('queued');
    await p.start();
    await p.drain();
    await ticks(5);
    expect(edits(g)).toBe(0);

    scope.owned = true;
    p.catchUp();
    // The edit reaches Gitea first; what it said is recorded once Gitea answered.
    const recorded = async () => (await w.store.get<CommentRecord>('comments', receiptCommentKey(task.taskId, 'received')))?.progress;
    await until(async () => edits(g) > 0 && (await recorded()) !== undefined);
    expect(edits(g)).toBeGreaterThan(0);
    expect(await recorded()).toMatchObject({ stage: 'queued' });
  });
});

describe('the final edit does not wait for the edit interval', () => {
  it('a task that ends within the interval after the last edit has its final receipt at once; progress edits still wait', async () => {
    const { w, g, p, task } = await setup(movableScope(true), 3_600_000);
    await p.start();
    // The elapsed time of a queued task is a progress edit: held by the hour-long interval since the receipt was posted.
    await ticks(20);
    expect(edits(g)).toBe(0);
    expect(g.comments(31)[0]!.body).toContain('is queued');

    // The task ends: the final edit goes out now, not an hour later.
    const cancel: TaskEvent = { type: 'CANCEL', by: 'admin:carol' };
    const ended = await w.runtime.send(taskActorId(task.taskId), cancel, { by: 'admin:carol' });
    expect(ended.ok, JSON.stringify(ended)).toBe(true);
    await w.runtime.settled();
    await until(() => edits(g) > 0);
    expect(edits(g)).toBe(1);
    const body = g.comments(31)[0]!.body;
    expect(body.split('\n')[0]).toContain('was stopped');
    expect(body).not.toContain('queued');
    // The edit is recorded once Gitea has it: a moment after the edit is visible there.
    const finalRecorded = async () => (await w.store.get<CommentRecord>('comments', receiptCommentKey(task.taskId, 'received')))?.progress?.final === true;
    await until(finalRecorded);
    expect(await finalRecorded()).toBe(true);
  });
});

describe('a receipt the outbox has not posted yet, on one node', () => {
  it('a post that lands while the receipt is being looked at (and let go) is not lost: its touch keeps it open', async () => {
    gitea = await startGitea([31]);
    world = await openWorld(gitea, { locale: 'en' });
    const w = world;
    const task = taskRecord(31, { state: 'received' });
    const key = receiptCommentKey(task.taskId, 'received');
    const created = await w.store.transact(async (tx) => {
      await tx.insert('tasks', task.taskId, task);
      const c = await w.runtime.createInTx(tx, TASK_KIND, taskActorId(task.taskId), { taskId: task.taskId }, { events: [{ type: 'ACCEPT' }] as EventObject[], taskId: task.taskId });
      await tx.insert('comments', key, pendingReceiptRecord(task, 'received'));
      return c;
    });
    created.start();
    await w.runtime.settled();
    // The worker's read of the receipt row is held after it read "pending", while the test posts it.
    let hold: Promise<void> | null = null;
    let heldRead!: () => void;
    const readHeld = new Promise<void>((r) => (heldRead = r));
    const store = new Proxy(w.store, {
      get(target, prop, receiver) {
        if (prop !== 'get') {
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        }
        return async (collection: string, k: string) => {
          const value = await target.get(collection as never, k);
          if (collection === 'comments' && k === key && hold) {
            heldRead();
            await hold;
          }
          return value;
        };
      },
    });
    let release!: () => void;
    hold = new Promise<void>((r) => (release = r));
    // One node (no scope): an unposted receipt is let go until the outbox's post touches it.
    progress = createReceiptProgress({ store, runtime: w.runtime, gitea: w.gitea, locale: 'en', intervalMs: 0, tickMs: 10 });
    const p = progress;
    await p.start();
    await readHeld;
    // The outbox posts the receipt meanwhile and touches it (its onSent).
    const posted = await w.gitea.createIssueComment(task.owner, task.repo, 31, `received\n\n${pendingReceiptRecord(task, 'received').marker}`);
    const row = (await w.store.get<CommentRecord>('comments', key))!;
    await w.store.transact((tx) => tx.put<CommentRecord>('comments', key, { ...row, status: 'sent', commentId: posted.id }));
    p.touch(task.taskId);
    hold = null;
    release();
    const g = gitea;
    await until(() => edits(g) > 0);
    expect(edits(g)).toBe(1);
    expect(gitea.comments(31)[0]!.body).toContain('**Stage:** queued');
  });
});
