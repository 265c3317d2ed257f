// Every start-up failure an operator can cause ends the real
// service process (`node --import tsx src/main.ts`, what `npm start` runs) with one line naming the
// cause, the configuration key and the fix, and a documented exit code (78 configuration, 69 Gitea
// rejects the token, 73 data directory); Gitea down at start does not end it; SIGTERM stops it,
// also through `npm start` and while it is still starting.
//
// Test double: Gitea's `GET /api/v1/user` and `/api/v1/version` (a few lines of node:http below):
// only the token check and reachability matter here.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/codex-harness.js';

const TOKEN = randomBytes(20).toString('hex');

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stdout: string;
  ms: number;
}

let root: string;
let gitea: Server;
let giteaUrl: string;
let mcp: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'ccweb-startup-'));
  mcp = join(root, 'gitea-mcp');
  // Codex refuses a CODEX_HOME that does not exist (the agent-isolation check starts it at start-up).
  mkdirSync(join(root, 'codex-home'), { recursive: true });
  writeFileSync(mcp, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  gitea = createServer((req, res) => {
    if (req.headers.authorization !== `token ${TOKEN}`) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: 'token is required' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    if (req.url === '/api/v1/user') res.end(JSON.stringify({ id: 1, login: 'ccweb-bot', full_name: '', email: 'bot@example.com' }));
    else res.end(JSON.stringify({ version: '1.26.3' }));
  });
  await new Promise<void>((r) => gitea.listen(0, '127.0.0.1', r));
  giteaUrl = `http://127.0.0.1:${(gitea.address() as AddressInfo).port}`;
});

const onCleanup: Array<() => void> = [];

afterAll(async () => {
  for (const f of onCleanup) f();
  await new Promise<void>((r) => gitea.close(() => r()));
  rmSync(root, { recursive: true, force: true });
});

function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  // The runner's own CCWEB_* keys must not leak in (unknown keys are now an error).
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CCWEB_') && v !== undefined) env[k] = v;
  const dataDir = join(root, `data-${randomBytes(4).toString('hex')}`);
  return {
    ...env,
    CCWEB_HOST: '127.0.0.1',
    CCWEB_PORT: '0',
    CCWEB_DATA_DIR: dataDir,
    CCWEB_WEBHOOK_SECRET: randomBytes(16).toString('hex'),
    CCWEB_ADMIN_TOKEN: randomBytes(16).toString('hex'),
    CCWEB_GITEA_URL: giteaUrl,
    CCWEB_GITEA_TOKEN: TOKEN,
    CCWEB_GITEA_MCP_COMMAND: mcp,
    CCWEB_LOG_LEVEL: 'info',
    CODEX_HOME: join(root, 'codex-home'),
    ...extra,
  };
}

