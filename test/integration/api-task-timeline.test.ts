// GET /tasks and GET /tasks/:id over real HTTP with a real store and runtime: a task's error (a
// rejected task's reason lives on its delivery), and a timeline that holds only the task's own
// events although the resource's session actor is shared by every task of that issue.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../src/domain/records.js';
import { newSessionRecord, sessionActorId, sessionKind } from '../../src/sessions/session-actor.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import { createQueuedTask, createRejectedTask, driveTask, insertRepository, startApiHarness, type ApiHarness } from '../support/api-harness.js';

const RESOURCE = 'default:acme/widget:issue:7';
const SESSION = sessionActorId(RESOURCE);
let h: ApiHarness;

async function send(actorId: string, event: { type: string; [k: string]: unknown }): Promise<void> {
  const r = await h.runtime.send(actorId, event as never);
  if (!r.ok) throw new Error(`${event.type} rejected in ${r.state}`);
}

const onIssue7 = { resource: { kind: 'issue' as const, number: 7 }, resourceKey: RESOURCE, sessionKey: RESOURCE };

beforeAll(async () => {
  h = await startApiHarness([taskKind(), sessionKind()]);
  await insertRepository(h.store, 'default:acme/widget');
  // First task: runs a turn on a new thread, then waits for the user.
  const first = await createQueuedTask(h.store, h.runtime, { taskId: 'first', ...onIssue7 });
  await driveTask(h.runtime, 'first', 'running');
  const created = await h.store.transact(async (tx) => {
    await tx.insert('sessions', RESOURCE, newSessionRecord(first as TaskRecord, 'gitea-main', new Date().toISOString()));
    return h.runtime.createInTx(tx, 'session', SESSION, { sessionKey: RESOURCE }, { by: 'system:session_manager' });
  });
  created.start();
  await send(SESSION, { type: 'START_THREAD' });
  await send(SESSION, { type: 'THREAD_STARTED', threadId: 'thread-7' });
  await send(SESSION, { type: 'TURN_STARTED', turnId: 'turn-a', taskId: 'first' });
  await send(SESSION, { type: 'TURN_WAITING_USER', turnId: 'turn-a' });
  await send(taskActorId('first'), { type: 'TURN_WAITING_USER' });
  await send(taskActorId('first'), { type: 'REPLY_CONFIRMED' }); // the question is on Gitea
  // Someone without write access mentions the bot on the same issue.
  await createRejectedTask(h.store, h.runtime, { taskId: 'rejected', ...onIssue7 });
  // A second task on the same issue runs its own turn on the same thread.
  await createQueuedTask(h.store, h.runtime, { taskId: 'second', ...onIssue7 });
  await driveTask(h.runtime, 'second', 'running');
  await send(SESSION, { type: 'TURN_STARTED', turnId: 'turn-b', taskId: 'second' });
  await send(SESSION, { type: 'TURN_COMPLETED', turnId: 'turn-b' });
  await send(taskActorId('second'), { type: 'TURN_REPLIED' });
  // And one that failed before it ran.
  await createQueuedTask(h.store, h.runtime, { taskId: 'failed' });
  await send(taskActorId('failed'), { type: 'CLAIM', leaseId: 'lease-failed' });
  await send(taskActorId('failed'), { type: 'FAIL', errorCode: 'mcp_command_missing' });
}, 30_000);

afterAll(async () => {
  await h?.close();
});

const sessionEvents = (audit: Array<{ actorId?: string; metadata?: { event?: { type: string } } }>) =>
  audit.filter((e) => e.actorId === SESSION).map((e) => e.metadata?.event?.type ?? 'created');

describe('task list and detail', () => {
  it("each task carries `error`: its errorCode, or for a rejected task its delivery's reason", async () => {
    const list = await h.call('GET', '/api/gitea-workflow/tasks?pageSize=50');
    const error = Object.fromEntries((list.body.items as Array<{ taskId: string; error: string | null }>).map((t) => [t.taskId, t.error]));
    expect(error).toEqual({ first: null, rejected: 'actor_not_authorized', second: null, failed: 'mcp_command_missing' });
    expect((await h.call('GET', '/api/gitea-workflow/tasks/rejected')).body.error).toBe('actor_not_authorized');
    expect((await h.call('GET', '/api/gitea-workflow/tasks/failed')).body.error).toBe('mcp_command_missing');
  });

  it("a rejected task's timeline has none of the shared session's events", async () => {
    const d = (await h.call('GET', '/api/gitea-workflow/tasks/rejected')).body;
    expect(d.audit.map((e: { action: string }) => e.action)).toEqual(['webhook.rejected', 'task.transition', 'task.transition']);
    expect(sessionEvents(d.audit)).toEqual([]);
  });

  it('each task that ran keeps the session events of its own run, and only those', async () => {
    const first = (await h.call('GET', '/api/gitea-workflow/tasks/first')).body;
    expect(sessionEvents(first.audit)).toEqual(['created', 'START_THREAD', 'THREAD_STARTED', 'TURN_STARTED', 'TURN_WAITING_USER']);
    const second = (await h.call('GET', '/api/gitea-workflow/tasks/second')).body;
    expect(sessionEvents(second.audit)).toEqual(['TURN_STARTED', 'TURN_COMPLETED']);
    for (const d of [first, second]) {
      expect(d.audit.filter((e: { taskId?: string | null }) => e.taskId && e.taskId !== d.task.taskId)).toEqual([]);
    }
  });
});
