// Line comments and reviews end to end: the real service process, a REAL Gitea 1.26.3 with
// the hook subscribed to `pull_request_review` too, the real Codex app-server with the scripted agent
// and the real gitea-mcp. Line comments and reviews are made through Gitea's REST API as real users, so
// Gitea itself sends the review deliveries (test/fixtures/gitea/webhooks/review_* are their recordings).
// What the agent received is read from the scripted model's request bodies.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { REVIEW_HOOK_EVENTS } from '../support/real-gitea/review-scenario.js';
import { GiteaWebSession } from '../support/real-gitea/web-session.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-review-'));
let env: PublishEnvironment;

interface TaskDetail {
  task: { taskId: string; deliveryId: string; state: string; errorCode: string | null; review?: { kind: string; lines: Array<{ path: string; line: number }> } };
  publish: { status: string; branch: string | null; pullRequest: { number: number } | null } | null;
}
interface Comment {
  id: number;
  body: string;
  user: { login: string };
}

const FINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'blocked_workspace', 'cancelled', 'aborted', 'rejected', 'ignored'];
const repoPath = () => `/repos/${env.gitea.owner}/${env.gitea.repo}`;
const nonce = () => Math.random().toString(36).slice(2, 10);

async function api<T>(path: string, init?: RequestInit): Promise<T> {
  const res = await fetch(`${env.service!.url}/api/gitea-workflow${path}`, { ...init, headers: { Authorization: `Bearer ${env.adminToken}`, 'content-type': 'application/json' } });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function tasksWith(text: string): Promise<string[]> {
  const list = await api<{ items: Array<{ taskId: string; instruction: string }> }>('/tasks?pageSize=100');
  return list.items.filter((x) => x.instruction.includes(text)).map((x) => x.taskId);
}

async function taskWith(text: string): Promise<string> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const found = await tasksWith(text).catch(() => []);
    if (found.length > 0) return found[0]!;
    await new Promise((r) => setTimeout(r, 200));
  }
  const answers = (await env.gitea.deliveries(env.hookId)).slice(0, 3).map((d) => `${d.requestHeaders['X-Gitea-Event-Type']}: ${d.status} ${d.responseBody}`);
  throw new Error(`no task for [${text}]; the service's latest answers: ${answers.join(' | ')}`);
}

const waitForTask = (taskId: string) => waitForTaskState((path) => api<TaskDetail>(path), taskId, FINAL, 120_000);

/** The turn input the scripted model received for a task (the user message naming its marker). */
function inputFor(taskId: string): string {
  type Item = { type?: string; role?: string; content?: Array<{ text?: string }> };
  const mine = env.model.responsesBodies().filter((b) => JSON.stringify(b).includes(`taskId=${taskId}`));
  if (mine.length === 0) throw new Error(`the model saw no request of ${taskId}`);
  const items = (mine[0] as { input?: Item[] }).input ?? [];
  return items
    .filter((i) => i.type === 'message' && i.role === 'user')
    .flatMap((i) => (i.content ?? []).map((c) => c.text ?? ''))
    .join('\n');
}

/** A review as `login` through Gitea's API (Gitea sends the review delivery). */
async function review(login: string, pr: number, event: string, body: string, comments: Array<{ path: string; new_position: number; body: string }>) {
  return (await env.gitea.api<{ id: number }>(login, 'POST', `${repoPath()}/pulls/${pr}/reviews`, { event, body, comments }, 200)).body;
}

/** Waits until Gitea has delivered the review naming `text` and the service answered it. */
async function delivered(text: string) {
  return env.gitea.waitForDelivery(env.hookId, (d) => d.payload.includes(text), 30_000);
}

beforeAll(async () => {
  env = await startPublishEnvironment(root, { hookEvents: REVIEW_HOOK_EVENTS });
  await env.startService();
}, 240_000);