function spawnService(env: Record<string, string>, args: string[] = [], command: string[] = [process.execPath, '--import', 'tsx', join(repoRoot, 'src', 'main.ts')]): ChildProcess {
  return spawn(command[0]!, [...command.slice(1), ...args], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs until exit (or kills after `timeoutMs` and reports code null). */
function runToExit(env: Record<string, string>, args: string[] = [], timeoutMs = 30_000): Promise<Run> {
  const t0 = Date.now();
  const child = spawnService(env, args);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

/**
 * The failure is one line on stderr naming the key, and no stack trace. On a Node older than 22 the
 * service's one warning line about the version comes first (src/service/node-version.ts): it is not
 * part of the failure.
 */
const NODE_WARNING = /^ccweb-gitea: warning: running on Node v\d+\.\d+\.\d+, older than the supported/;
function expectOneLine(run: Run, code: number, key: string, words: RegExp): void {
  const all = run.stderr.split('\n').filter((l) => l.trim() !== '');
  const oldNode = Number(process.versions.node.split('.')[0]) < 22;
  expect(all.filter((l) => NODE_WARNING.test(l)), run.stderr).toHaveLength(oldNode ? 1 : 0);
  const lines = all.filter((l) => !NODE_WARNING.test(l));
  expect(run.code, run.stderr + run.stdout.slice(-2000)).toBe(code);
  expect(lines, run.stderr).toHaveLength(1);
  expect(lines[0]).toContain(key);
  expect(lines[0]).toMatch(words);
  expect(run.stderr).not.toMatch(/\n\s+at /);
  for (const secret of [TOKEN]) expect(run.stderr + run.stdout).not.toContain(secret);
}

/** Waits for the "listening" log line; resolves the URL. */
function waitListening(child: ChildProcess, lines: string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not listening:\n${lines.slice(-20).join('\n')}`)), timeoutMs);
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        lines.push(line);
        if (line.includes('ccweb-gitea listening')) {
          clearTimeout(timer);
          resolve((JSON.parse(line) as { url: string }).url);
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d: Buffer) => lines.push(d.toString()));
    child.once('exit', (code) => reject(new Error(`exited ${code}:\n${lines.slice(-20).join('\n')}`)));
  });
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

describe('start-up failures: one line, the key, the fix, a documented exit code', { timeout: 90_000 }, () => {
  it('port in use → exit 78 naming CCWEB_PORT; the data directory is not left locked', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = (busy.address() as AddressInfo).port;
    const env = baseEnv({ CCWEB_PORT: String(port) });
    const run = await runToExit(env);
    await new Promise<void>((r) => busy.close(() => r()));
    expectOneLine(run, 78, 'CCWEB_PORT', /in use/);
    expect(existsSync(join(env.CCWEB_DATA_DIR!, 'store', 'LOCK'))).toBe(false);
  });

  it('data directory under /proc → exit 78 naming CCWEB_DATA_DIR (not a busy loop)', async () => {
    expectOneLine(await runToExit(baseEnv({ CCWEB_DATA_DIR: '/proc/self/ccweb-data' }), [], 20_000), 78, 'CCWEB_DATA_DIR', /not storage/);
    expectOneLine(await runToExit(baseEnv({ CCWEB_DATA_DIR: '/proc/sys' }), [], 20_000), 78, 'CCWEB_DATA_DIR', /not storage/);
  });

  it('data directory is a file → exit 73 naming CCWEB_DATA_DIR', async () => {
    const file = join(root, 'a-file');
    writeFileSync(file, 'x');
    expectOneLine(await runToExit(baseEnv({ CCWEB_DATA_DIR: file })), 73, 'CCWEB_DATA_DIR', /not usable \(E/);
  });

  it('missing codex binary → exit 78 naming CCWEB_CODEX_COMMAND', async () => {
    expectOneLine(await runToExit(baseEnv({ CCWEB_CODEX_COMMAND: join(root, 'no-such-codex') })), 78, 'CCWEB_CODEX_COMMAND', /not found/);
  });

  it('missing gitea-mcp → exit 78 naming CCWEB_GITEA_MCP_COMMAND', async () => {
    expectOneLine(await runToExit(baseEnv({ CCWEB_GITEA_MCP_COMMAND: join(root, 'no-such-mcp') })), 78, 'CCWEB_GITEA_MCP_COMMAND', /not found/);
  });

  it('a token Gitea rejects → exit 69 naming CCWEB_GITEA_TOKEN', async () => {
    expectOneLine(await runToExit(baseEnv({ CCWEB_GITEA_TOKEN: 'wrong-token-0123456789' })), 69, 'CCWEB_GITEA_TOKEN', /rejects the token/);
  });

  it('a misspelled CCWEB_* key → exit 78 with "did you mean"', async () => {
    const run = await runToExit(baseEnv({ CCWEB_PROT: '9000' }));
    expectOneLine(run, 78, 'CCWEB_PROT', /did you mean CCWEB_PORT/);
  });

  it('weak secrets are refused unless --allow-weak-secrets', async () => {
    expectOneLine(await runToExit(baseEnv({ CCWEB_ADMIN_TOKEN: 'x' })), 78, 'CCWEB_ADMIN_TOKEN', /shorter than 16/);
    expectOneLine(await runToExit(baseEnv({ CCWEB_WEBHOOK_SECRET: 'abc' })), 78, 'CCWEB_WEBHOOK_SECRET', /shorter than 16/);
    const same = randomBytes(16).toString('hex');
    expectOneLine(await runToExit(baseEnv({ CCWEB_WEBHOOK_SECRET: same, CCWEB_ADMIN_TOKEN: same })), 78, 'CCWEB_ADMIN_TOKEN', /equals a webhook secret/);
    // With the flag the weak secrets pass and start-up goes on to the next check (here: the port).
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const run = await runToExit(baseEnv({ CCWEB_ADMIN_TOKEN: 'x', CCWEB_PORT: String((busy.address() as AddressInfo).port) }), ['--allow-weak-secrets']);
    await new Promise<void>((r) => busy.close(() => r()));
    expectOneLine(run, 78, 'CCWEB_PORT', /in use/);
  });
});

describe('Gitea down at start does not end the service; signals stop it in bounded time', { timeout: 120_000 }, () => {
  it('without CCWEB_BOT_LOGIN it waits for Gitea, saying why; SIGTERM while waiting → exit 0', async () => {
    const child = spawnService(baseEnv({ CCWEB_GITEA_URL: 'http://127.0.0.1:9' }));
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const until = Date.now() + 30_000;
    while (Date.now() < until && (out.match(/Gitea is not reachable \[CCWEB_GITEA_URL\]/g) ?? []).length < 2) await new Promise((r) => setTimeout(r, 200));
    // Still running after two attempts, each saying why.
    expect(child.exitCode, out).toBeNull();
    expect((out.match(/Gitea is not reachable \[CCWEB_GITEA_URL\]/g) ?? []).length).toBeGreaterThanOrEqual(2);
    const t0 = Date.now();
    child.kill('SIGTERM');
    const { code } = await exitOf(child);
    expect(code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('with CCWEB_BOT_LOGIN it starts, /readyz reports Gitea not ready; SIGINT → exit 0, port released', async () => {
    const env = baseEnv({ CCWEB_GITEA_URL: 'http://127.0.0.1:9', CCWEB_BOT_LOGIN: 'ccweb-bot' });
    const child = spawnService(env);
    const lines: string[] = [];
    const url = await waitListening(child, lines);
    const ready = await fetch(`${url}/readyz`);
    const body = (await ready.json()) as Record<string, { ok: boolean; detail: string } | undefined>;
    expect(ready.status).toBe(503);
    expect(body['gitea']?.ok).toBe(false);
    // The MCP command resolves but does not answer initialize: not ready either, naming the key.
    const until = Date.now() + 30_000;
    let mcpPart = body['mcp'];
    while (Date.now() < until && (mcpPart === undefined || mcpPart.detail === 'not checked yet')) {
      await new Promise((r) => setTimeout(r, 250));
      mcpPart = ((await (await fetch(`${url}/readyz`)).json()) as typeof body)['mcp'];
    }
    expect(mcpPart?.ok).toBe(false);
    expect(mcpPart?.detail).toContain('CCWEB_GITEA_MCP_COMMAND');
    child.kill('SIGINT');
    expect((await exitOf(child)).code).toBe(0);
    expect(await portOpen(Number(new URL(url).port))).toBe(false);
    expect(existsSync(join(env.CCWEB_DATA_DIR!, 'store', 'LOCK'))).toBe(false);
  });

  it('`npm start` + SIGTERM to npm: the service itself stops (port and data directory released)', async () => {
    const env = baseEnv();
    mkdirSync(env.CCWEB_DATA_DIR!, { recursive: true });
    // Its own process group, so that whatever npm leaves behind can be ended by the test afterwards.
    const child = spawn('npm', ['start', '--silent'], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    onCleanup.push(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // the group is gone: nothing was left behind
      }
    });
    const lines: string[] = [];
    const url = await waitListening(child, lines);
    const port = Number(new URL(url).port);
    expect(await portOpen(port)).toBe(true);
    child.kill('SIGTERM');
    await exitOf(child);
    // Whatever npm did, nothing may keep serving: poll up to 25 s (the shutdown deadline is 20 s).
    const deadline = Date.now() + 25_000;
    while (Date.now() < deadline && ((await portOpen(port)) || existsSync(join(env.CCWEB_DATA_DIR!, 'store', 'LOCK')))) await new Promise((r) => setTimeout(r, 250));
    expect(await portOpen(port)).toBe(false);
    expect(existsSync(join(env.CCWEB_DATA_DIR!, 'store', 'LOCK'))).toBe(false);
  });
});
