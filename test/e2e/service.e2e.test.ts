// End to end: the real service process (`src/main.ts`), the real Codex app-server driven by the
// scripted model, the sandbox Gitea (REST + git + webhooks as Gitea sends them), real git. Each case
// ends by counting the comments on the sandbox and checking the audit chain
// deliveryKey → taskId → sessionKey/threadId → turnId → commentId (spec §9.3).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxEnvironment, type SandboxEnvironment } from '../support/sandbox/sandbox-environment.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-e2e-'));
let env: SandboxEnvironment;
let service: ServiceProcess;
const firstDelivery: { id?: string } = {};

interface TaskDetail {
  task: { taskId: string; state: string; errorCode: string | null; mcpFailureReason?: string | null; sessionKey: string; deliveryKey: string };
  delivery: { deliveryKey: string } | null;
  session: { sessionKey: string; threadId: string | null } | null;
  turns: Array<{ turnKey: string; turnId: string | null; kind: string; status: string }>;
  comments: Array<{ commentKey: string; kind: string; commentId: number | null; status: string }>;
  audit: Array<{ action: string; fromState: string | null; toState: string | null; errorCode?: string | null; actor: string }>;
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${service.url}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return (await res.json()) as T;
}

async function waitForTask(taskId: string, states: string[], timeoutMs = 40_000): Promise<TaskDetail> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const d = await api<TaskDetail>(`/tasks/${taskId}`);
      last = d.task.state;
      if (states.includes(d.task.state)) return d;
    } catch {
      // the service may be restarting
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`task ${taskId} did not reach ${states.join('|')} (last ${last})`);
}

async function userComment(login: string, index: number, body: string): Promise<{ status: number | null; body: Record<string, unknown>; deliveryId: string }> {
  const { delivery } = await env.gitea.comment(login, index, body);
  return { status: delivery.status, body: JSON.parse(delivery.responseBody || '{}'), deliveryId: delivery.deliveryId };
}

function commentsOn(index: number): Array<{ id: number; user: string; body: string }> {
  return env.gitea.comments(index).map((c) => ({ id: Number(c.id), user: (c.user as { login: string }).login, body: String(c.body) }));
}

/** Every link of §9.3's chain is present and points at what is on Gitea. */
function expectCompleteChain(d: TaskDetail, index: number): void {
  expect(d.delivery?.deliveryKey).toBe(d.task.deliveryKey);
  expect(d.session?.sessionKey).toBe(d.task.sessionKey);
  expect(d.session?.threadId).toMatch(/\S+/);
  expect(d.turns.length).toBeGreaterThan(0);
  for (const t of d.turns) expect(t.turnId, t.turnKey).toMatch(/\S+/);
  const reply = d.comments.find((c) => c.kind === 'mcp_final' || c.kind === 'rest_fallback');
  expect(reply?.status).toBe('confirmed');
  expect(commentsOn(index).map((c) => c.id)).toContain(reply!.commentId);
}

beforeAll(async () => {
  env = await startSandboxEnvironment(root);
  for (const n of [3, 4, 5, 6, 7, 8]) env.gitea.double.addIssue('acme', 'widget', { number: n, title: `issue ${n}`, user: 'alice' });
  service = await startServiceProcess(env.env);
  env.gitea.connectWebhook(`${service.url}/api/gitea/webhook`, env.webhookSecret);
}, 90_000);

