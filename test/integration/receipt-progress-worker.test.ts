// The receipt as the task's tracking comment, its worker with several nodes:
// against the Gitea REST double over 127.0.0.1, with the real store, runtime, task actors and
// receipt outbox, a node edits a receipt only while it owns the task's repository, asked at each visit;
// while the task holds its repository's lease, only under the lease of the worker that runs it.
import { afterEach, describe, expect, it } from 'vitest';
import type { EventObject } from 'xstate';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import type { CommentRecord, TaskRecord } from '../../src/domain/records.js';
import { createReceiptProgress, type ReceiptProgress, type ReceiptProgressOptions } from '../../src/receipts/receipt-progress-worker.js';
import { leaseFence } from '../../src/leases/lease-fence.js';
import { grantTestLeaseIn } from '../support/test-lease.js';
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
async function setup(scope: ReturnType<typeof movableScope>, intervalMs = 0, extra: Partial<ReceiptProgressOptions> = {}) {
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
  progress = createReceiptProgress({ store: w.store, runtime: w.runtime, gitea: w.gitea, locale: 'en', intervalMs, tickMs: 10, scope, ...extra });
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

describe('progress edits under the lease of the worker that runs the task', () => {
  const TTL_MS = 200;
  it.each([
    ['its lease holds: edited', 'held', 1],
    ['another worker took the lease over: no edit, nothing recorded', 'taken', 0],
    ['the lease expired on the database clock (nobody took it yet): no edit, nothing recorded', 'expired', 0],
    ["this node runs no worker of the task (another node's does): no edit", 'elsewhere', 0],
  ] as const)('a task that holds its lease (preparing), %s', async (_name, how, expected) => {
    const lease1 = { repoKey: 'default:acme/widgets', leaseId: 'lease-1', owner: 'node-a', taskId: 'task-31' };
    const fence = leaseFence(lease1);
    const { w, g, p, task } = await setup(movableScope(true), 0, { fenceOf: (taskId) => (how !== 'elsewhere' && taskId === 'task-31' ? fence : undefined) });
    await grantTestLeaseIn(w.store, { ...lease1, ttlMs: how === 'held' || how === 'elsewhere' ? 60_000 : TTL_MS });
    const claim: TaskEvent = { type: 'CLAIM', leaseId: lease1.leaseId };
    expect((await w.runtime.send(taskActorId(task.taskId), claim)).ok).toBe(true);
    await w.runtime.settled();
    if (how === 'taken' || how === 'expired') await new Promise((r) => setTimeout(r, TTL_MS + 100));
    if (how === 'taken') await grantTestLeaseIn(w.store, { ...lease1, leaseId: 'lease-2', owner: 'node-b' });

    await p.start();
    await ticks(20);
    const recorded = async () => (await w.store.get<CommentRecord>('comments', receiptCommentKey(task.taskId, 'received')))?.progress;
    if (expected > 0) await until(async () => (await recorded()) !== undefined);
    expect(edits(g)).toBe(expected);
    if (expected > 0) expect(await recorded()).toMatchObject({ stage: 'preparing' });
    else expect(await recorded()).toBeUndefined();
    expect(g.comments(31)[0]!.body).toContain(expected > 0 ? '**Stage:** preparing' : 'is queued');

    // Once the task ended no lease is involved: the final edit is made whatever became of it.
    const fail: TaskEvent = { type: 'FAIL', errorCode: 'executor_error' };
    expect((await w.runtime.send(taskActorId(task.taskId), fail)).ok).toBe(true);
    await w.runtime.settled();
    await until(async () => (await recorded())?.final === true);
    expect(await recorded()).toMatchObject({ final: true });
    expect(edits(g)).toBe(expected + 1);
  });

  it('the lease lost while Gitea takes the edit: the edit is not recorded (the record passes the fence), the receipt stays open', async () => {
    const lease1 = { repoKey: 'default:acme/widgets', leaseId: 'lease-1', owner: 'node-a', taskId: 'task-31' };
    const logs: string[] = [];
    let real: World['gitea'] | null = null;
    let store: World['store'] | null = null;
    const { w, g, p, task } = await setup(movableScope(true), 0, {
      fenceOf: () => leaseFence(lease1),
      logger: (msg) => void logs.push(msg),
      // The edit reaches Gitea; meanwhile the lease runs out and another worker takes it.
      gitea: {
        async editIssueComment(...args: Parameters<World['gitea']['editIssueComment']>) {
          await new Promise((r) => setTimeout(r, TTL_MS + 100));
          await grantTestLeaseIn(store!, { ...lease1, leaseId: 'lease-2', owner: 'node-b' });
          return real!.editIssueComment(...args);
        },
      },
    });
    real = w.gitea;
    store = w.store;
    await grantTestLeaseIn(w.store, { ...lease1, ttlMs: TTL_MS });
    expect((await w.runtime.send(taskActorId(task.taskId), { type: 'CLAIM', leaseId: lease1.leaseId } as TaskEvent)).ok).toBe(true);
    await w.runtime.settled();

    await p.start();
    await until(() => logs.includes('receipt progress edit not recorded: the lease is gone'));
    expect(edits(g)).toBe(1);
    expect((await w.store.get<CommentRecord>('comments', receiptCommentKey(task.taskId, 'received')))?.progress).toBeUndefined();
    expect((await w.store.audit({ taskId: task.taskId })).map((e) => e.action)).not.toContain('receipt.progress_edited');
  });
});
