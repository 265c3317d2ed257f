// A mention longer than the agent can take, end to end against a REAL Gitea
// 1.26 and the real service process with the real Codex app-server (scripted model). A writer posts
// a comment one character over the limit: Gitea delivers it, the service refuses it at intake with
// ONE comment naming the limit, no task runs, nothing is retried, and the store keeps only a preview
// of the text. One at exactly the limit is accepted, and the real app-server takes its turn (the
// framing around the comment fits Codex's own 1,048,576-character limit).
import { readdirSync, readFileSync, statSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMENT_MAX_CHARS } from '../../src/domain/agent-input.js';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { COLLECTIONS, createStore } from '../../src/store/index.js';
import type { HookDelivery } from '../support/real-gitea/index.js';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-oversized-'));
let env: RealServiceEnvironment;
let service: ServiceProcess | null = null;
const TERMINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'cancelled', 'aborted', 'rejected'];
const MENTION = '@ccweb-bot please read this: ';
/** Fillers nothing else writes, so a run of one in the data directory can only be that comment's text. */
const REFUSED_FILL = 'Q';
const ACCEPTED_FILL = 'Z';

interface TaskDetail {
  task: { taskId: string; state: string; errorCode: string | null };
  turns: Array<{ turnKey: string; status: string }>;
  comments: Array<{ commentKey: string; kind: string; status: string; commentId: number | null }>;
  audit: Array<{ action: string; toState: string | null }>;
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${service!.url}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return (await res.json()) as T;
}

const payloadCommentId = (d: HookDelivery): number | null => {
  try {
    return (JSON.parse(d.payload) as { comment?: { id?: number } }).comment?.id ?? null;
  } catch {
    return null;
  }
};

async function userComment(index: number, body: string) {
  const c = await env.gitea.comment('alice', index, body);
  const delivery = await env.gitea.waitForDelivery(env.hookId, (d) => payloadCommentId(d) === c.id, 60_000);
  return { delivery, answer: JSON.parse(delivery.responseBody || '{}') as Record<string, unknown> };
}

const botComments = async (index: number) => (await env.gitea.comments(index)).filter((c) => c.user.login === 'ccweb-bot').map((c) => c.body);

/** A comment of exactly `chars` characters that mentions the bot. */
const commentOf = (chars: number, fill: string) => MENTION + fill.repeat(chars - MENTION.length);

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
}

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  // The notice is asserted in English; the Chinese wording is checked in test/unit/receipts-text.test.ts.
  service = await startServiceProcess({ ...env.env, CCWEB_LOCALE: 'en' });
}, 600_000);

