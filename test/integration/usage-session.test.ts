// Usage accounting, per-task budgets and provider rate limits at the session manager, against the
// REAL `codex app-server` and the scripted model reporting usage (`response.completed.usage`) and
// rate-limit headers: what the app-server emits (`thread/tokenUsage/updated`,
// `account/rateLimits/updated`, a failed turn's `codexErrorInfo`) is what is recorded and enforced.
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskRecord, TurnRecord } from '../../src/domain/records.js';
import { createProviderHold } from '../../src/usage/provider-hold.js';
import { createUsageAccounting } from '../../src/usage/usage-accounting.js';
import { dayKey, utcDay, type UsageDayRecord, type UsageLimits } from '../../src/domain/usage-records.js';
import { leaseFence } from '../../src/leases/lease-fence.js';
import { sessionFixture, type SessionFixture } from '../support/codex-session-fixture.js';
import { grantTestLeaseIn } from '../support/test-lease.js';

let fx: SessionFixture | null = null;
afterEach(async () => {
  await fx?.cleanup();
  fx = null;
});

const REPO_KEY = 'default:acme/widget';

async function setup(steps: Parameters<typeof sessionFixture>[0], limits: UsageLimits = {}, backoffMs = 60_000) {
  fx = await sessionFixture(steps);
  const f = fx;
  const hold = await createProviderHold({ store: f.store, defaultBackoffMs: backoffMs });
  const usage = createUsageAccounting({ store: f.store, limits, providerHold: hold });
  const mgr = f.manager({ usage });
  f.supervisor.onReady((conn) => {
    conn.on('notification', (e) => {
      if (e.notification.method === 'account/rateLimits/updated') hold.observeRateLimits(e.notification.params);
    });
  });
  await f.supervisor.start();
  return { f, mgr, hold, usage };
}

const task = async (f: SessionFixture, id: string) => (await f.store.get<TaskRecord>('tasks', id))!;
const turn = async (f: SessionFixture, key: string) => (await f.store.get<TurnRecord>('turns', key))!;

