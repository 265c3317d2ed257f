// `@ccweb-bot stop` while work is in flight, end to end: the real service
// process, a REAL Gitea 1.26, the real Codex app-server with the scripted agent, the real gitea-mcp.
// A stop during `preparing` (the clone) and during `publishing` (the push) must stop the task, publish
// nothing afterwards, and answer on the thread; a stop with nothing to stop, and a mention in a
// disabled repository, must be answered too (once), not met with silence.
//
// Fault injection (the only double): the git wrapper of the publish environment holds one git verb
// before the real git runs (`holdGit`), so the stop lands while the service waits on it.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-stop-'));
let env: PublishEnvironment;

interface TaskDetail {
  task: { taskId: string; state: string; errorCode: string | null; stoppedBy: string | null };
  audit: Array<{ action: string; toState: string | null }>;
}

const FINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'cancelled', 'aborted', 'rejected', 'ignored'];

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${env.service!.url}/api/gitea-workflow${path}`, {
    method,
    headers: { Authorization: `Bearer ${env.adminToken}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

const waitForTask = (taskId: string, states = FINAL, timeoutMs = 90_000): Promise<TaskDetail> =>
  waitForTaskState((path) => api<TaskDetail>('GET', path), taskId, states, timeoutMs);

/** `login` comments; resolves with the id of the task the service made of it. */
async function mention(login: string, index: number, text: string): Promise<string> {
  const nonce = Math.random().toString(36).slice(2, 10);
  await env.gitea.comment(login, index, `@ccweb-bot ${text} [${nonce}]`);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const list = await api<{ items: Array<{ taskId: string; instruction: string }> }>('GET', '/tasks?pageSize=100');
    const t = list.items.find((x) => x.instruction.includes(nonce));
    if (t) return t.taskId;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no task for the comment [${nonce}]`);
}

/** The bot's comments on `index`, once there are at least `n` (or what there is after 20 s). */
async function botComments(index: number, n: number): Promise<string[]> {
  const deadline = Date.now() + 20_000;
  let bodies: string[] = [];
  while (Date.now() < deadline) {
    bodies = (await env.gitea.comments(index)).filter((c) => c.user.login === 'ccweb-bot').map((c) => c.body);
    if (bodies.length >= n) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  return bodies;
}

async function branchExists(branch: string): Promise<boolean> {
  const r = await env.gitea.api(env.gitea.owner, 'GET', `/repos/${env.gitea.owner}/${env.gitea.repo}/branches/${encodeURIComponent(branch)}`, undefined, [200, 404]);
  return r.status === 200;
}

async function pullsFrom(branch: string): Promise<unknown[]> {
  const r = await env.gitea.api<Array<{ head: { ref: string } }>>(env.gitea.owner, 'GET', `/repos/${env.gitea.owner}/${env.gitea.repo}/pulls?state=all&limit=50`);
  return r.body.filter((p) => p.head.ref === branch);
}

beforeAll(async () => {
  env = await startPublishEnvironment(root);
  await env.startService();
}, 240_000);

afterAll(async () => {
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('a stop while work is in flight, against a real Gitea [real gitea-mcp]', () => {
  it('during preparing (the first clone held): aborted, no turn, nothing published; the thread says who stopped it', async () => {
    const n = await env.gitea.createIssue('alice', 'Stop while cloning');
    const hold = env.holdGit('clone');
    const taskId = await mention('alice', n, 'please fix the flaky login test (change-file)');
    await hold.held;
    expect((await api<TaskDetail>('GET', `/tasks/${taskId}`)).task.state).toBe('preparing');
    await env.gitea.comment('alice', n, '@ccweb-bot stop');
    const d = await waitForTask(taskId);
    hold.release();
    expect(d.task).toMatchObject({ state: 'aborted', stoppedBy: 'gitea:user:alice' });
    const states = d.audit.filter((e) => e.action === 'task.transition').map((e) => e.toState);
    expect(states.slice(-3)).toEqual(['preparing', 'aborting', 'aborted']);
    expect(states).not.toContain('running');
    expect(env.model.responsesBodies().some((b) => JSON.stringify(b).includes(`taskId=${taskId}`)), 'no turn ran').toBe(false);
    const bot = await botComments(n, 2);
    expect(bot).toHaveLength(2);
    expect(bot[1]).toMatch(/stopped by @alice/);
    expect(await branchExists(`ccweb/issue-${n}`)).toBe(false);
  });

  it('during publishing (the push held): aborted, the push never runs, no branch and no pull request; one stop receipt', async () => {
    const n = await env.gitea.createIssue('alice', 'Stop while pushing');
    const hold = env.holdGit('push');
    const taskId = await mention('alice', n, 'please append a line to CHANGES.md (change-file)');
    await hold.held;
    expect((await api<TaskDetail>('GET', `/tasks/${taskId}`)).task.state).toBe('publishing');
    await env.gitea.comment('alice', n, '@ccweb-bot stop');
    const d = await waitForTask(taskId);
    expect(d.task).toMatchObject({ state: 'aborted', stoppedBy: 'gitea:user:alice' });
    // Released only now: a push the service did not kill would run here and land.
    hold.release();
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await branchExists(`ccweb/issue-${n}`)).toBe(false);
    expect(await pullsFrom(`ccweb/issue-${n}`)).toEqual([]);
    // The receipt, the agent's answer (posted during its turn, before publishing) and the stop's receipt.
    const bot = await botComments(n, 3);
    expect(bot).toHaveLength(3);
    expect(bot.filter((b) => /stopped by @alice/.test(b))).toHaveLength(1);
    const states = d.audit.filter((e) => e.action === 'task.transition').map((e) => e.toState);
    expect(states.slice(-3)).toEqual(['publishing', 'aborting', 'aborted']);
  });

  it('a stop with nothing to stop gets one answer saying so', async () => {
    const n = await env.gitea.createIssue('alice', 'Nothing running');
    await env.gitea.comment('alice', n, '@ccweb-bot stop');
    const bot = await botComments(n, 1);
    expect(bot).toHaveLength(1);
    expect(bot[0]).toMatch(/nothing to stop/);
  });

  it('in a disabled repository a mention gets one notice per thread and day, not silence; enabled again, it runs', async () => {
    const repoKey = encodeURIComponent(`default:${env.gitea.owner}/${env.gitea.repo}`);
    await api('POST', `/repos/${repoKey}/disable`, { requestId: randomUUID(), operator: 'ops', reason: 'maintenance' });
    try {
      const n = await env.gitea.createIssue('alice', 'While disabled');
      await env.gitea.comment('alice', n, '@ccweb-bot please explain the login flow');
      const first = await botComments(n, 1);
      expect(first).toHaveLength(1);
      expect(first[0]).toMatch(/disabled the bot in this repository/);
      await env.gitea.comment('alice', n, '@ccweb-bot please explain it again');
      await new Promise((r) => setTimeout(r, 3_000));
      expect(await botComments(n, 2)).toHaveLength(1);
    } finally {
      await api('POST', `/repos/${repoKey}/enable`, { requestId: randomUUID(), operator: 'ops', reason: 'maintenance over' });
    }
    const n = await env.gitea.createIssue('alice', 'Enabled again');
    const taskId = await mention('alice', n, 'please explain the login flow');
    expect((await waitForTask(taskId)).task.state).toBe('succeeded');
  });
});
