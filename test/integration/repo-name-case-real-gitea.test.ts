// Repository names compare case-insensitively, against a REAL Gitea 1.26 and the running service (in-process, real Codex
// app-server with the scripted model, real gitea-mcp): the seeded repository `acme/widget`, and
// signed payloads naming it `ACME/Widget` with the same repository id. Real Gitea only ever sends its
// canonical name, so the variants are Gitea's own deliveries resent with the names changed and
// re-signed with the webhook secret (what anyone holding the secret can send).
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { startService, type Service } from '../../src/service/create-service.js';
import type { HookDelivery } from '../support/real-gitea/index.js';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-repo-case-'));
let env: RealServiceEnvironment;
let service: Service;
const CANONICAL = 'default:acme/widget';
const TERMINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'cancelled', 'aborted', 'rejected'];

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  const config = loadConfig({ env: env.env, cwd: root });
  service = await startService({ config, codexEnv: { CODEX_HOME: env.codexHome }, retryDelayMs: 500 });
  expect(`${service.url}${config.webhookPath}`).toBe(env.webhookUrl);
}, 600_000); // the first run on a machine builds Gitea

afterAll(async () => {
  await service?.close();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${service.url}/api/gitea-workflow${path}`, {
    method,
    headers: { Authorization: `Bearer ${env.adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}
const control = (reason: string) => ({ requestId: randomUUID(), operator: 'ops', reason });
const waitForTask = (taskId: string, states: string[]) =>
  waitForTaskState(async (path) => (await api('GET', path)).body, taskId, states, 90_000) as Promise<{ task: Record<string, unknown> }>;
const commentIdOf = (d: HookDelivery): number | null => (JSON.parse(d.payload) as { comment?: { id?: number } }).comment?.id ?? null;

/** Gitea's own delivery of comment `c`, with the repository named `owner/name` (same id), re-signed, under a new delivery id. */
async function resendAs(real: HookDelivery, owner: string, name: string): Promise<{ status: number; body: any }> {
  const payload = JSON.parse(real.payload) as { repository: Record<string, any>; comment: Record<string, any> };
  const r = payload.repository;
  const from = `/${r['full_name']}`;
  r['owner'] = { ...r['owner'], login: owner };
  r['name'] = name;
  r['full_name'] = `${owner}/${name}`;
  for (const field of ['clone_url', 'html_url']) r[field] = String(r[field]).replace(from, `/${owner}/${name}`);
  const body = JSON.stringify(payload, null, 2);
  const res = await fetch(env.webhookUrl, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      'X-Gitea-Event': 'issue_comment',
      'X-Gitea-Event-Type': 'issue_comment',
      'X-Gitea-Delivery': randomUUID(),
      'X-Gitea-Signature': createHmac('sha256', env.webhookSecret).update(body).digest('hex'),
    },
    body,
  });
  return { status: res.status, body: await res.json() };
}

