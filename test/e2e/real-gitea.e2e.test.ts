// End to end against a REAL Gitea (1.26, built by scripts/install-gitea.mjs, started and seeded by
// test/support/real-gitea/): the real service process (`src/main.ts`), the real Codex app-server
// driven by the scripted model, real git over HTTP against Gitea. Users comment through Gitea's API;
// Gitea itself signs and delivers the webhooks, and its own delivery log says what the service
// answered. gitea-mcp is the real official binary too (scripts/install-gitea-mcp.mjs; no stand-in),
// talking to this real Gitea with the bot's token.
//
// Every Gitea endpoint the service calls is exercised here against the real server:
//   GET  /user                                         service start-up (bot login), doctor
//   POST /repos/{o}/{r}/issues/{n}/comments             receipts, REST fallback
//   GET  /repos/{o}/{r}/issues/{n}/comments?since=      reply verification, receipt idempotency
//   GET  /repos/{o}/{r}/collaborators/{u}/permission    doctor token-scope; intake for a payload without
//                                                      repository.permissions (case 9)
//   git  clone/fetch over HTTP, refs/pull/N/head        workspaces (issue, same-repo PR, fork PR)
// (GET /repos/{o}/{r}/issues/comments/{id} is in the client but unused by the service;
// test/integration/gitea-client-real.test.ts runs every client method against real Gitea.)
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/codex-harness.js';
import type { HookDelivery } from '../support/real-gitea/index.js';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';
import { SERVICE_BOT_PERMISSION } from '../support/real-gitea/seed.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { waitForTaskState } from '../support/wait-for-task.js';
import { taskIdFor } from '../../src/webhook/normalize-comment.js';

const execFileP = promisify(execFile);
const root = mkdtempSync(join(tmpdir(), 'ccweb-real-e2e-'));
let env: RealServiceEnvironment;
let service: ServiceProcess;
const TERMINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'cancelled', 'aborted', 'rejected'];
const firstIssue: { commentId?: number; delivery?: HookDelivery; taskId?: string } = {};

interface TaskDetail {
  task: { taskId: string; state: string; errorCode: string | null; mcpFailureReason?: string | null; sessionKey: string; deliveryKey: string; commentId?: number };
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

async function waitForTask(taskId: string, states: string[], timeoutMs = 60_000): Promise<TaskDetail> {
  return waitForTaskState((path) => api<TaskDetail>(path), taskId, states, timeoutMs);
}

const payloadCommentId = (d: HookDelivery): number | null => {
  try {
    return (JSON.parse(d.payload) as { comment?: { id?: number } }).comment?.id ?? null;
  } catch {
    return null;
  }
};

/** `login` comments through Gitea's API; resolves with the webhook delivery Gitea made for it and the service's answer. */
async function userComment(login: string, index: number, body: string): Promise<{ commentId: number; delivery: HookDelivery; answer: Record<string, unknown> }> {
  const c = await env.gitea.comment(login, index, body);
  const delivery = await env.gitea.waitForDelivery(env.hookId, (d) => payloadCommentId(d) === c.id, 30_000);
  return { commentId: c.id, delivery, answer: JSON.parse(delivery.responseBody || '{}') as Record<string, unknown> };
}

async function commentsOn(index: number): Promise<Array<{ id: number; user: string; body: string }>> {
  return (await env.gitea.comments(index)).map((c) => ({ id: c.id, user: c.user.login, body: c.body }));
}

/** Every link of §9.3's chain is present and points at what is on Gitea. */
async function expectCompleteChain(d: TaskDetail, index: number): Promise<void> {
  expect(d.delivery?.deliveryKey).toBe(d.task.deliveryKey);
  expect(d.session?.sessionKey).toBe(d.task.sessionKey);
  expect(d.session?.threadId).toMatch(/\S+/);
  expect(d.turns.length).toBeGreaterThan(0);
  for (const t of d.turns) expect(t.turnId, t.turnKey).toMatch(/\S+/);
  const reply = d.comments.find((c) => c.kind === 'mcp_final' || c.kind === 'rest_fallback');
  expect(reply?.status).toBe('confirmed');
  expect((await commentsOn(index)).map((c) => c.id)).toContain(reply!.commentId);
}

/** The bot's comments on the thread once there are at least `count` (at most 20 s). */
async function waitForBotComments(index: number, count: number): Promise<Array<{ id: number; user: string; body: string }>> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const bot = (await commentsOn(index)).filter((c) => c.user === 'ccweb-bot');
    if (bot.length >= count || Date.now() > deadline) return bot;
    await new Promise((res) => setTimeout(res, 250));
  }
}

