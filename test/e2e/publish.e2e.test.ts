// Change delivery end to end: the real service process, a REAL Gitea 1.26, the real Codex
// app-server whose scripted model edits CHANGES.md through Codex's own shell tool (`exec_command`).
// What the agent changed must reach Gitea as commits and one pull request, exactly once, read back.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../support/until.js';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { waitForTaskState } from '../support/wait-for-task.js';
import { TASK_EFFECTS } from '../../machines/task-lifecycle.js';
import { lockActorId } from '../../src/leases/repo-lock-actor.js';
import { sessionActorId } from '../../src/sessions/session-actor.js';
import { taskActorId } from '../../src/tasks/task-actor.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-publish-'));
let env: PublishEnvironment;

interface Pull {
  number: number;
  state: string;
  body: string;
  html_url: string;
  head: { ref: string; sha: string };
  base: { ref: string };
}
interface TaskDetail {
  task: { taskId: string; repoKey: string; state: string; errorCode: string | null; threadId: string | null; usage?: { diffBytes: number } };
  publish: {
    status: string;
    branch: string | null;
    headSha: string | null;
    commits: string[];
    diff?: { bytes: number; files: number; added: number; removed: number } | null;
    pullRequest: { number: number; url: string } | null;
    kept: { branch: string; patchFile: string } | null;
  } | null;
  audit: Array<{ action: string; toState: string | null }>;
}

const owner = () => env.gitea.owner;
const repo = () => env.gitea.repo;
const asOwner = <T>(method: string, path: string, body?: unknown, expect?: number | number[]) =>
  env.gitea.api<T>(owner(), method, `/repos/${owner()}/${repo()}${path}`, body, expect).then((r) => r.body);

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${env.service!.url}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return (await res.json()) as T;
}

const FINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'blocked_workspace', 'cancelled', 'aborted'];

async function waitForTask(taskId: string, states = FINAL, timeoutMs = 90_000): Promise<TaskDetail> {
  return waitForTaskState((path) => api<TaskDetail>(path), taskId, states, timeoutMs);
}