describe('usage accounting with the real app-server [real gitea-mcp]', () => {
  it('records each turn and sums per task, repository and user; a repeated total is not counted twice', async () => {
    const resetAt = Math.floor(Date.now() / 1000) + 3600;
    const { f, mgr } = await setup([
      { type: 'shell', command: 'echo hi > note.txt', usage: { input: 1200, output: 300, cachedInput: 1000, reasoningOutput: 40 } },
      { type: 'message', text: 'done', usage: { input: 1400, output: 20 } },
      // A provider refusal: Codex re-sends the thread's last usage, which must not count again.
      { type: 'fail', status: 429, body: JSON.stringify({ error: { message: 'usage limit', type: 'usage_limit_reached', resets_at: resetAt, plan_type: 'plus' } }) },
    ]);
    const t = await f.task('task-u');
    await mgr.ensureThread(t, f.workspace);
    const first = await mgr.runTurn(await task(f, 'task-u'), { kind: 'normal', cwd: f.workspace });
    expect(first.kind).toBe('no_comment');
    expect((await turn(f, 'task-u:1')).usage).toMatchObject({ inputTokens: 2600, cachedInputTokens: 1000, outputTokens: 320, reasoningOutputTokens: 40, totalTokens: 2920, model: 'fake-model' });
    expect((await turn(f, 'task-u:1')).usage!.wallMs).toBeGreaterThan(0);

    const second = await mgr.runTurn(await task(f, 'task-u'), { kind: 'normal', cwd: f.workspace });
    expect(second).toMatchObject({ kind: 'failed', errorCode: 'provider_rate_limited', retryable: true });
    expect((await turn(f, 'task-u:2')).usage?.totalTokens).toBe(0);

    expect((await task(f, 'task-u')).usage).toMatchObject({ turns: 2, totalTokens: 2920, inputTokens: 2600, outputTokens: 320, model: 'fake-model' });
    const day = utcDay(Date.now());
    expect(await f.store.get<UsageDayRecord>('usage', dayKey(day, 'repo', REPO_KEY))).toMatchObject({ turns: 2, totalTokens: 2920, cachedInputTokens: 1000 });
    expect(await f.store.get<UsageDayRecord>('usage', dayKey(day, 'user', 'alice'))).toMatchObject({ turns: 2, totalTokens: 2920 });
  }, 60_000);

  it('the wall-time budget interrupts the running turn: failed budget_task_wall_time, not retryable, turn interrupted', async () => {
    const { f, mgr } = await setup([{ type: 'stall' }], { taskWallMs: 1500 });
    const t = await f.task('task-w');
    await mgr.ensureThread(t, f.workspace);
    const t0 = Date.now();
    const out = await mgr.runTurn(await task(f, 'task-w'), { kind: 'normal', cwd: f.workspace });
    expect(out).toMatchObject({ kind: 'failed', errorCode: 'budget_task_wall_time', retryable: false });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect((await turn(f, 'task-w:1')).status).toBe('interrupted');
    expect((await task(f, 'task-w')).usage!.wallMs).toBeGreaterThanOrEqual(1400);
    // Spent: the next turn is refused before Codex is asked.
    const requests = f.model.responsesBodies().length;
    expect(await mgr.runTurn(await task(f, 'task-w'), { kind: 'normal', cwd: f.workspace })).toMatchObject({ kind: 'failed', errorCode: 'budget_task_wall_time', turnId: null });
    expect(f.model.responsesBodies().length).toBe(requests);
  }, 60_000);

  it('the turns budget refuses a turn beyond it without asking Codex', async () => {
    const { f, mgr } = await setup([{ type: 'message', text: 'one' }], { taskTurns: 1 });
    const t = await f.task('task-n');
    await mgr.ensureThread(t, f.workspace);
    expect((await mgr.runTurn(await task(f, 'task-n'), { kind: 'normal', cwd: f.workspace })).kind).toBe('no_comment');
    const out = await mgr.runTurn(await task(f, 'task-n'), { kind: 'normal', cwd: f.workspace });
    expect(out).toMatchObject({ kind: 'failed', errorCode: 'budget_task_turns', retryable: false });
    expect(f.model.responsesBodies()).toHaveLength(1);
    expect(await f.store.byIndex<TurnRecord>('turns', 'taskId', 'task-n')).toHaveLength(1);
  }, 60_000);
});

describe('provider rate limits from the real app-server [real gitea-mcp]', () => {
  it('a window reported exhausted (rate-limit headers) holds claims until its reset', async () => {
    const resetAt = Math.floor(Date.now() / 1000) + 900;
    const { f, mgr, hold } = await setup([
      { type: 'message', text: 'ok', headers: { 'x-codex-primary-used-percent': '100', 'x-codex-primary-window-minutes': '300', 'x-codex-primary-reset-at': String(resetAt) } },
    ]);
    const t = await f.task('task-r');
    await mgr.ensureThread(t, f.workspace);
    await mgr.runTurn(await task(f, 'task-r'), { kind: 'normal', cwd: f.workspace });
    await hold.flush();
    expect(hold.heldUntil()).toBe(resetAt * 1000);
    expect(hold.status()).toMatchObject({ held: true, reason: 'rate_limit_window_exhausted', rateLimits: { primary: { usedPercent: 100, windowDurationMins: 300 } } });
    expect((await f.store.audit()).filter((e) => e.action === 'provider.hold')).toHaveLength(1);
  }, 60_000);

  it('a 429 after Codex gave up: provider_rate_limited, held for the configured backoff', async () => {
    const { f, mgr, hold } = await setup(
      [{ type: 'fail', status: 429, body: JSON.stringify({ error: { message: 'Rate limit reached', type: 'rate_limit_exceeded' } }) }],
      {},
      45_000,
    );
    const t = await f.task('task-q');
    await mgr.ensureThread(t, f.workspace);
    const before = Date.now();
    const out = await mgr.runTurn(await task(f, 'task-q'), { kind: 'normal', cwd: f.workspace });
    expect(out).toMatchObject({ kind: 'failed', errorCode: 'provider_rate_limited', retryable: true });
    const until = hold.heldUntil()!;
    expect(until).toBeGreaterThanOrEqual(before + 45_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 45_000);
    expect(hold.status().reason).toBe('provider_refused_turn');
  }, 60_000);

  it('a plain 500 is not a rate limit: turn_failed, no hold', async () => {
    const { f, mgr, hold } = await setup([{ type: 'fail', status: 500 }]);
    const t = await f.task('task-5');
    await mgr.ensureThread(t, f.workspace);
    expect(await mgr.runTurn(await task(f, 'task-5'), { kind: 'normal', cwd: f.workspace })).toMatchObject({ kind: 'failed', errorCode: 'turn_failed' });
    expect(hold.heldUntil()).toBeNull();
  }, 60_000);
});

