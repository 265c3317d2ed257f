// The container image end to end (`npm run test:image`, not part of `npm test`): the image built from the
// repository's Dockerfile (scripts/test-image/run.sh builds it first, with canary files planted in the
// checkout) holds no untracked file of its build context and no canary's content anywhere; it runs under
// podman against a throwaway real Gitea and the scripted model, answers one mention, stops on SIGTERM within
// the drain time (exit 0, not the deadline's 75), and a second container on the same volumes still has the
// history; its `demo --once` runs (on the Gitea double: the image has no Go) and exits 0.
//
// Runtime here: podman 4.3 with runc (crun refuses these machines' hybrid cgroups) and explicit ulimits
// (runc may not raise RLIMIT_NOFILE/RLIMIT_NPROC past the host's hard limits, which podman's defaults ask for).
// No --security-opt: with rootful podman's default seccomp profile the agent's sandbox (user, PID, mount and
// network namespaces inside the container) holds, which the test checks (agentIsolation not "off"; a failed
// start-up probe would have stopped the container with exit 2).
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const execFileP = promisify(execFile);
const IMAGE = process.env['CCWEB_TEST_IMAGE'] ?? 'localhost/ccweb-gitea:test';
const IMAGE_UID = 10001; // the Dockerfile's ccweb user
const root = mkdtempSync(join(tmpdir(), 'ccweb-image-e2e-'));
const name = `ccweb-image-e2e-${process.pid}`;
let env: RealServiceEnvironment;
const TERMINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'cancelled', 'aborted', 'rejected'];

interface TaskDetail {
  task: { taskId: string; state: string; errorCode: string | null };
  comments: Array<{ kind: string; commentId: number | null; status: string }>;
  audit: Array<{ action: string }>;
}

async function podman(...args: string[]): Promise<string> {
  const { stdout } = await execFileP('podman', args, { maxBuffer: 16 * 1024 * 1024 });
  return stdout.trim();
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${env.serviceUrl}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return (await res.json()) as T;
}

async function waitReady(timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${env.serviceUrl}/readyz`);
      last = `${res.status} ${await res.text()}`;
      if (res.ok) return;
    } catch (err) {
      last = String(err);
    }
    const state = await podman('inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', name).catch(() => 'gone');
    if (!state.startsWith('running')) throw new Error(`container ${state}:\n${await podman('logs', name).catch(() => '')}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`not ready: ${last}\n${await podman('logs', name).catch(() => '')}`);
}

const volumes = { data: join(root, 'vol-data'), codex: join(root, 'vol-codex'), secrets: join(root, 'secrets') };

/** Starts the image as compose.yaml does: secrets as files, the two volumes, the bot login set. */
async function runContainer(): Promise<void> {
  await podman('rm', '-f', name).catch(() => undefined);
  await podman(
    'run', '-d', '--name', name,
    '--runtime', 'runc', '--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096',
    '--network', 'host',
    '-v', `${volumes.data}:/var/lib/ccweb-gitea/data`,
    '-v', `${volumes.codex}:/var/lib/ccweb-gitea/codex`,
    '-v', `${volumes.secrets}:/run/secrets:ro`,
    '-e', `CCWEB_HOST=127.0.0.1`,
    '-e', `CCWEB_PORT=${env.env['CCWEB_PORT']}`,
    '-e', `CCWEB_GITEA_URL=${env.gitea.url}`,
    '-e', 'CCWEB_BOT_LOGIN=ccweb-bot',
    '-e', 'CCWEB_GITEA_TOKEN_FILE=/run/secrets/gitea_token',
    '-e', 'CCWEB_WEBHOOK_SECRET_FILE=/run/secrets/webhook_secret',
    '-e', 'CCWEB_ADMIN_TOKEN_FILE=/run/secrets/admin_token',
    '-e', 'CCWEB_LOG_LEVEL=info',
    IMAGE,
  );
}

afterAll(() => rmSync(root, { recursive: true, force: true }));

let taskId = '';

function commentIdOf(payload: string): number | null {
  try {
    return (JSON.parse(payload) as { comment?: { id?: number } }).comment?.id ?? null;
  } catch {
    return null;
  }
}

/** What run.sh recorded around the build: the canaries it planted, and the untracked files of the build context. */
function buildEvidence(): { canaries: Array<{ path: string; value: string }>; contextUntracked: string[] } {
  const dir = process.env['CCWEB_IMAGE_EVIDENCE'];
  if (!dir || !existsSync(join(dir, 'canaries.tsv'))) throw new Error('CCWEB_IMAGE_EVIDENCE is not set: run `npm run test:image` (scripts/test-image/run.sh plants the canaries and lists the build context)');
  const lines = (f: string) => readFileSync(join(dir, f), 'utf8').split('\n').filter((l) => l !== '');
  return {
    canaries: lines('canaries.tsv').map((l) => ({ path: l.split('\t')[0]!, value: l.split('\t')[1]! })),
    contextUntracked: lines('context-untracked.txt'),
  };
}

