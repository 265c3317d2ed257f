// Usage and budgets end to end: the real service process, the real Codex app-server and
// the scripted model reporting usage in `response.completed.usage` (so the app-server emits
// `thread/tokenUsage/updated`), the sandbox Gitea. Cases run in order and share the user's daily
// count: a task over its token budget is interrupted and its receipt is edited to name the limit;
// the user's next mention over the daily quota gets one refusal comment and runs nothing; an
// operator lifts the quota for the repository (audited); a provider 429 holds the queue and it
// resumes; the admin page shows the usage tables in real Chromium; a task parked in blocked_workspace
// is told so in its receipt, and told again (same comment) when an operator unblocks it.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedAgent } from '../../src/demo/scripted-agent.js';
import { startSandboxEnvironment, type SandboxEnvironment } from '../../src/demo/sandbox-environment.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '../../test-artifacts/screenshots');
const root = mkdtempSync(join(tmpdir(), 'ccweb-usage-'));
const REPO = 'default:acme/widget';
const HOLD_SECONDS = 6;
let env: SandboxEnvironment;
let service: ServiceProcess;

interface Detail {
  task: { taskId: string; state: string; errorCode: string | null; usage?: { totalTokens: number; inputTokens: number; cachedInputTokens: number; outputTokens: number; turns: number; wallMs: number; model: string | null } };
  turns: Array<{ turnKey: string; status: string; usage?: { totalTokens: number; model: string | null; wallMs: number } }>;
  comments: Array<{ commentKey: string; kind: string; status: string; commentId: number | null }>;
  audit: Array<{ action: string; toState: string | null; timestamp: string; errorCode?: string | null }>;
}