describe('usage under a lost lease [real gitea-mcp]', () => {
  it.each([
    ['another worker took the lease over', 'taken'],
    ['the lease expired on the database clock (nobody took it yet)', 'expired'],
  ] as const)('%s during the turn: its end and its usage are not recorded (the fenced transaction commits nothing)', async (_name, how) => {
    // The database's clock (SQLite's, which judges leases) is moved past the lease while the agent's command runs.
    const db = { aheadMs: 0 };
    fx = await sessionFixture(
      [
        { type: 'shell', command: 'sleep 1', usage: { input: 1200, output: 300 } },
        { type: 'message', text: 'done', usage: { input: 1400, output: 20 } },
      ],
      { storeClockMs: () => Date.now() + db.aheadMs },
    );
    const f = fx;
    const usage = createUsageAccounting({ store: f.store, limits: {} });
    const lease1 = { repoKey: REPO_KEY, leaseId: 'lease-1', owner: 'worker-1', taskId: 'task-l' };
    let takeover: Promise<void> | null = null;
    const mgr = f.manager({
      usage,
      onStep: () => {
        if (db.aheadMs > 0) return;
        db.aheadMs = 61_000;
        if (how === 'taken') takeover = grantTestLeaseIn(f.store, { ...lease1, leaseId: 'lease-2', owner: 'worker-2' });
      },
    });
    await f.supervisor.start();
    const t = await f.task('task-l');
    await grantTestLeaseIn(f.store, lease1);
    await mgr.ensureThread(t, f.workspace);

    const outcome = await mgr.runTurn(await task(f, 'task-l'), { kind: 'normal', cwd: f.workspace, fence: leaseFence(lease1) });
    await takeover;

    expect(db.aheadMs).toBe(61_000); // the lease did run out during the turn
    expect(outcome.kind).toBe('no_comment');
    // The turn's intent and turn id were written under the lease; nothing of its end is.
    expect(await turn(f, 'task-l:1')).toMatchObject({ status: 'started', completedAt: null });
    expect((await turn(f, 'task-l:1')).usage).toBeUndefined();
    expect((await task(f, 'task-l')).usage).toBeUndefined();
    const day = utcDay(Date.now());
    expect(await f.store.get<UsageDayRecord>('usage', dayKey(day, 'repo', REPO_KEY))).toBeUndefined();
    expect(await f.store.get<UsageDayRecord>('usage', dayKey(day, 'user', 'alice'))).toBeUndefined();
    expect((await f.store.audit({ taskId: 'task-l' })).map((e) => e.action)).not.toContain('codex.turn_completed');
    // The turn's meter is let go: this node counts none of it for the task either.
    expect(await usage.liveTokens('task-l')).toBe(0);
    expect(f.logs.some((l) => l.msg === 'turn end not recorded: the lease is gone')).toBe(true);
  }, 60_000);
});