describe('repository names compare case-insensitively against a real Gitea [real gitea-mcp]', () => {
  it('a repository first seen through a payload naming ACME/Widget is registered under the name Gitea has for its id: acme/widget', async () => {
    const quiet = await env.gitea.comment('alice', env.gitea.issueNumber, 'no mention, so nothing is registered');
    const ignored = await env.gitea.waitForDelivery(env.hookId, (d) => commentIdOf(d) === quiet.id, 30_000);
    expect(ignored.status, ignored.responseBody).toBe(200);
    expect((await api('GET', '/overview')).body.repos).toEqual([]);

    // The mention is a real comment (the service reads each comment back from Gitea, so
    // a changed text is refused): its own delivery is sent nowhere (Gitea records it as failed), so
    // only the resent one, naming ACME/Widget, reaches the service.
    await env.gitea.setWebhookUrl(env.hookId, 'http://127.0.0.1:9/nowhere');
    let unsent: HookDelivery;
    try {
      const mention = await env.gitea.comment('alice', env.gitea.issueNumber, '@ccweb-bot please summarise this issue');
      unsent = await env.gitea.waitForDelivery(env.hookId, (d) => commentIdOf(d) === mention.id, 30_000);
    } finally {
      await env.gitea.setWebhookUrl(env.hookId, env.webhookUrl);
    }
    expect(unsent.succeeded).toBe(false);
    const first = await resendAs(unsent, 'ACME', 'Widget');
    expect(first.status).toBe(202);
    const done = await waitForTask(first.body.taskId, TERMINAL);
    expect(done.task).toMatchObject({ state: 'succeeded', repoKey: CANONICAL, owner: 'acme', repo: 'widget' });
    expect((await api('GET', '/overview')).body.repos.map((r: { repoKey: string }) => r.repoKey)).toEqual([CANONICAL]);
  });

  it('acme/widget disabled stays disabled for ACME/Widget; enabled, the ACME/Widget task runs under the canonical keys; one repository, one lease', async () => {
    // Gitea's rule, on the real server: another letter case finds the same repository.
    const viaVariant = (await env.gitea.api('alice', 'GET', '/repos/ACME/Widget', undefined, 200)).body as { id: number; full_name: string };
    expect(viaVariant.full_name).toBe('acme/widget');

    const issue = env.gitea.issueNumber;
    const first = await env.gitea.comment('alice', issue, '@ccweb-bot please summarise this issue');
    const registered = await env.gitea.waitForDelivery(env.hookId, (d) => commentIdOf(d) === first.id, 30_000);
    expect(registered.status).toBe(202);
    expect(JSON.parse(registered.payload).repository.id).toBe(viaVariant.id);
    await waitForTask(JSON.parse(registered.responseBody).taskId, TERMINAL);

    expect(await api('POST', `/repos/${encodeURIComponent(CANONICAL)}/disable`, control('noisy'))).toMatchObject({ status: 200, body: { status: 'disabled' } });
    const second = await env.gitea.comment('alice', issue, '@ccweb-bot and now add a test');
    const refusedByGitea = await env.gitea.waitForDelivery(env.hookId, (d) => commentIdOf(d) === second.id, 30_000);
    expect(refusedByGitea.status).toBe(409);
    // The same comment naming ACME/Widget (same repository id): still the disabled repository.
    expect(await resendAs(refusedByGitea, 'ACME', 'Widget')).toMatchObject({ status: 409, body: { error: 'repository_disabled' } });

    // The operator may name it in any case; the answer names the stored key.
    expect(await api('POST', `/repos/${encodeURIComponent('default:ACME/WIDGET')}/enable`, control('calm'))).toMatchObject({
      status: 200,
      body: { repoKey: CANONICAL, status: 'active', changed: true },
    });
    const accepted = await resendAs(refusedByGitea, 'ACME', 'Widget');
    expect(accepted.status).toBe(202);
    const done = await waitForTask(accepted.body.taskId, TERMINAL);
    expect(done.task).toMatchObject({
      state: 'succeeded',
      repoKey: CANONICAL,
      resourceKey: `${CANONICAL}:issue:${issue}`,
      sessionKey: `${CANONICAL}:issue:${issue}`,
      owner: 'acme',
      repo: 'widget',
    });
    // The same comment once more in yet another case: a duplicate of that task, not a second one.
    expect(await resendAs(refusedByGitea, 'Acme', 'WIDGET')).toMatchObject({ status: 200, body: { status: 'duplicate', taskId: accepted.body.taskId } });

    const overview = (await api('GET', '/overview')).body as { repos: Array<{ repoKey: string }>; leases: Array<{ repoKey: string }> };
    expect(overview.repos.map((r) => r.repoKey)).toEqual([CANONICAL]);
    expect(overview.leases.map((l) => l.repoKey)).toEqual([CANONICAL]);
    // The bot answered on the real issue for the ACME/Widget task too.
    const comments = await env.gitea.comments(issue);
    expect(comments.filter((c) => c.user.login === 'ccweb-bot' && c.body.includes(accepted.body.taskId)).length).toBeGreaterThan(0);
  });
});