async function api<T>(path: string, init: RequestInit = {}): Promise<{ status: number; body: T }> {
  const res = await fetch(`${service.url}/api/gitea-workflow${path}`, {
    ...init,
    headers: { Authorization: `Bearer ${env.adminToken}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  return { status: res.status, body: (await res.json()) as T };
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const task = (id: string) => api<Detail>(`/tasks/${id}`).then((r) => r.body);
const waitForState = (id: string, states: string[]) => waitFor(`${id} in ${states.join('|')}`, async () => {
  const d = await task(id);
  return states.includes(d.task.state) ? d : undefined;
});
const botComments = (index: number) => env.gitea.comments(index).filter((c) => (c.user as { login: string }).login === 'ccweb-bot').map((c) => String(c.body));

async function mention(index: number, body: string) {
  const { delivery } = await env.gitea.comment('alice', index, body);
  return { status: delivery.status, body: JSON.parse(delivery.responseBody || '{}') as Record<string, unknown> };
}

beforeAll(async () => {
  env = await startSandboxEnvironment(root);
  for (const n of [3, 4, 5, 6, 8, 9, 10]) env.gitea.double.addIssue('acme', 'widget', { number: n, title: `issue ${n}`, user: 'alice' });
  // Every response reports 10 input / 5 output tokens, except the "burn" task's, which reports a lot
  // and then keeps the turn running (a shell command, then a stall) so the budget must interrupt it.
  const agent = scriptedAgent();
  env.model.setResponder((body) => {
    const text = JSON.stringify(body);
    if (text.includes('burn the budget')) {
      const calls = (Array.isArray(body?.input) ? body.input : []).filter((i: { type?: string }) => i.type === 'function_call_output').length;
      return calls === 0 ? { type: 'shell', command: 'sleep 20', usage: { input: 900, output: 300, cachedInput: 400 } } : { type: 'stall' };
    }
    return agent(body);
  });
  service = await startServiceProcess({
    ...env.env,
    CCWEB_LIMIT_TASK_TOKENS: '1000',
    CCWEB_LIMIT_USER_TASKS_PER_DAY: '2',
    CCWEB_PROVIDER_BACKOFF_SECONDS: String(HOLD_SECONDS),
    // The notices' wording is asserted in English; the Chinese (default) wording is checked in
    // test/unit/usage-quota.test.ts and test/integration/receipt-notices.test.ts.
    CCWEB_LOCALE: 'en',
  });
  env.gitea.connectWebhook(`${service.url}/api/gitea/webhook`, env.webhookSecret);
}, 90_000);

afterAll(async () => {
  await service?.stop().catch(() => undefined);
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('usage and budgets against the real app-server [real gitea-mcp]', () => {
  it('a task over its token budget is interrupted; its receipt is edited to name the limit; no other comment', async () => {
    const r = await mention(3, '@ccweb-bot please burn the budget');
    expect(r.status).toBe(202);
    const id = String(r.body['taskId']);
    const d = await waitForState(id, ['failed', 'succeeded', 'failed_reply', 'succeeded_with_rest_fallback']);
    expect(d.task.state).toBe('failed');
    expect(d.task.errorCode).toBe('budget_task_tokens');
    // Usage as the app-server reported it: 900 in (400 cached) + 300 out on the one response.
    expect(d.task.usage).toMatchObject({ inputTokens: 900, cachedInputTokens: 400, outputTokens: 300, totalTokens: 1200, turns: 1, model: 'fake-model' });
    expect(d.turns).toHaveLength(1);
    expect(d.turns[0]!.status).toBe('interrupted');
    expect(d.turns[0]!.usage?.totalTokens).toBe(1200);
    // The agent was interrupted through turn/interrupt: only one model request for this task.
    const notice = await waitFor('the receipt edit', async () => d.comments && (await task(id)).comments.find((c) => c.kind === 'notice' && c.status === 'sent'));
    const bodies = botComments(3);
    expect(bodies).toHaveLength(1);
    expect(bodies[0]).toContain('giteabot: received');
    expect(bodies[0]).toContain('budget_task_tokens');
    expect(bodies[0]).toContain('1,200 tokens');
    expect(bodies[0]).toContain('1,000 tokens per task');
    expect(notice.commentId).not.toBeNull();
    // No failure receipt row: the edit is the one message.
    expect((await task(id)).comments.filter((c) => c.kind === 'status').map((c) => c.commentKey)).toEqual([`${id}:status:received`]);
  });

  it("the user's next task runs; the one after it is over the daily quota: one refusal comment, no task runs", async () => {
    const ok = await mention(4, '@ccweb-bot summarise the README');
    const okId = String(ok.body['taskId']);
    const done = await waitForState(okId, ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback']);
    expect(done.task.state).toBe('succeeded');
    expect(done.task.usage?.totalTokens).toBeGreaterThan(0);

    const requestsBefore = env.model.responsesBodies().length;
    const r = await mention(5, '@ccweb-bot and now fix the login test');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'rejected', reason: 'quota_user_tasks_per_day' });
    const id = String(r.body['taskId']);
    const comment = await waitFor('the refusal comment', async () => botComments(5)[0]);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    expect(comment).toContain('not started');
    expect(comment).toContain('2 tasks today');
    expect(comment).toContain(`after ${tomorrow} 00:00 UTC`);
    // Give a wrongly started task time to show itself, then check nothing ran and nothing else was said.
    await new Promise((res) => setTimeout(res, 1500));
    const d = await task(id);
    expect(d.task.state).toBe('rejected');
    expect(d.turns).toHaveLength(0);
    expect(botComments(5)).toHaveLength(1);
    expect(env.model.responsesBodies().length).toBe(requestsBefore);
  });

  it('an operator lifts the quota for the repository through the control API (audited, idempotent)', async () => {
    const body = { requestId: 'usage-e2e-lift-1', operator: 'ops', reason: 'release day', limits: { userTasksPerDay: null, taskTokens: 50_000 } };
    const first = await api<Record<string, unknown>>(`/repos/${encodeURIComponent(REPO)}/limits`, { method: 'POST', body: JSON.stringify(body) });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ ok: true, limits: { userTasksPerDay: null, taskTokens: 50_000 }, version: 1 });
    const again = await api<Record<string, unknown>>(`/repos/${encodeURIComponent(REPO)}/limits`, { method: 'POST', body: JSON.stringify(body) });
    expect(again.body).toEqual(first.body);
    const audit = await api<{ events: Array<{ action: string; actor: string; metadata: Record<string, unknown> }> }>('/audit?limit=5000');
    const changes = audit.body.events.filter((e) => e.action === 'control.repo_limits');
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ actor: 'admin:ops', metadata: { repoKey: REPO, reason: 'release day' } });
  });

  it('a provider 429 holds new claims until the reset (visible in /readyz) and the queue resumes', async () => {
    // The provider refuses the next model request with 429 (the app-server's own retries are off).
    env.model.push({ type: 'fail', status: 429, body: JSON.stringify({ error: { message: 'Rate limit reached', type: 'rate_limit_exceeded' } }) });
    const a = await mention(6, '@ccweb-bot first after the limit');
    const aId = String(a.body['taskId']);
    const waiting = await waitForState(aId, ['retry_wait', 'failed', 'succeeded']);
    expect(waiting.task.state).toBe('retry_wait');
    expect(waiting.task.errorCode).toBe('provider_rate_limited');

    const ready = (await (await fetch(`${service.url}/readyz`)).json()) as { providerHold: { held: boolean; heldUntil: string; reason: string } };
    expect(ready.providerHold).toMatchObject({ held: true, reason: 'provider_refused_turn' });
    const heldUntil = Date.parse(ready.providerHold.heldUntil);
    expect(heldUntil).toBeGreaterThan(Date.now());

    // A new mention while held: queued, not claimed, no model request, until the hold ends.
    const requestsBefore = env.model.responsesBodies().length;
    const b = await mention(8, '@ccweb-bot second after the limit');
    const bId = String(b.body['taskId']);
    await new Promise((res) => setTimeout(res, Math.max(0, heldUntil - Date.now() - 1500)));
    expect((await task(bId)).task.state).toBe('queued');
    expect((await task(aId)).task.state).toBe('retry_wait');
    expect(env.model.responsesBodies().length).toBe(requestsBefore);

    const da = await waitForState(aId, ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback']);
    const db = await waitForState(bId, ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback']);
    expect([da.task.state, db.task.state]).toEqual(['succeeded', 'succeeded']);
    const claimedAt = (d: Detail, state: string) => Date.parse(d.audit.filter((e) => e.toState === state).at(-1)!.timestamp);
    expect(claimedAt(da, 'preparing')).toBeGreaterThanOrEqual(heldUntil);
    expect(claimedAt(db, 'preparing')).toBeGreaterThanOrEqual(heldUntil);
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(metrics).toMatch(/ccweb_provider_hold_seconds 0/);
    expect(metrics).toMatch(/ccweb_task_budget_stops_total\{limit="budget_task_tokens"\} 1/);
    expect(metrics).toMatch(/ccweb_codex_tokens_total\{kind="input"\} \d+/);
  });

  it('the usage API and the admin page show the per-repository and per-user tables (real Chromium)', async () => {
    const u = await api<{ byRepository: Array<{ subject: string; tasks: number; refused: number; totalTokens: number; budgetStops: number }>; byUser: Array<{ subject: string; tasks: number; totalTokens: number }> }>('/usage?days=7');
    expect(u.status).toBe(200);
    const repo = u.body.byRepository.find((r) => r.subject === REPO)!;
    expect(repo).toMatchObject({ tasks: 4, refused: 1, budgetStops: 1 });
    expect(repo.totalTokens).toBeGreaterThan(1200);
    expect(u.body.byUser.find((r) => r.subject === 'alice')?.totalTokens).toBe(repo.totalTokens);

    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH.`);
    mkdirSync(SHOTS, { recursive: true });
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${service.url}/admin`);
      await page.fill('#token', env.adminToken);
      await page.fill('#operator', 'ops');
      await page.click('#sign-in');
      const row = await page.waitForSelector(`#usage-repos tr[data-subject="${REPO}"]`);
      expect(await row.getAttribute('data-total-tokens')).toBe(String(repo.totalTokens));
      await page.waitForSelector('#usage-users tr[data-subject="alice"]');
      expect(await page.textContent('#provider-hold')).toContain('not held');
      expect(await page.textContent('#usage-limits')).toContain('1,000 tokens/task');
      await page.$eval('#usage', (e) => e.scrollIntoView());
      await page.screenshot({ path: join(SHOTS, 'admin-usage.png'), fullPage: true });
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  });

  it('a task parked in blocked_workspace tells its user once, by editing its receipt', async () => {
    // Each issue/PR has its own worktree (change delivery), so only the same issue's next task can find
    // leftovers. Leftovers in issue 10's worktree, as a failed run would leave them:
    const first = await mention(10, '@ccweb-bot first look');
    await waitForState(String(first.body['taskId']), ['succeeded']);
    writeFileSync(join(env.env.CCWEB_DATA_DIR!, 'workspaces', 'default', '.worktrees', 'acme', 'widget', 'issue-10', 'stray.txt'), 'stray\n');
    const r = await mention(10, '@ccweb-bot next one');
    const id = String(r.body['taskId']);
    await waitForState(id, ['blocked_workspace']);
    await waitFor('the receipt edit', async () => (await task(id)).comments.find((c) => c.kind === 'notice' && c.status === 'sent'));
    const bodies = botComments(10).filter((b) => b.includes(id));
    expect(bodies).toHaveLength(1);
    expect(bodies[0]).toContain('giteabot: received');
    expect(bodies[0]).toContain(`**Paused:**`);
    expect(bodies[0]).toContain(`unblock task ${id}`);

    // The operator cleans the workspace and unblocks the task: it runs, and its receipt is edited
    // back to the plain receipt with a note that it resumed (no longer "Paused"), once.
    for (const stray of (readdirSync(root, { recursive: true }) as string[]).filter((p) => basename(p) === 'stray.txt')) rmSync(join(root, stray));
    const unblock = await api<Record<string, unknown>>(`/tasks/${id}/unblock`, { method: 'POST', body: JSON.stringify({ requestId: 'usage-e2e-unblock-1', operator: 'ops', reason: 'workspace cleaned' }) });
    expect(unblock.status).toBe(200);
    const done = await waitForState(id, ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'blocked_workspace']);
    expect(done.task.state).toBe('succeeded');
    await waitFor('the resumed edit', async () => (await task(id)).comments.find((c) => c.commentKey === `${id}:notice:resumed` && c.status === 'sent'));
    const receipt = botComments(10).find((b) => b.includes(id))!;
    expect(receipt).toContain('giteabot: received');
    expect(receipt).toContain(`**Resumed:** an operator unblocked task ${id}`);
    expect(receipt).not.toContain('Paused');
    expect((await task(id)).comments.filter((c) => c.kind === 'notice').map((c) => c.status)).toEqual(['sent', 'sent']);
  });
});