describe('the image holds nothing of the checkout but what git tracks', () => {
  it('no untracked file of the build context is under the app folder, and no canary content is anywhere in its filesystem', async () => {
    const { canaries, contextUntracked } = buildEvidence();
    expect(canaries.map((c) => c.path)).toEqual(expect.arrayContaining(['secrets/gitea_token', '.env', 'src/.env.local']));
    const mnt = await podman('image', 'mount', IMAGE);
    try {
      const app = join(mnt, 'opt/ccweb-gitea');
      expect(existsSync(join(app, 'package.json')), `the app folder is ${app}`).toBe(true);
      const reached = [...new Set([...contextUntracked, ...canaries.map((c) => c.path)])].filter((p) => existsSync(join(app, p)));
      expect(reached, 'untracked files of the build context that reached the image (.dockerignore, Dockerfile)').toEqual([]);
      // Fixed strings, every file of the image's root filesystem (binary files too): a canary copied anywhere.
      const patterns = join(root, 'canary-values.txt');
      writeFileSync(patterns, canaries.map((c) => c.value).join('\n') + '\n');
      const found = await execFileP('grep', ['-rlaF', '-f', patterns, mnt], { maxBuffer: 16 * 1024 * 1024 }).then(
        (r) => r.stdout.trim().split('\n').map((f) => f.slice(mnt.length)),
        (e: { code?: number; stdout?: string }) => (e.code === 1 ? [] : Promise.reject(e)),
      );
      expect(found, 'files of the image holding a canary planted in the checkout').toEqual([]);
    } finally {
      await podman('image', 'unmount', IMAGE).catch(() => undefined);
    }
  });
});

describe('the image [real gitea-mcp]', () => {
  beforeAll(async () => {
    env = await startRealServiceEnvironment(root);
    for (const dir of Object.values(volumes)) mkdirSync(dir, { recursive: true });
    cpSync(env.codexHome, volumes.codex, { recursive: true });
    for (const dir of [volumes.data, volumes.codex]) {
      chownSync(dir, IMAGE_UID, IMAGE_UID);
      chmodSync(dir, 0o700);
    }
    await execFileP('chown', ['-R', `${IMAGE_UID}:${IMAGE_UID}`, volumes.codex]);
    const secret = (file: string, value: string) => {
      writeFileSync(join(volumes.secrets, file), value, { mode: 0o400 });
      chownSync(join(volumes.secrets, file), IMAGE_UID, IMAGE_UID);
    };
    secret('gitea_token', env.gitea.users.bot.token);
    secret('webhook_secret', env.webhookSecret);
    secret('admin_token', env.adminToken);
    await runContainer();
    await waitReady(120_000);
  }, 600_000);

  afterAll(async () => {
    await podman('rm', '-f', '-t', '0', name).catch(() => undefined);
    await env?.close();
  });

  it('answers one mention end to end: receipt and answer on the issue, verified', async () => {
    const c = await env.gitea.comment('alice', env.gitea.issueNumber, '@ccweb-bot please fix the flaky login test');
    const d = await env.gitea.waitForDelivery(env.hookId, (x) => commentIdOf(x.payload) === c.id, 30_000);
    expect(d.status).toBe(202);
    taskId = String((JSON.parse(d.responseBody) as { taskId: string }).taskId);
    const done = await waitForTaskState((p) => api<TaskDetail>(p), taskId, TERMINAL, 180_000);
    expect(done.task.state).toBe('succeeded');
    const users = (await env.gitea.comments(env.gitea.issueNumber)).map((x) => x.user.login);
    expect(users).toEqual(['alice', 'ccweb-bot', 'ccweb-bot']);
    // The pinned gitea-mcp inside the image answered, behind the gate.
    expect(done.comments.find((x) => x.kind === 'mcp_final')?.status).toBe('confirmed');
    // With the agent's sandbox on: the start-up probe held inside the container (else serve exits 2).
    const overview = await api<{ agentIsolation: { mode: string } }>('/overview');
    expect(overview.agentIsolation.mode).not.toBe('off');
  });

  it('stops on SIGTERM within the drain time: exit 0, not the deadline exit 75', async () => {
    await podman('kill', '--signal', 'SIGTERM', name);
    await podman('wait', name);
    expect(await podman('inspect', '--format', '{{.State.ExitCode}}', name)).toBe('0');
    expect(await podman('logs', name)).toContain('shutting down');
  });

  it('a new container on the same volumes keeps the history', async () => {
    await runContainer();
    await waitReady(120_000);
    const d = await api<TaskDetail>(`/tasks/${taskId}`);
    expect(d.task.state).toBe('succeeded');
    expect(d.audit.length).toBeGreaterThan(3);
  });
});

describe('the image\'s demo [real gitea-mcp]', () => {
  it('`demo --once` runs on the Gitea double (no Go in the image, said so), with the image\'s gitea-mcp, and exits 0', async () => {
    const { stdout } = await execFileP(
      'podman',
      ['run', '--rm', '--runtime', 'runc', '--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096', '--network', 'none', '-e', 'CCWEB_LOG_LEVEL=error', IMAGE, 'demo', '--once'],
      { maxBuffer: 16 * 1024 * 1024, timeout: 240_000 },
    );
    expect(stdout).toContain('Go is not installed and no Gitea build is cached: the demo runs on its Gitea double');
    expect(stdout).toMatch(/^Gitea double +http:\/\/127\.0\.0\.1:\d+/m);
    expect(stdout).toContain('  alice on #1: succeeded: answered; the change is pull request #3');
    expect(stdout).toContain('  alice on #2: succeeded: answered on the thread');
    expect(stdout).toContain('  bob on #1: refused: bob has read access only');
    expect(stdout).toContain('--once: the service and Gitea have stopped');
  });
});
