// Storage under abuse and failed admin authentications.
// - A long comment is stored once per task, not in every transition.
// - 10,000 bad-signature requests (over two simulated hours) grow the data directory by a bounded
//   amount: they are counted per source and window into expiring `security_events` records.
// - Failed admin authentications are limited per client and counted.
// Real parts only: intake and the operators' API over HTTP on 127.0.0.1, the durable store, the
// actor runtime, the retention sweep.
import { randomUUID } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { createSecurityEvents, SECURITY_EVENTS, type SecurityEventRecord } from '../../src/intake/security-events.js';
import { DAY_MS, sweepRetention } from '../../src/retention/retention-sweep.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import type { SqlStore } from '../../src/store/index.js';
import { INLINE_TEXT_LIMIT, withFullTexts } from '../../src/tasks/task-texts.js';
import { API_PREFIX } from '../../src/api/control-router.js';
import { ADMIN_TOKEN, startApiHarness, type ApiHarness } from '../support/api-harness.js';
import { startIntakeHarness, type IntakeHarness } from '../support/intake-harness.js';
import { mutatedDelivery } from '../support/webhook-fixtures.js';
import { storeForTest } from '../support/test-runtime.js';
import { COMMENT_MAX_CHARS } from '../../src/domain/agent-input.js';

function dirBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    total += entry.isDirectory() ? dirBytes(full) : statSync(full).size;
  }
  return total;
}

let intake: IntakeHarness | null = null;
let api: ApiHarness | null = null;
afterEach(async () => {
  await intake?.close();
  await api?.close();
  intake = null;
  api = null;
});

describe('a long comment is stored once per task', () => {
  // Just under the longest comment intake hands the agent (src/domain/agent-input.ts); a
  // longer one is refused with a preview only (test/e2e/oversized-comment.e2e.test.ts).
  it('a comment of a million characters, six transitions: the store grows by about one copy, the agent still gets it whole', { timeout: 60_000 }, async () => {
    intake = await startIntakeHarness();
    const dir = join(intake.dir, 'store');
    // Sizes with the write-ahead log folded into the database file: what the store keeps.
    await (intake.store as SqlStore).checkpoint();
    const before = dirBytes(dir);
    const text = `@ccweb-bot please read this log\n\n${'x'.repeat(120)}\n`.repeat(12_000).slice(0, COMMENT_MAX_CHARS);
    const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
      p.comment.body = text;
    });
    const res = await intake.post(d.body, d.headers);
    expect(res.status).toBe(202);
    const taskId = res.body.taskId as string;
    const id = taskActorId(taskId);
    const events: TaskEvent[] = [
      { type: 'CLAIM', leaseId: 'lease-1' },
      { type: 'WORKSPACE_READY' },
      { type: 'TURN_FAILED', errorCode: 'x', retryable: true, retryAt: Date.now(), resumeAt: 'preparing' } as TaskEvent,
      { type: 'RETRY_DUE', leaseId: 'lease-2' },
      { type: 'FAIL', errorCode: 'y' },
    ];
    for (const e of events) await intake.runtime.send(id, e as never, { by: 'test' });
    const task = (await intake.store.get<TaskRecord>('tasks', taskId))!;
    expect(task.state).toBe('failed');
    expect(task.stateVersion).toBeGreaterThanOrEqual(6);
    await (intake.store as SqlStore).checkpoint();
    const grown = dirBytes(dir) - before;
    console.log(`comment ${text.length} bytes, ${task.stateVersion} transitions: store grew by ${grown} bytes`);
    // One copy (in the payload-free journal line that stores it) plus small records, not one per transition.
    expect(grown).toBeLessThan(text.length * 1.25 + 200_000);
    expect(task.instruction.length).toBeLessThanOrEqual(INLINE_TEXT_LIMIT);
    expect((await withFullTexts(intake.store, task)).instruction).toBe(text);
  });
});