afterAll(async () => {
  await service?.stop().catch(() => undefined);
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('end to end against the sandbox Gitea', () => {
  it('(1) an issue comment gets a receipt, an answer through gitea-mcp, verified → succeeded', async () => {
    const r = await userComment('alice', 3, '@ccweb-bot please fix the flaky login test');
    expect(r.status).toBe(202);
    firstDelivery.id = r.deliveryId;
    const d = await waitForTask(String(r.body.taskId), ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback']);
    expect(d.task.state).toBe('succeeded');
    const comments = commentsOn(3);
    expect(comments.map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot']);
    expect(comments[1]!.body).toContain('已收到');
    expect(comments[2]!.body).toContain(`taskId=${d.task.taskId}`);
    expectCompleteChain(d, 3);
  });

  it('(2) on a pull request the agent works at the PR head', async () => {
    const r = await userComment('alice', 2, '@ccweb-bot which commit is checked out? Look at the head.');
    expect(r.status).toBe(202);
    const d = await waitForTask(String(r.body.taskId), ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback']);
    expect(d.task.state).toBe('succeeded');
    const answer = commentsOn(2).filter((c) => c.user === 'ccweb-bot').at(-1)!;
    // The scripted model ran `git rev-parse HEAD` through Codex's shell tool in the workspace.
    expect(answer.body).toContain(env.gitea.prHeadSha);
    expect(commentsOn(2)).toHaveLength(3);
    expectCompleteChain(d, 2);
  });

  it('(3) a reply lost twice (MCP, then the reply-retry turn) is posted by the REST fallback', async () => {
    const r = await userComment('alice', 4, '@ccweb-bot summarise the login module (forget-always)');
    const d = await waitForTask(String(r.body.taskId), ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback']);
    expect(d.task.state).toBe('succeeded_with_rest_fallback');
    expect(d.task.mcpFailureReason).toBe('mcp_reply_missing');
    expect(d.turns.map((t) => t.kind)).toEqual(['normal', 'reply_retry']);
    const comments = commentsOn(4);
    expect(comments.map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot']);
    expect(d.comments.find((c) => c.kind === 'rest_fallback')?.status).toBe('confirmed');
    expectCompleteChain(d, 4);
  });

  it('(4) a follow-up after waiting_user re-queues the task and resumes the same thread', async () => {
    const r = await userComment('alice', 7, '@ccweb-bot I have a question: can you make the login test stable?');
    const taskId = String(r.body.taskId);
    const waiting = await waitForTask(taskId, ['waiting_user', 'succeeded', 'failed']);
    expect(waiting.task.state).toBe('waiting_user');
    const threadId = waiting.session?.threadId;
    expect(commentsOn(7).map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot']);
    const follow = await userComment('alice', 7, '@ccweb-bot it fails in Firefox only');
    expect(follow.body.taskId).toBe(taskId);
    const d = await waitForTask(taskId, ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback']);
    expect(d.task.state).toBe('succeeded');
    expect(d.session?.threadId).toBe(threadId);
    expect(d.turns).toHaveLength(2);
    // One receipt for the task, the question, the follow-up, the answer.
    expect(commentsOn(7).map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot', 'alice', 'ccweb-bot']);
    expect(commentsOn(7).filter((c) => c.body.includes('已收到'))).toHaveLength(1);
    expectCompleteChain(d, 7);
  });

  it('(5) "@ccweb-bot stop" from a writer aborts a running task, and the receipt says who stopped it', async () => {
    const r = await userComment('alice', 5, '@ccweb-bot run the whole test suite (slow)');
    const taskId = String(r.body.taskId);
    await waitForTask(taskId, ['running']);
    const stop = await userComment('alice', 5, '@ccweb-bot stop');
    expect(stop.body).toMatchObject({ status: 'stop' });
    const d = await waitForTask(taskId, ['aborted', 'failed']);
    expect(d.task.state).toBe('aborted');
    await new Promise((r2) => setTimeout(r2, 1_000)); // the failure receipt goes out after the transition
    const bot = commentsOn(5).filter((c) => c.user === 'ccweb-bot');
    expect(bot).toHaveLength(2);
    expect(bot[1]!.body).toMatch(/alice/);
  });

  it('(6) kill -9 while a turn runs: restart → retry_wait (interrupted_by_restart) → succeeded, one receipt, one answer', async () => {
    const r = await userComment('alice', 6, '@ccweb-bot refactor the login module (slow-once)');
    const taskId = String(r.body.taskId);
    await waitForTask(taskId, ['running']);
    // The turn is in flight once Codex asked the model (which stalls this first attempt).
    const deadline = Date.now() + 30_000;
    while (!env.model.responsesBodies().some((b) => JSON.stringify(b).includes(`taskId=${taskId}`)) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
    }
    await service.kill9();
    service = await startServiceProcess(env.env);
    env.gitea.connectWebhook(`${service.url}/api/gitea/webhook`, env.webhookSecret);
    const d = await waitForTask(taskId, ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback'], 90_000);
    expect(d.task.state).toBe('succeeded');
    expect(d.audit.some((e) => e.toState === 'retry_wait' && e.errorCode === 'interrupted_by_restart') || JSON.stringify(d.audit).includes('interrupted_by_restart')).toBe(true);
    const comments = commentsOn(6);
    expect(comments.filter((c) => c.body.includes('已收到'))).toHaveLength(1);
    expect(comments.filter((c) => c.user === 'ccweb-bot' && c.body.includes(`taskId=${taskId}`))).toHaveLength(1);
    expect(comments).toHaveLength(3);
    expectCompleteChain(d, 6);
  });

  it('(6b) kill -9 after the agent posted but before its turn ended: the answer is verified, not produced twice', async () => {
    const r = await userComment('alice', 8, '@ccweb-bot explain the login flow (post-then-stall)');
    const taskId = String(r.body.taskId);
    const deadline = Date.now() + 30_000;
    while (!commentsOn(8).some((c) => c.user === 'ccweb-bot' && c.body.includes(`taskId=${taskId}`)) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
    }
    await service.kill9();
    service = await startServiceProcess(env.env);
    env.gitea.connectWebhook(`${service.url}/api/gitea/webhook`, env.webhookSecret);
    const d = await waitForTask(taskId, ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback'], 90_000);
    expect(d.task.state).toBe('succeeded');
    expect(d.turns).toHaveLength(1); // no second turn: the first one's answer was found and verified
    const comments = commentsOn(8);
    expect(comments.filter((c) => c.user === 'ccweb-bot' && c.body.includes(`taskId=${taskId}`))).toHaveLength(1);
    expect(comments).toHaveLength(3);
  });

  it('(7) a Gitea Replay of an old delivery creates nothing new', async () => {
    const before = await api<{ total: number }>('/tasks?pageSize=1');
    const commentsBefore = commentsOn(3).length;
    const replay = await env.gitea.replay(firstDelivery.id!);
    expect(replay.status).toBe(200);
    expect(JSON.parse(replay.responseBody)).toMatchObject({ status: 'duplicate' });
    await new Promise((r) => setTimeout(r, 500));
    const after = await api<{ total: number }>('/tasks?pageSize=1');
    expect(after.total).toBe(before.total);
    expect(commentsOn(3)).toHaveLength(commentsBefore);
  });
});