afterAll(async () => {
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('line comments and reviews on a real Gitea 1.26.3 [real gitea-mcp]', () => {
  it("a line comment mentioning the bot → one task whose input names the file, line and hunk; the change lands on the PR's head branch, the answer on the PR", async () => {
    const pr = env.gitea.prNumber;
    const n = nonce();
    await review('alice', pr, 'COMMENT', '', [{ path: 'src/login.js', new_position: 2, body: `@ccweb-bot [${n}] is this comment true? fix it (change-file)` }]);
    const taskId = await taskWith(n);
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    expect(d.task.review).toMatchObject({ kind: 'line_comment', lines: [{ path: 'src/login.js', line: 2 }] });
    const input = inputFor(taskId);
    expect(input).toContain('wrote a line comment mentioning the bot on `src/login.js` line 2 of pull request #2');
    expect(input).toContain('@@ -1,3 +1,3 @@');
    expect(input).toContain('// retried by the caller');
    expect(input).toContain('Gitea cannot reply in a line thread');
    // The change: a commit on the PR's head branch, no other pull request.
    expect(d.publish?.branch).toBe(env.gitea.prHeadRef);
    expect(d.publish?.pullRequest?.number).toBe(pr);
    // The answer: one bot comment on the PR's conversation carrying this task's marker.
    const comments = (await env.gitea.api<Comment[]>('acme', 'GET', `${repoPath()}/issues/${pr}/comments`)).body;
    expect(comments.filter((c) => c.user.login === 'ccweb-bot' && c.body.includes(`taskId=${taskId} `))).toHaveLength(1);

    // Gitea's Replay of the same delivery (its payload has no text: found by the task's delivery id): a
    // duplicate, no second task.
    const first = await env.gitea.waitForDelivery(env.hookId, (x) => x.uuid === d.task.deliveryId);
    await env.gitea.replay(env.hookId, first.uuid);
    const again = await env.gitea.waitForDelivery(env.hookId, (x) => x.uuid !== first.uuid && x.payload === first.payload && x.taskId > first.taskId);
    expect(JSON.parse(again.responseBody)).toMatchObject({ status: 'duplicate', taskId });
    expect(await tasksWith(n)).toEqual([taskId]);
  }, 240_000);

  it("a reply in that line's thread (web UI; Gitea sends an ordinary PR comment) → a task whose input has the line's file, line and hunk", async () => {
    const pr = env.gitea.prNumber;
    const reviews = (await env.gitea.api<Array<{ id: number; user: { login: string }; comments_count: number }>>('acme', 'GET', `${repoPath()}/pulls/${pr}/reviews`)).body;
    const thread = reviews.find((r) => r.user.login === 'alice' && r.comments_count > 0)!;
    const head = (await env.gitea.api<{ head: { sha: string } }>('acme', 'GET', `${repoPath()}/pulls/${pr}`)).body.head.sha;
    const web = await GiteaWebSession.login(env.gitea.url, 'alice', env.gitea.users.writer.password);
    const n = nonce();
    const res = await web.request('POST', `/${env.gitea.owner}/${env.gitea.repo}/pulls/${pr}/files/reviews/comments`, new URLSearchParams({ origin: 'diff', content: `@ccweb-bot [${n}] and add a test for it`, side: 'proposed', line: '2', path: 'src/login.js', single_review: 'true', reply: String(thread.id), latest_commit_id: head }));
    expect(res.status).toBeLessThan(400);
    const taskId = await taskWith(n);
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    expect(d.task.review).toMatchObject({ kind: 'line_comment', lines: [{ path: 'src/login.js', line: 2 }] });
    const input = inputFor(taskId);
    expect(input).toContain('wrote a line comment mentioning the bot on `src/login.js` line 2 of pull request #2');
    expect(input).toContain('@@ -1,3 +1,3 @@');
    expect(input).toContain(`@ccweb-bot [${n}] and add a test for it`);
  }, 240_000);

  it('a review with three line comments and a mentioning body → ONE task whose input has all three', async () => {
    const pr = env.gitea.prNumber;
    const n = nonce();
    await review('acme', pr, 'COMMENT', `@ccweb-bot please address this review [${n}]`, [
      { path: 'src/login.js', new_position: 1, body: `validate both arguments ${n}-a` },
      { path: 'src/login.js', new_position: 2, body: `drop the trailing comment ${n}-b` },
      { path: 'src/login.js', new_position: 3, body: `add a newline at the end ${n}-c` },
    ]);
    const taskId = await taskWith(n);
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    await delivered(`please address this review [${n}]`);
    expect(await tasksWith(n)).toEqual([taskId]);
    expect(d.task.review?.lines.map((l) => l.line)).toEqual([1, 2, 3]);
    const input = inputFor(taskId);
    expect(input).toContain('submitted a review of pull request #2 asking the bot to address it');
    for (const s of [`${n}-a`, `${n}-b`, `${n}-c`, 'Line comments (3):']) expect(input).toContain(s);
  }, 240_000);

  it("request changes on the bot's own pull request: a task only with the repository's option on", async () => {
    // The bot opens a pull request of its own (an issue mention with a change).
    const issue = await env.gitea.createIssue('alice', 'Give the bot a pull request');
    const m = nonce();
    await env.gitea.comment('alice', issue, `@ccweb-bot make a change (change-file) [${m}]`);
    const opened = await waitForTask(await taskWith(m));
    expect(opened.task.state, JSON.stringify(opened.task)).toBe('succeeded');
    const botPr = opened.publish!.pullRequest!.number;

    // Off (the default): a request-changes review without a mention is ignored.
    const off = nonce();
    await review('alice', botPr, 'REQUEST_CHANGES', `please bound the retry [${off}]`, []);
    const ignored = await delivered(off);
    expect(JSON.parse(ignored.responseBody)).toMatchObject({ status: 'ignored', reason: 'no_mention' });
    expect(await tasksWith(off)).toEqual([]);

    // On: one task.
    const repoKey = encodeURIComponent(`default:${env.gitea.owner}/${env.gitea.repo}`);
    const set = await api<{ reviewTriggers: { requestChanges: boolean } }>(`/repos/${repoKey}/review-triggers`, { method: 'POST', body: JSON.stringify({ requestId: 'review-triggers-on-1', operator: 'ops', reason: 'the bot answers reviews of its PRs', requestChanges: true }) });
    expect(set.reviewTriggers).toEqual({ requestChanges: true });
    const on = nonce();
    await review('alice', botPr, 'REQUEST_CHANGES', `please bound the retry [${on}]`, []);
    const taskId = await taskWith(on);
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    expect(await tasksWith(on)).toEqual([taskId]);
    expect(inputFor(taskId)).toContain(`requested changes on pull request #${botPr}, a pull request the bot opened`);
    // A request-changes review on somebody else's pull request still needs a mention.
    const other = nonce();
    await review('acme', env.gitea.prNumber, 'REQUEST_CHANGES', `not the bot's [${other}]`, []);
    expect(JSON.parse((await delivered(other)).responseBody)).toMatchObject({ status: 'ignored', reason: 'no_mention' });
  }, 300_000);
});