describe('10,000 bad-signature requests grow the data directory by a bounded amount', () => {
  it('counted per source and window, not one record each', { timeout: 240_000 }, async () => {
    // Simulated time: one second per request, so the flood spans almost three hours of windows.
    let clock = Date.parse('2026-12-01T00:00:00Z');
    intake = await startIntakeHarness({ intake: { now: () => new Date(clock) } });
    const dir = join(intake.dir, 'store');
    await (intake.store as SqlStore).checkpoint();
    const before = dirBytes(dir);
    const d = mutatedDelivery('issue_comment_created_on_issue', () => undefined);
    const headers = { ...d.headers, 'X-Gitea-Signature': 'ab'.repeat(32), 'X-Hub-Signature-256': `sha256=${'ab'.repeat(32)}` };
    const N = 10_000;
    let sent = 0;
    const statuses = new Map<number, number>();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (sent < N) {
          sent += 1;
          clock += 1000;
          const res = await intake!.post(d.body, { ...headers, 'X-Gitea-Delivery': randomUUID() });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      }),
    );
    expect(statuses.get(401)).toBe(N);
    await (intake.store as SqlStore).checkpoint();
    const grown = dirBytes(dir) - before;
    const records = await intake.store.list<SecurityEventRecord>(SECURITY_EVENTS);
    console.log(`${N} bad signatures over ${(N / 3600).toFixed(1)} simulated hours: store grew by ${grown} bytes, ${records.length} security event records, ${(await intake.store.audit()).length} audit events`);
    // About 17 ten-minute windows, one record each for the one source; nothing per request.
    expect(records.length).toBeLessThanOrEqual(Math.ceil(N / 600) + 1);
    expect(await intake.store.audit()).toEqual([]);
    expect(grown).toBeLessThan(100_000);
    // Closed windows carry their counts (the open one is written at the next roll or at close).
    const counted = records.filter((r) => Date.parse(r.windowEnd) <= clock).reduce((n, r) => n + r.count, 0);
    expect(counted).toBeGreaterThan(N - 700);
  });

  it('the counts add up, records expire with the retention setting, and many sources share one overflow record', async () => {
    const store = await storeForTest();
    let clock = Date.parse('2026-12-01T00:00:00Z');
    const sink = createSecurityEvents({ store, windowMs: 600_000, maxSources: 5, retentionMs: 2 * DAY_MS, now: () => clock });
    for (let i = 0; i < 1000; i++) {
      clock += 100;
      await sink.record('invalid_signature', `10.0.0.${i % 20}`, { userAgent: 'x' });
    }
    await sink.flush();
    const records = await store.list<SecurityEventRecord>(SECURITY_EVENTS);
    expect(records.map((r) => r.source).sort()).toEqual(['10.0.0.0', '10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', 'other'].sort());
    expect(records.reduce((n, r) => n + r.count, 0)).toBe(1000);
    // Not yet expired one day later; gone after the retention.
    expect((await sweepRetention(store, { deliveryRetentionMs: DAY_MS, taskRetentionMs: null }, { now: () => clock + DAY_MS })).securityEvents).toBe(0);
    expect((await sweepRetention(store, { deliveryRetentionMs: DAY_MS, taskRetentionMs: null }, { now: () => clock + 3 * DAY_MS })).securityEvents).toBe(6);
    expect(await store.list(SECURITY_EVENTS)).toEqual([]);
    await sink.close();
  });
});

describe('failed admin authentications are limited per client and counted', () => {
  function call(url: string, token: string, localAddress = '127.0.0.1'): Promise<number> {
    return new Promise((resolve, reject) => {
      const u = new URL(`${url}${API_PREFIX}/overview`);
      const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, localAddress, headers: { authorization: `Bearer ${token}` }, agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('300 wrong tokens: 10 answered 401, the rest 429 (also the right token) for that client only; failures counted', async () => {
    api = await startApiHarness(undefined, { maxAuthFailures: 10 });
    const statuses: number[] = [];
    for (let i = 0; i < 300; i++) statuses.push(await call(api.url, `wrong-${i}`));
    expect(statuses.filter((s) => s === 401)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(290);
    // The client is blocked for the window, whatever it sends.
    expect(await call(api.url, ADMIN_TOKEN)).toBe(429);
    // Another client is not.
    expect(await call(api.url, ADMIN_TOKEN, '127.0.0.2')).toBe(200);
  });

  it('failed admin authentications reach the security events (service wiring)', async () => {
    const store = await storeForTest();
    const sink = createSecurityEvents({ store });
    const { authFailureGuard } = await import('../../src/api/auth-failure-guard.js');
    const guard = authFailureGuard({ prefixes: [API_PREFIX], securityEvents: sink, maxFailures: 3 });
    const ctx = (status: number) =>
      ({ path: `${API_PREFIX}/overview`, method: 'GET', status, req: { socket: { remoteAddress: '10.1.1.1' } }, get: () => 'curl', set: () => undefined }) as never;
    for (let i = 0; i < 3; i++) await guard(ctx(401), async () => undefined);
    await sink.flush();
    const [record] = await store.list<SecurityEventRecord>(SECURITY_EVENTS);
    expect(record).toMatchObject({ kind: 'admin_unauthorized', source: '10.1.1.1', count: 3 });
    await sink.close();
  });
});