/** alice comments; resolves with the id of the task the service made of that comment. */
async function mention(index: number, text: string): Promise<string> {
  const nonce = Math.random().toString(36).slice(2, 10);
  await env.gitea.comment('alice', index, `@ccweb-bot ${text} [${nonce}]`);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      const list = await api<{ items: Array<{ taskId: string; instruction: string }> }>(`/tasks?pageSize=100`);
      const t = list.items.find((x) => x.instruction.includes(nonce));
      if (t) return t.taskId;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no task for the comment [${nonce}]`);
}

async function openPulls(): Promise<Pull[]> {
  return asOwner<Pull[]>('GET', '/pulls?state=open&limit=50');
}

async function branchSha(branch: string): Promise<string | null> {
  const r = await env.gitea.api<{ commit: { id: string } }>(owner(), 'GET', `/repos/${owner()}/${repo()}/branches/${encodeURIComponent(branch)}`, undefined, [200, 404]);
  return r.status === 200 ? r.body.commit.id : null;
}

/** The task's receipt on the thread once its final edit landed (its first line no longer says queued). */
async function finalReceipt(index: number, taskId: string): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const body = (await env.gitea.comments(index)).find((c) => c.user.login === env.gitea.users.bot.login && c.body.includes(`receipt=${taskId}:status:received`))?.body ?? '';
    if (/\*\*Stage:\*\* (done|failed|stopped)\b/.test(body)) return body;
    if (Date.now() > deadline) throw new Error(`no final receipt for ${taskId}: ${body}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function fileOn(branch: string, path: string): Promise<string> {
  const r = await asOwner<{ content: string }>('GET', `/contents/${path}?ref=${encodeURIComponent(branch)}`);
  return Buffer.from(r.content, 'base64').toString('utf8');
}

async function commitsOn(branch: string): Promise<Array<{ sha: string; commit: { message: string; author: { name: string } } }>> {
  return asOwner('GET', `/commits?sha=${encodeURIComponent(branch)}&limit=50`);
}

let mainBefore = '';
let firstDiffBytes = 0;

/** Gitea's own diff of one commit against its parent (`GET …/git/commits/{sha}.diff`). */
async function commitDiff(sha: string): Promise<string> {
  const r = await env.gitea.api<string>(owner(), 'GET', `/repos/${owner()}/${repo()}/git/commits/${sha}.diff`);
  return typeof r.body === 'string' ? r.body : JSON.stringify(r.body);
}

/** The repository's diff bytes in the usage report (the last two UTC days: a run across midnight still sees them). */
async function usageDiffBytes(repoKey: string): Promise<number> {
  const u = await api<{ byRepository: Array<{ subject: string; diffBytes: number }> }>('/usage?days=2');
  return u.byRepository.find((r) => r.subject === repoKey)?.diffBytes ?? 0;
}

/**
 * Usage counts the published change's diff, once. Codex reports no turn diff for a file the agent
 * wrote with a shell command (the scripted model's way): before the publisher measured the published
 * change, a task that opened a pull request showed 0 diff bytes.
 */
async function expectDiffCounted(d: TaskDetail, headSha: string): Promise<void> {
  const diff = d.publish?.diff;
  expect(diff, JSON.stringify(d.publish)).toMatchObject({ files: 1, added: 1, removed: 0 });
  expect(diff!.bytes).toBe(Buffer.byteLength(await commitDiff(headSha), 'utf8'));
  expect(d.task.usage?.diffBytes).toBe(diff!.bytes);
}

beforeAll(async () => {
  env = await startPublishEnvironment(root);
  await env.startService();
  mainBefore = (await branchSha('main'))!;
}, 240_000);

afterAll(async () => {
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('change delivery against a real Gitea [real gitea-mcp]', () => {
  let firstPr: Pull;

  it('an issue → exactly one open pull request from ccweb/issue-N holding the change, referencing the issue; main untouched', async () => {
    const n = env.gitea.issueNumber;
    const gitLines = () => (existsSync(env.gitArgsLog) ? readFileSync(env.gitArgsLog, 'utf8').split('\n') : []);
    const gitBefore = Math.max(0, gitLines().length - 1);
    const taskId = await mention(n, 'please fix the flaky login test (change-file)');
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    // What it cost in git (on a 10⁵-file tree every status is as dear as the commit): one
    // status of the worktree (the fast path's, reused for the commit), the branch read from Gitea
    // once before the push and once after it (the read-back).
    const gitRun = gitLines().slice(gitBefore);
    expect(gitRun.filter((l) => l.startsWith('--no-optional-locks status --porcelain=v1 -z --untracked-files=all'))).toHaveLength(1);
    expect(gitRun.filter((l) => / ls-remote --heads -- /.test(` ${l}`) && l.endsWith(`refs/heads/ccweb/issue-${n}`))).toHaveLength(2);
    const pulls = (await openPulls()).filter((p) => p.head.ref === `ccweb/issue-${n}`);
    expect(pulls).toHaveLength(1);
    firstPr = pulls[0]!;
    expect(firstPr.base.ref).toBe('main');
    expect(firstPr.body).toContain(`#${n}`);
    expect(firstPr.body).toContain(`taskId=${taskId}`);
    expect(await fileOn(`ccweb/issue-${n}`, 'CHANGES.md')).toBe(`change by task ${taskId}\n`);
    expect(await branchSha('main')).toBe(mainBefore);
    // Read back: the task names the branch, the pushed head and the pull request Gitea shows.
    expect(d.publish?.status).toBe('published');
    expect(d.publish?.branch).toBe(`ccweb/issue-${n}`);
    expect(d.publish?.headSha).toBe(firstPr.head.sha);
    expect(d.publish?.pullRequest).toEqual({ number: firstPr.number, url: firstPr.html_url });
    const commits = await commitsOn(`ccweb/issue-${n}`);
    expect(commits[0]!.sha).toBe(firstPr.head.sha);
    expect(commits[0]!.commit.message).toContain(`Ccweb-Task: ${taskId}`);
    expect(commits[0]!.commit.author.name).toBe(env.gitea.users.bot.login);
    // The task went through publishing.
    expect(d.audit.filter((e) => e.toState === 'publishing')).toHaveLength(1);
    expect(d.audit.map((e) => e.action)).toEqual(expect.arrayContaining(['publish.commit', 'publish.push', 'publish.pull_request_created', 'publish.verified']));
    await expectDiffCounted(d, firstPr.head.sha);
    firstDiffBytes = d.task.usage!.diffBytes;
    expect(await usageDiffBytes(d.task.repoKey)).toBe(firstDiffBytes);
    // The bot's commit status on its head: pending while the task went on, then success, linked to its receipt.
    const statuses = await until(
      'the ccweb success status',
      async () => {
        const list = await asOwner<Array<{ context: string; status: string; target_url: string; creator: { login: string } }>>('GET', `/commits/${firstPr.head.sha}/statuses`);
        return list.some((x) => x.context === 'ccweb' && x.status === 'success') ? list : null;
      },
      20_000,
    );
    // Pending only if the worker came to the head before the task ended (the verification is quick here).
    const ours = statuses.filter((x) => x.context === 'ccweb');
    expect(ours.filter((x) => x.status === 'success')).toHaveLength(1);
    expect(ours.filter((x) => x.status !== 'success').map((x) => x.status)).toEqual(ours.length === 2 ? ['pending'] : []);
    for (const x of ours) {
      expect(x.creator.login).toBe(env.gitea.users.bot.login);
      expect(x.target_url).toMatch(new RegExp(`/issues/${n}#issuecomment-\\d+$`));
    }
    const after = await api<{ audit: Array<{ action: string; metadata?: Record<string, unknown> }> }>(`/tasks/${taskId}`);
    expect(after.audit.filter((e) => e.action === 'publish.commit_status').map((e) => e.metadata?.['state']).at(-1)).toBe('success');
  });

  it('a follow-up on the same issue → a new commit on the same pull request; still one pull request', async () => {
    const n = env.gitea.issueNumber;
    const taskId = await mention(n, 'one more change please (change-file)');
    const d = await waitForTask(taskId);
    expect(d.task.state).toBe('succeeded');
    const pulls = (await openPulls()).filter((p) => p.head.ref === `ccweb/issue-${n}`);
    expect(pulls).toHaveLength(1);
    expect(pulls[0]!.number).toBe(firstPr.number);
    expect(pulls[0]!.head.sha).not.toBe(firstPr.head.sha);
    const commits = await commitsOn(`ccweb/issue-${n}`);
    expect(commits[0]!.sha).toBe(pulls[0]!.head.sha);
    expect(commits[1]!.sha).toBe(firstPr.head.sha); // on top of the first: nothing rewritten
    expect(await fileOn(`ccweb/issue-${n}`, 'CHANGES.md')).toMatch(new RegExp(`task .+\\nchange by task ${taskId}\\n$`));
    expect(d.publish?.pullRequest?.number).toBe(firstPr.number);
    expect(d.audit.map((e) => e.action)).toContain('publish.pull_request_reused');
    // Only this task's commit is its change: the first task's line is not counted again.
    await expectDiffCounted(d, pulls[0]!.head.sha);
    expect(await usageDiffBytes(d.task.repoKey)).toBe(firstDiffBytes + d.task.usage!.diffBytes);
  });

  it('the agent publishes through the service\'s tool and its one answer links the pull request; also on a resumed thread', async () => {
    const n = await env.gitea.createIssue('alice', 'Link the PR');
    const first = await mention(n, 'change-file and publish-tool');
    const d1 = await waitForTask(first);
    expect(d1.task.state, JSON.stringify(d1.task)).toBe('succeeded');
    const pulls = (await openPulls()).filter((p) => p.head.ref === `ccweb/issue-${n}`);
    expect(pulls).toHaveLength(1);
    const answer = async (taskId: string) =>
      (await env.gitea.comments(n)).find((c) => c.user.login === env.gitea.users.bot.login && c.body.includes(`taskId=${taskId}`))!.body;
    expect(await answer(first)).toContain(pulls[0]!.html_url);
    // The tool published during the turn; the step after the turn found it done (no second push).
    const actions = d1.audit.map((e) => e.action);
    expect(actions.filter((a) => a === 'publish.push')).toHaveLength(1);
    expect(actions.indexOf('publish.push')).toBeLessThan(d1.audit.findIndex((e) => e.toState === 'publishing'));
    expect((await commitsOn(`ccweb/issue-${n}`))[0]!.commit.message).toMatch(/^Append a line to CHANGES.md\n/);
    // Published twice over (the tool, then the step that found it done): counted once.
    await expectDiffCounted(d1, pulls[0]!.head.sha);
    // A restart: the next task resumes the thread (thread/resume has no dynamicTools field).
    await env.service!.stop();
    await env.startService();
    const second = await mention(n, 'change-file again and publish-tool');
    const d2 = await waitForTask(second);
    expect(d2.task.state, JSON.stringify(d2.task)).toBe('succeeded');
    expect(await answer(second)).toContain(pulls[0]!.html_url);
    expect(d2.audit.map((e) => e.action).filter((a) => a === 'publish.push')).toHaveLength(1);
    // Same thread, resumed by the new app-server process: the tool survived thread/resume.
    expect(d2.task.threadId).toBe(d1.task.threadId);
    expect(d2.audit.map((e) => e.toState)).toContain('resuming');
  });

  it('a same-repository pull request → a new commit on its head branch, no new pull request', async () => {
    const before = await openPulls();
    const pr = env.gitea.prNumber;
    const taskId = await mention(pr, 'adjust this pull request (change-file)');
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    const after = await openPulls();
    expect(after.map((p) => p.number).sort()).toEqual(before.map((p) => p.number).sort());
    const head = await branchSha(env.gitea.prHeadRef);
    expect(head).not.toBe(env.gitea.prHeadSha);
    const commits = await commitsOn(env.gitea.prHeadRef);
    expect(commits[0]!.sha).toBe(head);
    expect(commits[1]!.sha).toBe(env.gitea.prHeadSha); // fast-forward on top of the PR's head
    expect(after.find((p) => p.number === pr)!.head.sha).toBe(head);
    expect(d.publish?.branch).toBe(env.gitea.prHeadRef);
    expect(d.publish?.pullRequest?.number).toBe(pr);
  });

  it('a pull request whose head branch moved on Gitea during the turn → our commit is rebased onto it; a conflicting move fails clearly, change kept', async () => {
    const pr = env.gitea.prNumber;
    const ref = env.gitea.prHeadRef;
    const b64 = (t: string) => Buffer.from(t).toString('base64');
    const moveBranch = async (path: string, content: string) => {
      const existing = await env.gitea.api<{ sha: string }>(owner(), 'GET', `/repos/${owner()}/${repo()}/contents/${path}?ref=${encodeURIComponent(ref)}`, undefined, [200, 404]);
      await asOwner('POST', '/contents', {
        branch: ref,
        message: `a human pushes ${path}`,
        files: [{ operation: existing.status === 200 ? 'update' : 'create', path, content: b64(content), ...(existing.status === 200 ? { sha: existing.body.sha } : {}) }],
      }, 201);
      return (await branchSha(ref))!;
    };
    const runWhileMoving = async (path: string, content: string) => {
      const taskId = await mention(pr, 'change-file-pause here');
      await waitForTask(taskId, ['running', ...FINAL]);
      const moved = await moveBranch(path, content);
      return { d: await waitForTask(taskId), moved, taskId };
    };
    // 1. A human changed another file meanwhile: our commit goes on top of theirs.
    const ok = await runWhileMoving('HUMAN.md', 'edited by a human\n');
    expect(ok.d.task.state, JSON.stringify(ok.d.task)).toBe('succeeded');
    const commits = await commitsOn(ref);
    expect(commits[0]!.commit.message).toContain(`Ccweb-Task: ${ok.taskId}`);
    expect(commits[1]!.sha).toBe(ok.moved);
    expect(ok.d.audit.map((e) => e.action)).toContain('publish.rebased');
    // 2. A human changed the same lines meanwhile: no force, no merge — failed, kept, branch untouched.
    const bad = await runWhileMoving('CHANGES.md', 'a conflicting human line\n');
    expect(bad.d.task.state).toBe('failed');
    expect(bad.d.task.errorCode).toBe('push_conflict');
    expect(await branchSha(ref)).toBe(bad.moved);
    expect(readFileSync(bad.d.publish!.kept!.patchFile, 'utf8')).toContain(`+change by task ${bad.taskId}`);
  }, 180_000);

  it('right after, a mention on another issue of the same repository succeeds (its own worktree, its own pull request)', async () => {
    const n = await env.gitea.createIssue('alice', 'Another thing');
    const taskId = await mention(n, 'change something here too (change-file)');
    const d = await waitForTask(taskId);
    expect(d.task.state).toBe('succeeded');
    const pulls = (await openPulls()).filter((p) => p.head.ref === `ccweb/issue-${n}`);
    expect(pulls).toHaveLength(1);
    expect(await fileOn(`ccweb/issue-${n}`, 'CHANGES.md')).toBe(`change by task ${taskId}\n`);
  });

  it("one resource's leftovers never block another's task; the resource's own next task tells its user once", async () => {
    const a = await env.gitea.createIssue('alice', 'Leftovers here');
    const first = await mention(a, 'change-file please');
    expect((await waitForTask(first)).task.state).toBe('succeeded');
    // Leftovers in issue A's worktree (as a crashed or failed run would leave them).
    const wtA = join(env.workspaceRoot, 'default', '.worktrees', owner(), repo(), `issue-${a}`);
    writeFileSync(join(wtA, 'LEFTOVER.txt'), 'not published\n');
    const b = await env.gitea.createIssue('alice', 'Unrelated issue');
    const other = await mention(b, 'change-file on another issue');
    expect((await waitForTask(other)).task.state).toBe('succeeded');
    expect(await fileOn(`ccweb/issue-${b}`, 'CHANGES.md')).toBe(`change by task ${other}\n`);
    // Issue A's own next task is blocked by its leftovers, and says so once.
    const blocked = await mention(a, 'another change-file');
    expect((await waitForTask(blocked)).task.state).toBe('blocked_workspace');
    // (The service edits the task's receipt with a notice: src/receipts/receipt-notice.ts.)
    const notices = async () => (await env.gitea.comments(a)).filter((c) => c.body.includes(`unblock task ${blocked}`));
    const deadline = Date.now() + 20_000;
    while ((await notices()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    expect(await notices()).toHaveLength(1);
  });

  it('a task that asked its user something continues on its own uncommitted change and publishes it all once answered', async () => {
    const n = await env.gitea.createIssue('alice', 'Ask me first');
    const taskId = await mention(n, 'change-file, but ask a question first');
    expect((await waitForTask(taskId, ['waiting_user', ...FINAL])).task.state).toBe('waiting_user');
    expect(await branchSha(`ccweb/issue-${n}`)).toBeNull();
    // The reply joins the waiting task (no new task).
    await env.gitea.comment('alice', n, '@ccweb-bot firefox; and change-file again');
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    expect(await fileOn(`ccweb/issue-${n}`, 'CHANGES.md')).toBe(`change by task ${taskId}\nchange by task ${taskId}\n`);
    expect((await openPulls()).filter((p) => p.head.ref === `ccweb/issue-${n}`)).toHaveLength(1);
  });

  it('an answer-only mention publishes nothing', async () => {
    const n = await env.gitea.createIssue('alice', 'Just a question');
    const taskId = await mention(n, 'what does login.js do?');
    const d = await waitForTask(taskId);
    expect(d.task.state).toBe('succeeded');
    expect(d.publish?.status).toBe('nothing_to_publish');
    expect(await branchSha(`ccweb/issue-${n}`)).toBeNull();
    expect((await openPulls()).filter((p) => p.head.ref === `ccweb/issue-${n}`)).toHaveLength(0);
  });

  it('the live actors are one xstate system: the service → the repository lock, the session, the app-server and the task; the verifying task → its verification effect → its reply verifier', async () => {
    interface Node {
      id: string;
      children: Node[];
    }
    const n = await env.gitea.createIssue('alice', 'The actor tree');
    // The verifier's read of the thread, held: the task waits in verifying_reply with its verifier live.
    const hold = env.holdRequest((method, url) => method === 'GET' && url.includes(`/issues/${n}/comments?`) && url.includes('since='));
    const taskId = await mention(n, 'what does login.js do?');
    await hold.held;
    try {
      const d = await api<TaskDetail & { task: { sessionKey: string } }>(`/tasks/${taskId}`);
      expect(d.task.state).toBe('verifying_reply');
      const tree = (await api<{ root: Node }>('/actor-system')).root;
      expect(tree.id).toBe('service');
      const under = (node: Node, id: string) => node.children.find((c) => c.id === id);
      expect(under(tree, lockActorId(d.task.repoKey)), JSON.stringify(tree)).toBeDefined();
      expect(under(tree, sessionActorId(d.task.sessionKey))).toBeDefined();
      expect(tree.children.filter((c) => c.id.startsWith('app-server:'))).toHaveLength(1);
      const task = under(tree, taskActorId(taskId))!;
      expect(task.children.map((c) => c.id)).toEqual([TASK_EFFECTS.verifying_reply]);
      // The verification's own work beside the verifier it spawned.
      expect(task.children[0]!.children.map((c) => c.id).sort()).toEqual([expect.stringMatching(new RegExp(`^verifier:${taskId}:`)), 'work']);
    } finally {
      hold.release();
    }
    expect((await waitForTask(taskId)).task.state).toBe('succeeded');
    // Finished, the task and its verifier have left the system; the long-lived actors stay.
    const after = (await api<{ root: Node }>('/actor-system')).root;
    expect(after.children.map((c) => c.id)).not.toContain(taskActorId(taskId));
    expect(after.children.filter((c) => c.id.startsWith('app-server:'))).toHaveLength(1);
  });

  it('kill -9 while the push is held (Gitea already has it) → after restart the commit is pushed once and one pull request opens', async () => {
    const n = await env.gitea.createIssue('alice', 'Crash during push');
    const hold = env.holdPush();
    const taskId = await mention(n, 'change it (change-file)');
    await hold.held;
    await env.service!.kill9();
    hold.release();
    await env.startService();
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    const pulls = (await openPulls()).filter((p) => p.head.ref === `ccweb/issue-${n}`);
    expect(pulls).toHaveLength(1);
    const commits = await commitsOn(`ccweb/issue-${n}`);
    const ours = commits.filter((c) => c.commit.message.includes(`Ccweb-Task: ${taskId}`));
    expect(ours).toHaveLength(1);
    expect(await fileOn(`ccweb/issue-${n}`, 'CHANGES.md')).toBe(`change by task ${taskId}\n`);
    // The restarted service found the push on Gitea and did not push again.
    const actions = d.audit.map((e) => e.action);
    expect(actions).toContain('publish.push_skipped');
    expect(actions.filter((a) => a === 'publish.push').length).toBeLessThanOrEqual(1);
    // Measured before the crash, counted once after it.
    await expectDiffCounted(d, ours[0]!.sha);
  });

  it('kill -9 while the pull-request call is held (Gitea creates it meanwhile) → after restart still exactly one pull request', async () => {
    const n = await env.gitea.createIssue('alice', 'Crash during the pull request');
    const hold = env.holdPulls();
    const taskId = await mention(n, 'change it (change-file)');
    await hold.held;
    await env.service!.kill9();
    hold.release();
    await env.startService();
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    const all = await asOwner<Pull[]>('GET', '/pulls?state=all&limit=50');
    expect(all.filter((p) => p.head.ref === `ccweb/issue-${n}`)).toHaveLength(1);
    expect(d.publish?.pullRequest?.number).toBe(all.find((p) => p.head.ref === `ccweb/issue-${n}`)!.number);
  });

  it('a refused push (protected branch) → failed with one receipt naming the cause; the change kept as a branch and a patch, listed', async () => {
    await asOwner('POST', '/branch_protections', { rule_name: env.gitea.prHeadRef, enable_push: false }, 201);
    const pr = env.gitea.prNumber;
    const headBefore = await branchSha(env.gitea.prHeadRef);
    const taskId = await mention(pr, 'change the protected one (change-file)');
    const d = await waitForTask(taskId);
    expect(d.task.state).toBe('failed');
    expect(d.task.errorCode).toBe('push_rejected');
    expect(await branchSha(env.gitea.prHeadRef)).toBe(headBefore);
    expect(d.publish?.status).toBe('kept');
    const kept = d.publish!.kept!;
    expect(kept.branch).toBe(`ccweb-kept/${taskId}`);
    expect(existsSync(kept.patchFile)).toBe(true);
    expect(kept.patchFile.startsWith(join(env.dataDir, 'patches'))).toBe(true);
    expect(readFileSync(kept.patchFile, 'utf8')).toContain(`+change by task ${taskId}`);
    // One failure receipt, naming the cause and where the change is.
    const deadline = Date.now() + 20_000;
    let receipts: Array<{ body: string }> = [];
    while (Date.now() < deadline) {
      receipts = (await env.gitea.comments(pr)).filter((c) => c.user.login === env.gitea.users.bot.login && c.body.includes(`task ${taskId} failed`));
      if (receipts.length > 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(receipts).toHaveLength(1);
    expect(receipts[0]!.body).toContain('push_rejected');
    expect(receipts[0]!.body).toContain(`ccweb-kept/${taskId}`);
    // The worktree of that pull request is clean again: its next task is not blocked.
    await asOwner('DELETE', `/branch_protections/${encodeURIComponent(env.gitea.prHeadRef)}`, undefined, 204);
    const next = await mention(pr, 'just answer this time');
    expect((await waitForTask(next)).task.state).toBe('succeeded');
  });

  it("a pull request from a fork: nothing ever goes to the base repository; the fork's head branch only with maintainer edits and a fork the bot can reach, else refused, kept, said once", async () => {
    const pr = env.gitea.forkPrNumber;
    const bob = env.gitea.users.reader.login;
    const bot = env.gitea.users.bot.login;
    const baseBranches = async () =>
      (await asOwner<Array<{ name: string; commit: { id: string } }>>('GET', '/branches?limit=50')).map((b) => `${b.name}@${b.commit.id}`).sort();
    const forkBranch = async () => (await env.gitea.api<{ commit: { id: string } }>(bob, 'GET', `/repos/${bob}/${repo()}/branches/fix-typo`)).body.commit.id;
    const setMaintainerEdit = (allow: boolean) => env.gitea.api(bob, 'PATCH', `/repos/${owner()}/${repo()}/pulls/${pr}`, { allow_maintainer_edit: allow }, 201);
    const failureReceipts = async (taskId: string) => {
      const deadline = Date.now() + 20_000;
      let found: Array<{ body: string }> = [];
      while (Date.now() < deadline) {
        found = (await env.gitea.comments(pr)).filter((c) => c.user.login === bot && c.body.includes(`task ${taskId} failed`));
        if (found.length > 0) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      return found;
    };
    const refused = async (code: string, how = '(change-file)') => {
      const taskId = await mention(pr, `tweak the fork pull request ${how}`);
      const d = await waitForTask(taskId);
      expect(d.task.state, JSON.stringify(d.task)).toBe('failed');
      expect(d.task.errorCode).toBe(code);
      expect(d.publish?.status).toBe('kept');
      // The kept patch holds the bot's change only, not the fork's own commit under it.
      const patch = readFileSync(d.publish!.kept!.patchFile, 'utf8');
      expect(patch).toContain(`+change by task ${taskId}`);
      expect(patch).not.toContain('compares both fields');
      const receipts = await failureReceipts(taskId);
      expect(receipts).toHaveLength(1);
      expect(receipts[0]!.body).toContain(code);
      expect(receipts[0]!.body).toContain(`ccweb-kept/${taskId}`);
      // The task's own receipt says it too, in the service's words (not only the agent's answer, if it repeats the tool's error).
      const receipt = await finalReceipt(pr, taskId);
      expect(receipt.split('\n')[0]).toContain(`failed (task ${taskId})`);
      expect(receipt).toContain(`Error code \`${code}\``);
      expect(receipt).toContain(`The change is kept: branch \`ccweb-kept/${taskId}\``);
      return receipts[0]!.body;
    };
    const before = await baseBranches();
    const forkBefore = await forkBranch();

    // 1. The author does not allow maintainer edits: refused before anything is pushed anywhere.
    await setMaintainerEdit(false);
    expect(await refused('fork_edits_not_allowed')).toContain('Allow edits from maintainers');
    // The same when the agent publishes through the service's tool during its turn: the refusal kept the
    // change and cleaned the worktree, and the publish after the turn must not call that "nothing to publish".
    expect(await refused('fork_edits_not_allowed', '(change-file publish-tool)')).toContain('Allow edits from maintainers');
    // 2. Allowed, but the fork is private and the bot cannot read it (real Gitea: "Repository not found").
    await setMaintainerEdit(true);
    expect(await refused('fork_unreachable')).toContain('a private fork needs the bot added as a reader');
    expect(await refused('fork_unreachable', '(change-file publish-tool)')).toContain('a private fork needs the bot added as a reader');
    expect(await forkBranch()).toBe(forkBefore);

    // 3. bob makes the bot a reader of his fork: the commit lands on the fork's head branch, on top of bob's.
    await env.gitea.api(bob, 'PUT', `/repos/${bob}/${repo()}/collaborators/${bot}`, { permission: 'read' }, 204);
    const openBefore = await openPulls();
    const taskId = await mention(pr, 'tweak the fork pull request (change-file)');
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    const head = await forkBranch();
    expect(head).not.toBe(forkBefore);
    const commits = (await env.gitea.api<Array<{ sha: string; commit: { message: string; author: { name: string } } }>>(bob, 'GET', `/repos/${bob}/${repo()}/commits?sha=fix-typo&limit=5`)).body;
    expect(commits[0]!.sha).toBe(head);
    expect(commits[0]!.commit.message).toContain(`Ccweb-Task: ${taskId}`);
    expect(commits[0]!.commit.author.name).toBe(bot);
    expect(commits[1]!.sha).toBe(forkBefore);
    expect((await asOwner<Pull>('GET', `/pulls/${pr}`)).head.sha).toBe(head);
    expect(d.publish).toMatchObject({ status: 'published', branch: 'fix-typo', repository: `${bob}/${repo()}`, headSha: head, pullRequest: { number: pr } });
    // Nothing new in the base repository: no branch (no ccweb/pr-N), no moved branch, no pull request.
    expect(await baseBranches()).toEqual(before);
    expect(await branchSha(`ccweb/pr-${pr}`)).toBeNull();
    expect((await openPulls()).map((p) => p.number).sort()).toEqual(openBefore.map((p) => p.number).sort());
    // The shared clone's origin refs were never overwritten with the fork's.
    const shared = join(env.workspaceRoot, 'default', owner(), repo());
    expect(execFileSync('git', ['rev-parse', 'refs/remotes/origin/main'], { cwd: shared, encoding: 'utf8' }).trim()).toBe(mainBefore);
  }, 180_000);

  it('an agent change adding .gitea/workflows/x.yml → that file is not committed, named in one notice and kept, the rest published; once the operator allows CI changes → committed', async () => {
    const n = await env.gitea.createIssue('alice', 'Add CI');
    const branch = `ccweb/issue-${n}`;
    const taskId = await mention(n, 'change-file and add-workflow');
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    const withheld = (d.publish as { withheld?: { paths: string[]; branch: string; patchFile: string } } | null)?.withheld;
    expect(withheld?.paths).toEqual(['.gitea/workflows/x.yml']);
    expect(withheld?.branch).toBe(`ccweb-kept/${taskId}-withheld`);
    expect(readFileSync(withheld!.patchFile, 'utf8')).toContain('+on: push');
    // The rest is published; the workflow is on no branch of Gitea.
    expect(await fileOn(branch, 'CHANGES.md')).toBe(`change by task ${taskId}\n`);
    const wf = await env.gitea.api(owner(), 'GET', `/repos/${owner()}/${repo()}/contents/.gitea/workflows/x.yml?ref=${encodeURIComponent(branch)}`, undefined, [200, 404]);
    expect(wf.status).toBe(404);
    expect(d.audit.map((e) => e.action)).toContain('publish.paths_withheld');
    // One notice naming the file and where it is kept.
    const notices = async () => (await env.gitea.comments(n)).filter((c) => c.body.includes(`task ${taskId} did not commit`));
    const deadline = Date.now() + 20_000;
    while ((await notices()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    expect(await notices()).toHaveLength(1);
    expect((await notices())[0]!.body).toContain('`.gitea/workflows/x.yml`');
    expect((await notices())[0]!.body).toContain(`ccweb-kept/${taskId}-withheld`);
    // The worktree is clean: the issue's next task is not blocked by the withheld file.
    const wt = join(env.workspaceRoot, 'default', '.worktrees', owner(), repo(), `issue-${n}`);
    expect(execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: wt, encoding: 'utf8' })).toBe('');

    // The receipt names the withheld file too, and the rest as published.
    const receipt = await finalReceipt(n, taskId);
    expect(receipt).toContain('Not committed: `.gitea/workflows/x.yml`');
    expect(receipt).toContain(`ccweb-kept/${taskId}-withheld`);
    expect(receipt).toMatch(/- Pull request: \[#\d+\]/);

    // A change that is nothing but a CI definition: nothing is published, so the task is refused with
    // its own code, kept on the withheld branch, and no comment says "the rest was published" — both
    // when the publish after the turn finds it and when the agent's tool does during the turn.
    for (const how of ['workflow-only', 'workflow-only publish-tool']) {
      const m = await env.gitea.createIssue('alice', `Only CI (${how})`);
      const only = await mention(m, how);
      const dOnly = await waitForTask(only);
      expect(dOnly.task.state, JSON.stringify(dOnly.task)).toBe('failed');
      expect(dOnly.task.errorCode).toBe('publish_paths_all_withheld');
      expect((dOnly.publish as { withheld?: { paths: string[] } } | null)?.withheld?.paths).toEqual(['.gitea/workflows/x.yml']);
      expect(await branchSha(`ccweb/issue-${m}`)).toBeNull();
      const onlyReceipt = await finalReceipt(m, only);
      expect(onlyReceipt.split('\n')[0]).toContain(`failed (task ${only})`);
      expect(onlyReceipt).toContain('Error code `publish_paths_all_withheld`: every file the change touched is one the bot may not commit');
      expect(onlyReceipt).toContain(`Not committed: \`.gitea/workflows/x.yml\``);
      expect(onlyReceipt).toContain(`ccweb-kept/${only}-withheld`);
      const thread = async () => (await env.gitea.comments(m)).filter((c) => c.user.login === env.gitea.users.bot.login).map((c) => c.body);
      const until = Date.now() + 20_000;
      while (!(await thread()).some((b) => b.includes(`task ${only} failed`)) && Date.now() < until) await new Promise((r) => setTimeout(r, 250));
      const failure = (await thread()).filter((b) => b.includes(`task ${only} failed`));
      expect(failure).toHaveLength(1);
      expect(failure[0]).toContain(`ccweb-kept/${only}-withheld`);
      expect((await thread()).filter((b) => /rest of the change was published/.test(b))).toEqual([]);
    }

    // A commit the service did not make (an agent running git itself, isolation off) that adds a workflow:
    // it cannot be split, so nothing is published; the change is kept and the branch is untouched.
    const branchBefore = await branchSha(branch);
    writeFileSync(join(wt, 'NOTE.md'), 'by the agent\n');
    execFileSync('mkdir', ['-p', join(wt, '.github', 'workflows')]);
    writeFileSync(join(wt, '.github', 'workflows', 'z.yml'), 'on: push\n');
    execFileSync('git', ['add', '-A'], { cwd: wt });
    execFileSync('git', ['-c', 'user.name=agent', '-c', 'user.email=agent@example.invalid', 'commit', '-qm', 'agent commit'], { cwd: wt });
    const sneaky = await mention(n, 'just answer');
    const ds = await waitForTask(sneaky);
    expect(ds.task.state, JSON.stringify(ds.task)).toBe('failed');
    expect(ds.task.errorCode).toBe('publish_protected_paths');
    expect(await branchSha(branch)).toBe(branchBefore);
    expect(readFileSync(ds.publish!.kept!.patchFile, 'utf8')).toContain('.github/workflows/z.yml');
    expect(execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: wt, encoding: 'utf8' })).toBe('');

    // The operator allows CI changes on this repository (audited): the next change commits it.
    const res = await fetch(`${env.service!.url}/api/gitea-workflow/repos/${encodeURIComponent(`default:${owner()}/${repo()}`)}/publish-paths`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${env.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ requestId: `ci-${n}-allow-1`, operator: 'ops', reason: 'CI of this repository is reviewed', allowCiChanges: true, protectedPaths: [] }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const second = await mention(n, 'change-file and add-workflow again');
    const d2 = await waitForTask(second);
    expect(d2.task.state, JSON.stringify(d2.task)).toBe('succeeded');
    expect(await fileOn(branch, '.gitea/workflows/x.yml')).toBe('on: push\njobs: {}\n');
    expect((d2.publish as { withheld?: unknown } | null)?.withheld ?? null).toBeNull();
    // Back to the default, so the later tests run as before.
    await fetch(`${env.service!.url}/api/gitea-workflow/repos/${encodeURIComponent(`default:${owner()}/${repo()}`)}/publish-paths`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${env.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ requestId: `ci-${n}-allow-2`, operator: 'ops', reason: 'back to the default', allowCiChanges: false }),
    });
  }, 180_000);

  it('/metrics counts publish outcomes', async () => {
    const count = async (outcome: string) => {
      const text = await (await fetch(`${env.service!.url}/metrics`)).text();
      return Number(new RegExp(`^ccweb_publish_total\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
    };
    const before = await count('published');
    const n = await env.gitea.createIssue('alice', 'Counted');
    expect((await waitForTask(await mention(n, 'change-file please'))).task.state).toBe('succeeded');
    expect(await count('published')).toBe(before + 1);
  });

  it('CCWEB_DELIVERY=branch pushes the branch and opens no pull request', async () => {
    env.env.CCWEB_DELIVERY = 'branch';
    await env.service!.stop();
    await env.startService();
    const n = await env.gitea.createIssue('alice', 'Branch only');
    const taskId = await mention(n, 'change-file please');
    const d = await waitForTask(taskId);
    expect(d.task.state).toBe('succeeded');
    expect(await fileOn(`ccweb/issue-${n}`, 'CHANGES.md')).toBe(`change by task ${taskId}\n`);
    expect((await asOwner<Pull[]>('GET', '/pulls?state=all&limit=50')).filter((p) => p.head.ref === `ccweb/issue-${n}`)).toHaveLength(0);
    expect(d.publish?.status).toBe('published');
    expect(d.publish?.pullRequest).toBeNull();
  });

  it('CCWEB_DELIVERY=off pushes nothing, leaves the worktree clean, keeps the change and tells the user once', async () => {
    env.env.CCWEB_DELIVERY = 'off';
    await env.service!.stop();
    await env.startService();
    const n = await env.gitea.createIssue('alice', 'Off');
    const taskId = await mention(n, 'change-file please');
    const d = await waitForTask(taskId);
    expect(d.task.state).toBe('succeeded');
    expect(await branchSha(`ccweb/issue-${n}`)).toBeNull();
    expect(d.publish?.status).toBe('not_published');
    expect(readFileSync(d.publish!.kept!.patchFile, 'utf8')).toContain(`+change by task ${taskId}`);
    const wt = join(env.workspaceRoot, 'default', '.worktrees', owner(), repo(), `issue-${n}`);
    expect(execFileSync('git', ['status', '--porcelain'], { cwd: wt, encoding: 'utf8' })).toBe('');
    const notices = async () => (await env.gitea.comments(n)).filter((c) => c.body.includes(`changes of task ${taskId} were not published`));
    const deadline = Date.now() + 20_000;
    while ((await notices()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    expect(await notices()).toHaveLength(1);
    expect((await notices())[0]!.body).toContain(`ccweb-kept/${taskId}`);
    delete env.env.CCWEB_DELIVERY;
  });

  it('no token in any workspace file, remote URL, git config, log line or stored record', async () => {
    const token = env.botToken;
    const hits: string[] = [];
    const scan = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const p = join(dir, name);
        const st = statSync(p, { throwIfNoEntry: false });
        if (!st) continue;
        if (st.isDirectory()) scan(p);
        else if (st.isFile() && st.size < 50 * 1024 * 1024 && readFileSync(p).includes(token)) hits.push(p);
      }
    };
    scan(env.dataDir);
    expect(hits).toEqual([]);
    expect(env.service!.lines.filter((l) => l.includes(token))).toEqual([]);
    // Arguments of every git command run (pushes and fetches included): the token is never one.
    const gitArgs = readFileSync(env.gitArgsLog, 'utf8');
    expect(gitArgs).toMatch(/^push /m);
    expect(gitArgs.split('\n').filter((l) => l.includes(token))).toEqual([]);
    const shared = join(env.workspaceRoot, 'default', owner(), repo());
    const config = execFileSync('git', ['config', '--list', '--show-origin'], { cwd: shared, encoding: 'utf8' });
    expect(config).not.toContain(token);
    expect(config).not.toMatch(/extraheader/i);
    const remotes = execFileSync('git', ['remote', '-v'], { cwd: shared, encoding: 'utf8' });
    expect(remotes).not.toMatch(/@/);
  });
});
