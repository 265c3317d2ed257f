// The receipt as the task's tracking comment, against a REAL Gitea 1.26: the real service
// process, the real Codex app-server with the scripted model (which edits CHANGES.md through Codex's
// shell tool, so change delivery opens a pull request), the real gitea-mcp.
//
// Gitea 1.26's API offers no edit history of a comment to rely on (none is documented for it), so the stages are proven twice over: the test reads the receipt on Gitea while the
// task runs and keeps every distinct body it saw, and the service's own audit events
// (`receipt.progress_edited`, one per edit Gitea took, with the stage and the body's hash) are checked
// against the bodies: the last one's hash is the receipt's body on Gitea now.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-receipt-progress-'));
let env: PublishEnvironment;
const FINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'blocked_workspace', 'cancelled', 'aborted'];

interface AuditRow {
  action: string;
  toState: string | null;
  commentId?: number | null;
  metadata?: Record<string, unknown>;
}
interface TaskDetail {
  task: { taskId: string; state: string };
  publish: { pullRequest: { number: number; url: string } | null; branch: string | null } | null;
  comments: Array<{ commentKey: string; kind: string; commentId: number | null; status: string }>;
  audit: AuditRow[];
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${env.service!.url}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return (await res.json()) as T;
}

const waitForTask = (taskId: string, states = FINAL, timeoutMs = 120_000) => waitForTaskState((p) => api<TaskDetail>(p), taskId, states, timeoutMs);
const sha = (body: string) => `sha256:${createHash('sha256').update(body, 'utf8').digest('hex')}`;
const bot = () => env.gitea.users.bot.login;

