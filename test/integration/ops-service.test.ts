// The operations surface of the running service (in-process, a real Gitea 1.26, real Codex app-server
// with the scripted model): /healthz, /readyz, /metrics after real webhooks, and what reaches the
// log — every task line correlated, no secret even when an error message carries one.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { startService, type Service } from '../../src/service/create-service.js';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-ops-'));
let env: RealServiceEnvironment;
let service: Service;
const logs: string[] = [];

async function until<T>(fn: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  const config = loadConfig({ env: { ...env.env, CCWEB_LOG_LEVEL: 'debug' }, cwd: root });
  const sink = new PassThrough();
  let buf = '';
  sink.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    logs.push(...parts);
  });
  service = await startService({ config, codexEnv: { CODEX_HOME: env.codexHome }, logDestination: sink, retryDelayMs: 500 });
  // The environment's Gitea webhook already points at this port (CCWEB_PORT is fixed there).
  expect(`${service.url}${config.webhookPath}`).toBe(env.webhookUrl);
}, 600_000); // the first run on a machine builds Gitea

afterAll(async () => {
  await service?.close();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('ops endpoints of the running service [real gitea-mcp]', () => {
  it('/healthz answers while the process is up, /readyz once store and app-server are ready', async () => {
    const health = await fetch(`${service.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await until(async () => {
      const res = await fetch(`${service.url}/readyz`);
      return res.status === 200 ? ((await res.json()) as Record<string, { ok: boolean }>) : undefined;
    }, 'readyz 200');
    expect(ready['store']!.ok).toBe(true);
    expect(ready['appServer']!.ok).toBe(true);
  });

  it('/metrics counts webhooks by outcome, task transitions, commits, and the task runs to the end', async () => {
    const ofComment = (id: number) => (d: { payload: string }) => (JSON.parse(d.payload) as { comment: { id: number } }).comment.id === id;
    const c = await env.gitea.comment('alice', env.gitea.issueNumber, '@ccweb-bot please summarise this issue');
    const delivery = await env.gitea.waitForDelivery(env.hookId, ofComment(c.id));
    expect(delivery.status).toBe(202);
    const taskId = (JSON.parse(delivery.responseBody) as { taskId: string }).taskId;
    const quiet = await env.gitea.comment('alice', env.gitea.issueNumber, 'no mention here');
    expect((await env.gitea.waitForDelivery(env.hookId, ofComment(quiet.id))).status).toBe(200);
    const bad = await fetch(`${service.url}/api/gitea/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gitea-event': 'issue_comment', 'x-gitea-signature': 'ab'.repeat(32) },
      body: '{}',
    });
    expect(bad.status).toBe(401);

    const text = await until(async () => {
      const t = await (await fetch(`${service.url}/metrics`)).text();
      return /ccweb_reply_verifications_total\{outcome="succeeded/.test(t) ? t : undefined;
    }, 'a verified reply', 45_000);
    expect(text).toMatch(/ccweb_webhooks_total\{status="202",outcome="accepted",reason="none"\} 1\n/);
    expect(text).toMatch(/ccweb_webhooks_total\{status="200",outcome="ignored",reason="no_mention"\} 1\n/);
    expect(text).toMatch(/ccweb_webhooks_total\{status="401",outcome="error",reason="unauthorized"\} 1\n/);
    expect(text).toMatch(/ccweb_task_transitions_total\{from="none",to="queued"\} 1\n/);
    expect(text).toMatch(/ccweb_task_transitions_total\{from="queued",to="preparing"\} 1\n/);
    expect(text).toMatch(/ccweb_lease_wait_seconds_count 1\n/);
    expect(text).toMatch(/ccweb_turn_duration_seconds_count\{outcome="[a-z_]+"\} 1\n/);
    expect(text).toMatch(/ccweb_store_commit_seconds_count\{result="ok"\} [1-9]\d*\n/);
    expect(text).toMatch(/# TYPE ccweb_queue_depth gauge/);
    expect(text).toMatch(/process_resident_memory_bytes \d+/);

    // Every log line that names the task carries its delivery id too.
    const lines = logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['taskId'] === taskId);
    expect(lines.length).toBeGreaterThan(3);
    for (const l of lines) expect(l['deliveryId'], String(l['msg'])).toBe(delivery.uuid);
  });

  it('the log never holds the Gitea token, the webhook secret or the admin token, even inside an error message', async () => {
    const token = env.gitea.users.bot.token;
    service.logger.error({ err: new Error(`git fetch failed: https://bot:${token}@gitea/x.git`) }, `clone with ${env.webhookSecret}`);
    service.logger.warn({ headers: { authorization: `Bearer ${env.adminToken}` }, config: { giteaToken: token } }, 'request');
    await new Promise((r) => setTimeout(r, 50));
    const all = logs.join('\n');
    expect(all).toContain('git fetch failed');
    expect(all).toContain('[redacted]');
    for (const secret of [token, env.webhookSecret, env.adminToken]) expect(all).not.toContain(secret);
  });
});
