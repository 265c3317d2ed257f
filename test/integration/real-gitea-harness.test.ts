// The real-Gitea harness itself (test/support/real-gitea/): a real Gitea 1.26 built by
// scripts/install-gitea.mjs, seeded through its CLI and API, sending real signed webhooks, and its
// Replay driven through the web UI. No test double here.
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../support/codex-harness.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GITEA_VERSION, startSeededGitea, startWebhookRecorder, type SeededGitea, type WebhookRecorder } from '../support/real-gitea/index.js';

let g: SeededGitea;
let rec: WebhookRecorder;
let hookId: number;
const secret = 'harness-secret-0123456789';

beforeAll(async () => {
  g = await startSeededGitea();
  rec = await startWebhookRecorder();
  hookId = await g.addWebhook(rec.url, secret);
}, 600_000); // the first run on a machine builds Gitea

afterAll(async () => {
  await rec?.close();
  await g?.close();
});

describe('real Gitea harness', () => {
  it('runs the pinned version, seeded as documented', async () => {
    const v = await g.api<{ version: string }>('alice', 'GET', '/version');
    expect(v.body.version).toBe(GITEA_VERSION);
    const repo = await g.api<{ private: boolean; default_branch: string }>('acme', 'GET', `/repos/acme/widget`);
    expect(repo.body).toMatchObject({ private: true, default_branch: 'main' });
    const perms: Record<string, string> = {};
    for (const login of ['acme', 'alice', 'bob', 'ccweb-bot']) {
      perms[login] = (await g.api<{ permission: string }>('acme', 'GET', `/repos/acme/widget/collaborators/${login}/permission`)).body.permission;
    }
    expect(perms).toEqual({ acme: 'owner', alice: 'write', bob: 'read', 'ccweb-bot': 'write' });
    const pr = await g.api<{ head: { sha: string; ref: string; repo: { full_name: string } } }>('acme', 'GET', `/repos/acme/widget/pulls/${g.prNumber}`);
    expect(pr.body.head).toMatchObject({ sha: g.prHeadSha, ref: 'feature/login-retry', repo: { full_name: 'acme/widget' } });
    const fork = await g.api<{ head: { sha: string; repo: { full_name: string } } }>('acme', 'GET', `/repos/acme/widget/pulls/${g.forkPrNumber}`);
    expect(fork.body.head).toMatchObject({ sha: g.forkPrHeadSha, repo: { full_name: 'bob/widget' } });
    expect(new Set([g.issueNumber, g.prNumber, g.forkPrNumber]).size).toBe(3);
    // A stranger (no token) cannot see the private repository.
    const anon = await fetch(`${g.url}/api/v1/repos/acme/widget`);
    expect(anon.status).toBe(404);
  });

  it('a comment made through the API arrives as a signed webhook; Gitea records the delivery; Replay resends the same bytes under a new UUID', async () => {
    const c = await g.comment('alice', g.issueNumber, '@ccweb-bot hello from the harness test');
    const first = await rec.waitFor((r) => r.body.includes(`"id": ${c.id},`));
    expect(first.headers['x-gitea-event']).toBe('issue_comment');
    expect(first.headers['x-gitea-event-type']).toBe('issue_comment');
    const sig = createHmac('sha256', secret).update(first.body).digest('hex');
    expect(first.headers['x-gitea-signature']).toBe(sig);
    expect(first.headers['x-hub-signature-256']).toBe(`sha256=${sig}`);
    const uuid = first.headers['x-gitea-delivery']!;
    const recorded = await g.waitForDelivery(hookId, (d) => d.uuid === uuid);
    expect(recorded.status).toBe(200);
    expect(recorded.responseBody).toBe('{"status":"recorded"}');
    expect(JSON.parse(recorded.payload)).toEqual(JSON.parse(first.body.toString()));

    await g.replay(hookId, uuid);
    const again = await rec.waitFor((r) => r.body.equals(first.body) && r.headers['x-gitea-delivery'] !== uuid);
    expect(again.headers['x-gitea-signature']).toBe(sig);
    expect(again.headers['x-gitea-delivery']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a comment on a pull request arrives as pull_request_comment', async () => {
    const c = await g.comment('bob', g.forkPrNumber, 'a reader comments on the fork PR');
    const r = await rec.waitFor((x) => x.body.includes(`"id": ${c.id},`));
    expect(r.headers['x-gitea-event']).toBe('issue_comment');
    expect(r.headers['x-gitea-event-type']).toBe('pull_request_comment');
    const body = JSON.parse(r.body.toString()) as { is_pull: boolean; repository: { permissions: unknown }; pull_request: { head: { repo: { full_name: string } } } };
    expect(body.is_pull).toBe(true);
    expect(body.repository.permissions).toEqual({ admin: false, push: false, pull: true });
    expect(body.pull_request.head.repo.full_name).toBe('bob/widget');
  });

  it('close() stops the process group and removes its folder', async () => {
    const { startRealGitea } = await import('../support/real-gitea/index.js');
    const other = await startRealGitea();
    const alive = () => {
      try {
        process.kill(other.pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(alive()).toBe(true);
    await other.close();
    expect(alive()).toBe(false);
    expect(existsSync(other.root)).toBe(false);
  });

  it('a test process killed with SIGKILL leaves no Gitea behind (watchdog): it stops answering and its folder goes', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'test', 'support', 'real-gitea', 'start.ts')], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const started = await new Promise<{ url: string; folder: string }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`start.ts did not print its URL:\n${out}`)), 120_000);
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /^Gitea \S+ at (\S+)\s+\(folder (\S+)\)/m.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve({ url: m[1]!, folder: m[2]! });
        }
      });
    });
    expect((await fetch(`${started.url}/api/v1/version`)).status).toBe(200);
    child.kill('SIGKILL');
    const deadline = Date.now() + 15_000;
    let up = true;
    while (Date.now() < deadline) {
      up = await fetch(`${started.url}/api/v1/version`, { signal: AbortSignal.timeout(1_000) }).then(() => true, () => false);
      if (!up && !existsSync(started.folder)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(up).toBe(false);
    expect(existsSync(started.folder)).toBe(false);
  }, 180_000);
});