/** alice mentions the bot on a new issue; resolves with the issue and the task's id. */
async function mentionOnNewIssue(title: string, text: string): Promise<{ n: number; taskId: string }> {
  const n = await env.gitea.createIssue('alice', title);
  const nonce = Math.random().toString(36).slice(2, 10);
  await env.gitea.comment('alice', n, `@ccweb-bot ${text} [${nonce}]`);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const list = await api<{ items: Array<{ taskId: string; instruction: string }> }>(`/tasks?pageSize=100`).catch(() => ({ items: [] }));
    const t = list.items.find((x) => x.instruction.includes(nonce));
    if (t) return { n, taskId: t.taskId };
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no task for [${nonce}]`);
}

async function receiptsOn(n: number): Promise<Array<{ id: number; body: string }>> {
  return (await env.gitea.comments(n)).filter((c) => c.user.login === bot() && c.body.includes('已收到')).map((c) => ({ id: c.id, body: c.body }));
}

/** Reads the receipt on Gitea until `until` holds, keeping every distinct body it showed. */
function watchReceipt(n: number): { seen: string[]; stop(): Promise<void> } {
  const seen: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const r = (await receiptsOn(n).catch(() => []))[0];
      if (r && seen.at(-1) !== r.body) seen.push(r.body);
      await new Promise((res) => setTimeout(res, 150));
    }
  })();
  return {
    seen,
    async stop() {
      running = false;
      await loop;
    },
  };
}

async function waitFor<T>(what: string, f: () => Promise<T | null | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const progressEdits = (d: TaskDetail) => d.audit.filter((e) => e.action === 'receipt.progress_edited');

beforeAll(async () => {
  env = await startPublishEnvironment(root);
  env.env['CCWEB_RECEIPT_EDIT_INTERVAL_SECONDS'] = '1';
  env.env['CCWEB_LOCALE'] = 'zh'; // the default language (English is in test/unit/receipt-progress.test.ts)
  await env.startService();
}, 240_000);

afterAll(async () => {
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('the receipt shows the task\'s progress, edited in place, on a real Gitea [real gitea-mcp]', () => {
  it('queued → working (with the step) → done with the pull request link; one receipt comment, every edit audited', async () => {
    const { n, taskId } = await mentionOnNewIssue('Progress', 'please fix the flaky login test (change-file-pause)');
    const watch = watchReceipt(n);
    const d = await waitForTask(taskId);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    const pr = d.publish?.pullRequest;
    expect(pr?.url).toMatch(/\/pulls\/\d+$/);
    // The final edit comes after the last transition, at most one interval later.
    const final = await waitFor('the final edit', async () => {
      const r = (await receiptsOn(n))[0];
      return r?.body.includes('**阶段：** 已完成') ? r : null;
    });
    await watch.stop();

    // One receipt comment on the thread, its final text: the outcome with the links, duration, tokens.
    expect(await receiptsOn(n)).toHaveLength(1);
    expect(final.body).toContain(`合并请求：[#${pr!.number}](${pr!.url})`);
    expect(final.body).toMatch(new RegExp(`分支：\\[\`${d.publish!.branch}\`\\]\\(http://[^)]+/src/branch/ccweb/issue-${n}\\)`));
    const answer = d.comments.find((c) => c.kind === 'mcp_final' || c.kind === 'rest_fallback');
    expect(final.body).toContain(`回答：http://`);
    expect(final.body).toContain(`#issuecomment-${answer!.commentId}`);
    expect(final.body).toMatch(/用时 \d+.*，[\d,]+ 个 token/);
    // The thread holds the user's comment, the receipt and the answer: no comment per stage.
    expect((await env.gitea.comments(n)).filter((c) => c.user.login === bot())).toHaveLength(2);

    // What the test saw on Gitea: the plain receipt (queued), the agent working with its step, done.
    const stageOf = (b: string) => /\*\*阶段：\*\* ([^·\n]+)/.exec(b)?.[1]?.trim() ?? 'queued';
    // The final body was read by waitFor above; the watcher's last poll may come before it.
    const stages = [...watch.seen, final.body].map(stageOf).filter((s, i, a) => a[i - 1] !== s);
    expect(stages[0]).toBe('queued');
    expect(stages).toContain('智能体工作中');
    expect(stages.at(-1)).toBe('已完成');
    expect(watch.seen.some((b) => b.includes('当前步骤：运行命令 `sleep`'))).toBe(true);
    expect(watch.seen.some((b) => /已用时 \d+/.test(b))).toBe(true);

    // What the service says it did: each edit one audit event; the last one is the body on Gitea now.
    const after = await api<TaskDetail>(`/tasks/${taskId}`);
    const edits = progressEdits(after);
    expect(edits.map((e) => e.metadata?.['stage'])).toContain('working');
    expect(edits.at(-1)?.metadata).toMatchObject({ stage: 'done', final: true, bodyHash: sha(final.body) });
    expect(edits.every((e) => e.commentId === final.id)).toBe(true);
    for (const body of watch.seen.slice(1)) expect(edits.map((e) => e.metadata?.['bodyHash'])).toContain(sha(body));
  }, 240_000);

  it('kill -9 during a turn: no second receipt, and the final edit still lands after the restart', async () => {
    const { n, taskId } = await mentionOnNewIssue('Progress restart', 'refactor the login module (slow-once change-file)');
    // The receipt showed the agent working before the crash (a progress edit is stored, not final).
    await waitFor('a working edit', async () => progressEdits(await api<TaskDetail>(`/tasks/${taskId}`)).some((e) => e.metadata?.['stage'] === 'working'));
    const deadline = Date.now() + 30_000; // the turn is in flight once Codex asked the model
    while (!env.model.responsesBodies().some((b) => JSON.stringify(b).includes(`taskId=${taskId}`)) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
    }
    await env.service!.kill9();
    await env.startService();
    const d = await waitForTask(taskId, FINAL, 180_000);
    expect(d.task.state, JSON.stringify(d.task)).toBe('succeeded');
    expect(JSON.stringify(d.audit)).toContain('interrupted_by_restart');
    const final = await waitFor('the final edit after the restart', async () => {
      const r = (await receiptsOn(n))[0];
      return r?.body.includes('**阶段：** 已完成') ? r : null;
    });
    expect(final.body).toContain(`(${d.publish!.pullRequest!.url})`);
    expect(await receiptsOn(n)).toHaveLength(1);
    expect((await env.gitea.comments(n)).filter((c) => c.user.login === bot())).toHaveLength(2);
    const edits = progressEdits(await api<TaskDetail>(`/tasks/${taskId}`));
    expect(edits.filter((e) => e.metadata?.['final'] === true)).toHaveLength(1);
    expect(edits.at(-1)?.metadata?.['bodyHash']).toBe(sha(final.body));
  }, 300_000);

  it('a restart after the final edit re-renders without editing again', async () => {
    const count = async () => {
      const list = await api<{ items: Array<{ taskId: string }> }>(`/tasks?pageSize=100`);
      let total = 0;
      for (const t of list.items) total += progressEdits(await api<TaskDetail>(`/tasks/${t.taskId}`)).length;
      return total;
    };
    const edits = await count();
    await env.service!.stop();
    await env.startService();
    await new Promise((r) => setTimeout(r, 3_000)); // three intervals: any re-edit would have happened
    expect(await count()).toBe(edits);
  }, 120_000);
});