afterAll(async () => {
  await service?.stop().catch(() => undefined);
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('a mention longer than the agent can take, against a real Gitea [real gitea-mcp]', () => {
  let refusedIssue = 0;
  let refusedTaskId = '';

  it('one character over the limit: refused at intake with one comment naming the limit; no task runs, nothing retried', { timeout: 120_000 }, async () => {
    refusedIssue = await env.gitea.createIssue('alice', 'a very long request');
    const requestsBefore = env.model.responsesBodies().length;
    const r = await userComment(refusedIssue, commentOf(COMMENT_MAX_CHARS + 1, REFUSED_FILL));
    console.log(`over the limit: webhook of ${r.delivery.payload.length} bytes answered ${r.delivery.status} ${JSON.stringify(r.answer)}`);
    expect(r.delivery.status).toBe(200);
    expect(r.answer).toMatchObject({ status: 'rejected', reason: 'input_too_large' });
    refusedTaskId = String(r.answer['taskId']);

    const d = await waitForTaskState((p) => api<TaskDetail>(p), refusedTaskId, TERMINAL, 30_000);
    expect(d.task.state).toBe('rejected');
    expect(d.audit.map((a) => a.action)).toContain('webhook.input_too_large');
    // The one comment, once the outbox posted it.
    const bodies = await (async () => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const b = await botComments(refusedIssue);
        if (b.length > 0 || Date.now() > deadline) return b;
        await new Promise((res) => setTimeout(res, 200));
      }
    })();
    console.log(`the notice: ${bodies[0]?.split('\n')[0]}`);
    expect(bodies).toHaveLength(1);
    expect(bodies[0]).toContain('giteabot: not started');
    expect(bodies[0]).toContain('1,000,001 characters');
    expect(bodies[0]).toContain('1,000,000 characters');
    expect(bodies[0]).toContain('`input_too_large`');
    expect(bodies[0]).not.toMatch(/unexpected/i);

    // Long enough for a wrongly started task or a retry (the old path retried after 30 s was
    // preceded by a turn within a second) to show itself: nothing ran, nothing more was said.
    await new Promise((res) => setTimeout(res, 3_000));
    const after = await api<TaskDetail>(`/tasks/${refusedTaskId}`);
    expect(after.task.state).toBe('rejected');
    expect(after.turns).toEqual([]);
    expect(env.model.responsesBodies().length).toBe(requestsBefore);
    expect(await botComments(refusedIssue)).toHaveLength(1);
  });

  it('exactly at the limit: accepted (202), and the real app-server takes the turn', { timeout: 180_000 }, async () => {
    const issue = await env.gitea.createIssue('alice', 'a long but acceptable request');
    const r = await userComment(issue, commentOf(COMMENT_MAX_CHARS, ACCEPTED_FILL));
    expect(r.delivery.status).toBe(202);
    const d = await waitForTaskState((p) => api<TaskDetail>(p), String(r.answer['taskId']), TERMINAL, 150_000);
    console.log(`at the limit: task ${d.task.state}, turns ${d.turns.map((t) => t.status).join(',')}`);
    expect(d.task.state).toBe('succeeded');
    // The scripted model received the whole comment: Codex did not refuse the turn.
    const sent = env.model.responsesBodies().map((b) => JSON.stringify(b));
    expect(sent.some((t) => t.includes(ACCEPTED_FILL.repeat(COMMENT_MAX_CHARS - MENTION.length)))).toBe(true);
  });

  it("the refused comment's text is not kept: the task record holds a preview and the length", { timeout: 60_000 }, async () => {
    await service!.stop();
    const lines = service!.lines;
    service = null;
    const dataDir = env.env['CCWEB_DATA_DIR']!;
    const store = createStore({ dir: join(dataDir, 'store'), indexes: STORE_INDEXES });
    await store.open();
    const task = await store.get<{ instruction: string; instructionLength?: number; instructionRef?: string }>('tasks', refusedTaskId);
    const archived: { taskId: string }[] = [];
    for await (const t of store.scanArchived<{ taskId: string }>('task_texts')) archived.push(t);
    const texts = [...(await store.list<{ taskId: string }>('task_texts')), ...archived].filter((t) => t.taskId === refusedTaskId).length;
    // Everything the store holds, as text: SQLite keeps a long value in pages of its file, not in one run of bytes.
    let held = JSON.stringify(await store.audit());
    for (const collection of COLLECTIONS) {
      held += JSON.stringify(await store.list(collection));
      for await (const r of store.scanArchived(collection)) held += JSON.stringify(r);
    }
    await store.close();
    expect(task?.instruction.length).toBeLessThanOrEqual(4096);
    expect(task?.instructionLength).toBe(COMMENT_MAX_CHARS + 1);
    expect(task?.instructionRef).toBeUndefined();
    expect(texts).toBe(0);
    // Nowhere else either: neither the store nor any other file of the data directory holds more of it than the preview.
    const run = REFUSED_FILL.repeat(2 * 4096);
    const acceptedRun = ACCEPTED_FILL.repeat(2 * 4096);
    const others = filesUnder(dataDir).filter((f) => !f.startsWith(join(dataDir, 'store') + '/') && statSync(f).size >= run.length);
    const holders = [...(held.includes(run) ? ['the store'] : []), ...others.filter((f) => readFileSync(f, 'latin1').includes(run))];
    // The accepted comment's text is there, stored once per design (the check finds what it looks for).
    const accepted = [...(held.includes(acceptedRun) ? ['the store'] : []), ...others.filter((f) => readFileSync(f, 'latin1').includes(acceptedRun)).map((f) => f.slice(dataDir.length))];
    console.log(`data dir: refused text in ${holders.length} place(s); accepted text in ${accepted.join(', ')}`);
    expect(holders).toEqual([]);
    expect(lines.filter((l) => l.includes(run))).toEqual([]);
    expect(accepted).toContain('the store');
  });
});