async function restartService(): Promise<void> {
  service = await startServiceProcess(env.env);
  expect(service.url).toBe(env.serviceUrl); // the Gitea webhook keeps pointing at it
}

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  await restartService();
}, 600_000); // the first run on a machine builds Gitea (pretest normally has)

afterAll(async () => {
  await service?.stop().catch(() => undefined);
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('end to end against a real Gitea [real gitea-mcp]', () => {
  it('(1) an issue mention: Gitea delivers it, 202; receipt and answer on the issue, verified → succeeded', async () => {
    const r = await userComment('alice', env.gitea.issueNumber, '@ccweb-bot please fix the flaky login test');
    expect(r.delivery.status).toBe(202);
    expect(r.answer).toMatchObject({ state: 'queued', deliveryId: r.delivery.uuid });
    Object.assign(firstIssue, { commentId: r.commentId, delivery: r.delivery, taskId: String(r.answer.taskId) });
    const d = await waitForTask(String(r.answer.taskId), TERMINAL);
    expect(d.task.state).toBe('succeeded');
    expect(d.task.deliveryKey).toBe(`default:${r.delivery.uuid}`);
    const comments = await commentsOn(env.gitea.issueNumber);
    expect(comments.map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot']);
    expect(comments[1]!.body).toContain('已收到');
    expect(comments[2]!.body).toContain(`taskId=${d.task.taskId}`);
    await expectCompleteChain(d, env.gitea.issueNumber);
  });

  it('(2) a mention on a same-repository pull request: the agent works at the PR head', async () => {
    const r = await userComment('alice', env.gitea.prNumber, '@ccweb-bot which commit is checked out? Look at the head.');
    expect(r.delivery.requestHeaders['X-Gitea-Event-Type']).toBe('pull_request_comment');
    expect(r.delivery.status).toBe(202);
    const d = await waitForTask(String(r.answer.taskId), TERMINAL);
    expect(d.task.state).toBe('succeeded');
    const comments = await commentsOn(env.gitea.prNumber);
    expect(comments).toHaveLength(3);
    // The scripted model ran `git rev-parse HEAD` through Codex's shell tool in the workspace.
    expect(comments.at(-1)!.body).toContain(env.gitea.prHeadSha);
    await expectCompleteChain(d, env.gitea.prNumber);
  });

  it('(3) a mention on a pull request from a fork: the workspace is at the fork head (refs/pull/N/head)', async () => {
    const r = await userComment('alice', env.gitea.forkPrNumber, '@ccweb-bot review this; look at the head first');
    expect(r.delivery.status).toBe(202);
    const d = await waitForTask(String(r.answer.taskId), TERMINAL);
    expect(d.task.state).toBe('succeeded');
    const answer = (await commentsOn(env.gitea.forkPrNumber)).at(-1)!;
    expect(answer.user).toBe('ccweb-bot');
    expect(answer.body).toContain(env.gitea.forkPrHeadSha);
    await expectCompleteChain(d, env.gitea.forkPrNumber);
  });

  it('(4) an answer lost twice is posted by the REST fallback (POST comments as the bot, on the real Gitea)', async () => {
    const n = await env.gitea.createIssue('alice', 'Summarise the login module');
    const r = await userComment('alice', n, '@ccweb-bot summarise the login module (forget-always)');
    const d = await waitForTask(String(r.answer.taskId), TERMINAL);
    expect(d.task.state).toBe('succeeded_with_rest_fallback');
    expect(d.turns.map((t) => t.kind)).toEqual(['normal', 'reply_retry']);
    expect((await commentsOn(n)).map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot']);
    await expectCompleteChain(d, n);
  });

  it("(5) a read-only collaborator is refused: task rejected, and the thread gets one notice a day that only writers can ask, nothing of the task", async () => {
    const n = await env.gitea.createIssue('bob', 'A reader asks');
    const r = await userComment('bob', n, '@ccweb-bot please delete the tests');
    // Real Gitea signs the commenter's own permissions into the payload.
    expect((JSON.parse(r.delivery.payload) as { repository: { permissions: unknown } }).repository.permissions).toEqual({ admin: false, push: false, pull: true });
    expect(r.delivery.status).toBe(200);
    expect(r.answer).toMatchObject({ status: 'rejected' });
    const d = await waitForTask(String(r.answer.taskId), ['rejected']);
    expect(d.task.state).toBe('rejected');
    const notice = await waitForBotComments(n, 1);
    expect(notice).toHaveLength(1);
    expect(notice[0]!.body).toMatch(/^giteabot: @bob，只有对本仓库有写权限的人才能让机器人工作/);
    // Never the task's details in what the thread shows: not its id, not the request (the hidden marker
    // that makes the post idempotent is the only place the task's id appears).
    const shown = notice[0]!.body.replace(/<!--[\s\S]*?-->/g, '');
    expect(shown).not.toContain(d.task.taskId);
    expect(shown).not.toContain('delete the tests');
    expect(notice[0]!.body).toContain(`<!-- ccweb receipt=${d.task.taskId}:status:refused -->`);

    // The same day, the same thread: a second mention (and one after a restart) gets no second notice.
    const again = await userComment('bob', n, '@ccweb-bot delete the tests, please');
    expect(again.answer).toMatchObject({ status: 'rejected' });
    await service.kill9();
    await restartService();
    const third = await userComment('bob', n, '@ccweb-bot are you there?');
    expect(third.answer).toMatchObject({ status: 'rejected' });
    await new Promise((res) => setTimeout(res, 2_000));
    expect((await commentsOn(n)).filter((c) => c.user === 'ccweb-bot')).toHaveLength(1);

    // A signed payload naming a comment Gitea does not have: refused as unconfirmed, nothing posted.
    const m = await env.gitea.createIssue('bob', 'A forged mention');
    const forged = JSON.parse(r.delivery.payload) as { issue: Record<string, unknown>; comment: Record<string, unknown> };
    forged.issue = { ...forged.issue, number: m };
    forged.comment = { ...forged.comment, id: 987_654_321, body: '@ccweb-bot hello' };
    const body = JSON.stringify(forged);
    const res = await fetch(env.webhookUrl, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'X-Gitea-Event': 'issue_comment',
        'X-Gitea-Event-Type': 'issue_comment',
        'X-Gitea-Delivery': '00000000-0000-4000-8000-00000000a005',
        'X-Gitea-Signature': createHmac('sha256', env.webhookSecret).update(body).digest('hex'),
      },
      body,
    });
    expect(await res.json()).toMatchObject({ status: 'rejected', reason: 'comment_not_confirmed' });

    // An operator turns the notices off for the repository: a reader's mention on a new thread gets none.
    const switchNotices = async (enabled: boolean) => {
      const res = await fetch(`${service.url}/api/gitea-workflow/repos/${encodeURIComponent('default:acme/widget')}/reader-notices`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${env.adminToken}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ requestId: `reader-notices-${enabled}`, operator: 'ops', reason: 'e2e', enabled }),
      });
      expect(res.status).toBe(200);
    };
    await switchNotices(false);
    try {
      const k = await env.gitea.createIssue('bob', 'Quiet, please');
      expect((await userComment('bob', k, '@ccweb-bot anyone?')).answer).toMatchObject({ status: 'rejected' });
      await new Promise((res) => setTimeout(res, 2_000));
      expect((await commentsOn(k)).map((c) => c.user)).toEqual(['bob']);
      expect((await commentsOn(m)).map((c) => c.user)).toEqual([]);
    } finally {
      await switchNotices(true);
    }
  });

  it("(6) the bot's own comments come back as webhooks and are ignored, even one that mentions the bot", async () => {
    // Every receipt and answer above fired a webhook whose sender is the bot.
    const all = await env.gitea.deliveries(env.hookId);
    const own = all.filter((d) => (JSON.parse(d.payload) as { sender: { login: string } }).sender.login === 'ccweb-bot');
    expect(own.length).toBeGreaterThanOrEqual(8);
    // A new comment of the bot's is ignored as its own; an edit (the receipt's progress) as an edit.
    const action = (d: { payload: string }) => (JSON.parse(d.payload) as { action: string }).action;
    expect(own.filter((d) => action(d) === 'created').length).toBeGreaterThanOrEqual(8);
    for (const d of own) {
      expect(d.status, d.uuid).toBe(200);
      expect(JSON.parse(d.responseBody), d.uuid).toEqual({ status: 'ignored', reason: action(d) === 'edited' ? 'edited_comment' : 'bot_self_comment' });
    }
    const before = await api<{ total: number }>('/tasks?pageSize=1');
    const n = await env.gitea.createIssue('alice', 'The bot talks to itself');
    const self = await userComment('ccweb-bot', n, '@ccweb-bot please fix the flaky login test');
    expect(self.delivery.status).toBe(200);
    expect(self.answer).toEqual({ status: 'ignored', reason: 'bot_self_comment' });
    await new Promise((res) => setTimeout(res, 1_000));
    expect((await api<{ total: number }>('/tasks?pageSize=1')).total).toBe(before.total);
    expect((await commentsOn(n)).map((c) => c.user)).toEqual(['ccweb-bot']);
  });

  it('(7) "@ccweb-bot stop" from a writer aborts a running task; the failure receipt says who stopped it', async () => {
    const n = await env.gitea.createIssue('alice', 'Run everything');
    const r = await userComment('alice', n, '@ccweb-bot run the whole test suite (slow)');
    const taskId = String(r.answer.taskId);
    await waitForTask(taskId, ['running']);
    const stop = await userComment('alice', n, '@ccweb-bot stop');
    expect(stop.answer).toMatchObject({ status: 'stop' });
    const d = await waitForTask(taskId, ['aborted', 'failed']);
    expect(d.task.state).toBe('aborted');
    const deadline = Date.now() + 15_000; // the failure receipt goes out after the transition
    let bot: Array<{ body: string }> = [];
    while (Date.now() < deadline) {
      bot = (await commentsOn(n)).filter((c) => c.user === 'ccweb-bot');
      if (bot.length >= 2) break;
      await new Promise((res) => setTimeout(res, 250));
    }
    expect(bot).toHaveLength(2);
    expect(bot[1]!.body).toMatch(/alice/);
  });

  it('(8) kill -9 while a turn runs: restart → retry → succeeded, one receipt, one answer', async () => {
    const n = await env.gitea.createIssue('alice', 'Refactor login');
    const r = await userComment('alice', n, '@ccweb-bot refactor the login module (slow-once)');
    const taskId = String(r.answer.taskId);
    await waitForTask(taskId, ['running']);
    const deadline = Date.now() + 30_000; // the turn is in flight once Codex asked the model
    while (!env.model.responsesBodies().some((b) => JSON.stringify(b).includes(`taskId=${taskId}`)) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
    }
    await service.kill9();
    await restartService();
    const d = await waitForTask(taskId, TERMINAL, 120_000);
    expect(d.task.state).toBe('succeeded');
    expect(JSON.stringify(d.audit)).toContain('interrupted_by_restart');
    const comments = await commentsOn(n);
    expect(comments.filter((c) => c.body.includes('已收到'))).toHaveLength(1);
    expect(comments.filter((c) => c.user === 'ccweb-bot' && c.body.includes(`taskId=${taskId}`))).toHaveLength(1);
    expect(comments).toHaveLength(3);
    await expectCompleteChain(d, n);
  });

  it('(8b) kill -9 after the agent posted but before its turn ended: the answer is verified, not produced twice', async () => {
    const n = await env.gitea.createIssue('alice', 'Explain login');
    const r = await userComment('alice', n, '@ccweb-bot explain the login flow (post-then-stall)');
    const taskId = String(r.answer.taskId);
    const deadline = Date.now() + 30_000;
    while (!(await commentsOn(n)).some((c) => c.user === 'ccweb-bot' && c.body.includes(`taskId=${taskId}`)) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
    }
    await service.kill9();
    await restartService();
    const d = await waitForTask(taskId, TERMINAL, 120_000);
    expect(d.task.state).toBe('succeeded');
    expect(d.turns).toHaveLength(1); // no second turn: the first one's answer was found and verified
    const comments = await commentsOn(n);
    expect(comments.filter((c) => c.user === 'ccweb-bot' && c.body.includes(`taskId=${taskId}`))).toHaveLength(1);
    expect(comments).toHaveLength(3);
  });

  it('(8c) a follow-up after waiting_user re-queues the task and resumes the same thread', async () => {
    const n = await env.gitea.createIssue('alice', 'Stabilise login');
    const r = await userComment('alice', n, '@ccweb-bot I have a question: can you make the login test stable?');
    const taskId = String(r.answer.taskId);
    const waiting = await waitForTask(taskId, ['waiting_user', ...TERMINAL]);
    expect(waiting.task.state).toBe('waiting_user');
    expect((await commentsOn(n)).map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot']);
    const follow = await userComment('alice', n, '@ccweb-bot it fails in Firefox only');
    expect(follow.answer.taskId).toBe(taskId);
    const d = await waitForTask(taskId, TERMINAL);
    expect(d.task.state).toBe('succeeded');
    expect(d.session?.threadId).toBe(waiting.session?.threadId);
    expect(d.turns).toHaveLength(2);
    expect((await commentsOn(n)).map((c) => c.user)).toEqual(['alice', 'ccweb-bot', 'ccweb-bot', 'alice', 'ccweb-bot']);
    await expectCompleteChain(d, n);
  });

  it("(9) Gitea's Replay of the first delivery (web UI, new UUID, same bytes) creates nothing new", async () => {
    const before = await api<{ total: number }>('/tasks?pageSize=1');
    const commentsBefore = (await commentsOn(env.gitea.issueNumber)).length;
    const original = firstIssue.delivery!;
    await env.gitea.replay(env.hookId, original.uuid);
    const replayed = await env.gitea.waitForDelivery(env.hookId, (d) => d.uuid !== original.uuid && payloadCommentId(d) === firstIssue.commentId);
    expect(replayed.payload).toBe(original.payload);
    expect(replayed.requestHeaders['X-Gitea-Signature']).toBe(original.requestHeaders['X-Gitea-Signature']);
    expect(replayed.status).toBe(200);
    expect(JSON.parse(replayed.responseBody)).toMatchObject({ status: 'duplicate', taskId: firstIssue.taskId });
    await new Promise((r) => setTimeout(r, 500));
    expect((await api<{ total: number }>('/tasks?pageSize=1')).total).toBe(before.total);
    expect(await commentsOn(env.gitea.issueNumber)).toHaveLength(commentsBefore);
  });

  it('(10) a payload without repository.permissions: the service asks Gitea; with a write-only bot the mention waits (403 is no answer), and runs once the bot is a repo admin', async () => {
    // Real Gitea always signs the permissions in; this resends its real delivery of the owner's comments
    // with them removed (re-signed) to drive the collaborator-permission lookup against the real endpoint.
    // The comments are real (each is read back from Gitea); their own deliveries are sent
    // nowhere while they are made, so only the resent ones reach the service.
    const n = await env.gitea.createIssue('alice', 'Permission lookup');
    const c = await env.gitea.comment('alice', n, '@ccweb-bot look this up');
    const real = await env.gitea.waitForDelivery(env.hookId, (d) => payloadCommentId(d) === c.id);
    expect(real.status).toBe(202);
    await waitForTask(String(JSON.parse(real.responseBody).taskId), TERMINAL);
    await env.gitea.setWebhookUrl(env.hookId, 'http://127.0.0.1:9/nowhere');
    // As the repository's owner: alice's answer is cached for 30 s since her real delivery.
    const byOwner = [await env.gitea.comment('acme', n, '@ccweb-bot look this up'), await env.gitea.comment('acme', n, '@ccweb-bot look this up too')];
    // Gitea reads the hook's URL when it delivers, so wait until it has tried (and failed) before the
    // URL is restored: otherwise a late real delivery of these comments would reach the service.
    for (const x of byOwner) expect((await env.gitea.waitForDelivery(env.hookId, (d) => payloadCommentId(d) === x.id)).succeeded).toBe(false);
    await env.gitea.setWebhookUrl(env.hookId, env.webhookUrl);
    const resend = async (x: (typeof byOwner)[number], deliveryId: string) => {
      const payload = JSON.parse(real.payload) as { repository: Record<string, unknown>; comment: Record<string, unknown>; sender: Record<string, unknown> };
      delete payload.repository.permissions;
      payload.comment = { ...payload.comment, id: x.id, body: x.body, html_url: x.html_url, created_at: x.created_at, updated_at: x.updated_at, user: x.user };
      payload.sender = x.user;
      const body = JSON.stringify(payload, null, 2);
      const res = await fetch(env.webhookUrl, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'X-Gitea-Event': 'issue_comment',
          'X-Gitea-Event-Type': 'issue_comment',
          'X-Gitea-Delivery': deliveryId,
          'X-Gitea-Signature': createHmac('sha256', env.webhookSecret).update(body).digest('hex'),
        },
        body,
      });
      return { status: res.status, body: (await res.json()) as { status?: string; reason?: string; taskId: string | null; state?: string } };
    };
    // Gitea answers this lookup about another user only to a repository or site admin: a write-only bot
    // gets 403. Not a "yes" (nothing runs) and not a "no": the mention waits.
    await env.gitea.api('acme', 'PUT', `/repos/acme/widget/collaborators/ccweb-bot`, { permission: 'write' }, 204);
    const waitingDelivery = '00000000-0000-4000-8000-00000000a010';
    try {
      const waiting = await resend(byOwner[0]!, waitingDelivery);
      expect(waiting).toMatchObject({ status: 202, body: { taskId: null, state: 'pending_confirmation' } });
      const pending = await api<{ items: Array<{ deliveryId: string; lastError: string }> }>('/pending-intake');
      expect(pending.items).toEqual([expect.objectContaining({ deliveryId: waitingDelivery, lastError: expect.stringContaining('403') })]);
    } finally {
      await env.gitea.api('acme', 'PUT', `/repos/acme/widget/collaborators/ccweb-bot`, { permission: 'admin' }, 204);
    }
    // Asked again 5 s later: now decided, and run — late, not never.
    const late = await waitForTask(taskIdFor(`default:${waitingDelivery}`), TERMINAL);
    expect(late.task.state).toBe('succeeded');
    expect((await api<{ total: number }>('/pending-intake')).total).toBe(0);
    const allowed = await resend(byOwner[1]!, '00000000-0000-4000-8000-00000000a011');
    expect(allowed.status).toBe(202); // only an answer of write/admin/owner lets it through
    const d = await waitForTask(allowed.body.taskId!, TERMINAL);
    expect(d.task.state).toBe('succeeded');
  });

  it('(10b) a form-encoded webhook (payload=…) and a JSON one for the same comment: one task, the other a duplicate', async () => {
    const formHook = await env.gitea.addWebhook(env.webhookUrl, env.webhookSecret, { contentType: 'form' });
    try {
      const n = await env.gitea.createIssue('alice', 'Both hooks');
      const c = await env.gitea.comment('alice', n, '@ccweb-bot please fix the flaky login test');
      const json = await env.gitea.waitForDelivery(env.hookId, (d) => payloadCommentId(d) === c.id);
      const form = await env.gitea.waitForDelivery(formHook, (d) => payloadCommentId(d) === c.id);
      expect(form.requestHeaders['Content-Type']).toBe('application/x-www-form-urlencoded');
      const answers = [json, form].map((d) => ({ status: d.status, body: JSON.parse(d.responseBody) as { taskId: string; status?: string } }));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 202]);
      const [first, second] = answers[0]!.status === 202 ? answers : [answers[1]!, answers[0]!];
      expect(second!.body).toEqual({ status: 'duplicate', taskId: first!.body.taskId });
      expect((await waitForTask(first!.body.taskId, TERMINAL)).task.state).toBe('succeeded');
    } finally {
      await env.gitea.api('acme', 'DELETE', `/repos/acme/widget/hooks/${formHook}`, undefined, 204);
    }
  });

  it('(11) `ccweb-gitea doctor --repo acme/widget` passes against it', async () => {
    const { stdout } = await execFileP(process.execPath, [join(repoRoot, 'bin', 'ccweb-gitea.js'), 'doctor', '--repo', 'acme/widget'], {
      cwd: repoRoot,
      // Its own data directory and a free port: the service of these tests still runs on env.env's.
      env: { ...process.env, ...env.env, CCWEB_DATA_DIR: join(root, 'doctor-data'), CCWEB_PORT: '0' },
      timeout: 120_000,
    }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`doctor failed: ${error.message}\n${error.stdout ?? ''}\n${error.stderr ?? ''}`);
    });
    const line = (check: string) => stdout.split('\n').find((l) => l.split(/\s+/)[1] === check) ?? `(no ${check} line)\n${stdout}`;
    expect(line('gitea')).toMatch(new RegExp(`^ok\\s+gitea\\s+${env.gitea.url.replace(/[.]/g, '\\.')} reachable; token valid for ccweb-bot`));
    expect(line('token-scope')).toMatch(new RegExp(`^ok\\s+token-scope\\s+ccweb-bot has ${SERVICE_BOT_PERMISSION} permission on acme/widget`));
    expect(line('gitea-mcp')).toMatch(/^ok\s/);
    expect(line('codex')).toMatch(/^ok\s/);
    expect(stdout).not.toContain(env.gitea.users.bot.token);
  });
});
