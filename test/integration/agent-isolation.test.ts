// Agent isolation below the red team: the probe the service runs at start-up and doctor
// runs, with the real Codex app-server; a host without user namespaces (a real one: the test runs
// the service inside `unshare -U` with /proc/sys/user/max_user_namespaces = 0 — a fault injected
// into the kernel's limits, no test double); the refusal to start there, and the explicit opt-out.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENT_SHELL_CONFIG_ARGS, defaultAgentPath } from '../../src/codex/agent-environment.js';
import { resolveBundledCodex } from '../../src/codex/codex-binary.js';
import { createAgentSandbox, outermostDenied } from '../../src/isolation/agent-sandbox.js';
import { APP_SERVER_FIX, probeAgentIsolation } from '../../src/isolation/isolation-probe.js';
import { agentSandboxFromConfig, IsolationUnavailableError } from '../../src/isolation/service-isolation.js';
import { loadConfig } from '../../src/config/index.js';
import { codexFixture, repoRoot } from '../support/codex-harness.js';
import { runTurn } from '../../src/codex/run-turn.js';
import { threadStartParams, turnStartParams } from '../../src/codex/thread-params.js';
import { startSandboxEnvironment } from '../../src/demo/sandbox-environment.js';
import { startServiceProcess } from '../support/sandbox/service-process.js';

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});
function freshRoot(tag: string): string {
  const r = mkdtempSync(join(tmpdir(), `ccweb-isolation-${tag}-`));
  roots.push(r);
  return r;
}

/** Runs argv on a host without user namespaces: a new user namespace whose limit for nested ones is 0. */
function withoutUserNamespaces(argv: string[], env: Record<string, string | undefined>, timeoutMs = 90_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', ['-U', '-r', 'sh', '-c', 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', 'sh', ...argv], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`timed out:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function sandboxFor(root: string, network: 'on' | 'off' = 'off') {
  const codexHome = join(root, 'codex-home');
  mkdirSync(codexHome, { recursive: true });
  const sandbox = createAgentSandbox({
    isolation: 'on',
    network,
    dataDir: join(root, 'data'),
    workspaceRoot: join(root, 'data', 'workspaces'),
    codexHome,
    codexCommand: resolveBundledCodex().command,
  });
  const connection = {
    args: ['app-server', ...AGENT_SHELL_CONFIG_ARGS, ...sandbox.appServerArgs()],
    agentHome: join(root, 'data', 'agent-home'),
    agentPath: sandbox.pathWithHelpers(defaultAgentPath()),
    extraEnv: { CODEX_HOME: codexHome },
  };
  return { sandbox, connection, codexHome };
}

describe('the isolation probe (real app-server)', () => {
  // A CODEX_HOME without config.toml, as on a fresh host: Codex then insists on default_permissions.
  for (const network of ['off', 'on'] as const) {
    it(`passes every check on this host (network ${network})`, async () => {
      const { sandbox, connection, codexHome } = sandboxFor(freshRoot(`probe-${network}`), network);
      const r = await probeAgentIsolation(sandbox, { connection, codexHome });
      expect(r.summary).toBe('all checks passed');
      expect(r.checks.map((c) => [c.name, c.ok])).toEqual([
        ['sandbox', true],
        ['write', true],
        ['pid-namespace', true],
        ['data-dir', true],
        ['codex-home', true],
        ['environment', true],
        ['network', true],
      ]);
      console.log(`[isolation] probe, network ${network}: ${r.durationMs} ms`);
    }, 60_000);
  }

  it('tells when the profile does not hide what it must (a profile with the deny entries removed)', async () => {
    const { sandbox, connection, codexHome } = sandboxFor(freshRoot('broken'));
    // Fault: the same arguments with every `"<path>"="deny"` entry taken out of the profile.
    const broken = { ...connection, args: connection.args.map((a) => a.replace(/"[^"]+"="deny",?/g, '')) };
    expect(broken.args.join(' ')).not.toContain('deny');
    const r = await probeAgentIsolation(sandbox, { connection: broken, codexHome });
    expect(r.ok).toBe(false);
    const failed = r.checks.filter((c) => !c.ok).map((c) => c.name);
    expect(failed).toEqual(['data-dir', 'codex-home']);
    expect(r.summary).toMatch(/data-dir: read a file in the data directory; codex-home: can list CODEX_HOME/);
  }, 60_000);

  it('an app-server that does not start says so, and its fix is about Codex, not user namespaces (serve says the same)', async () => {
    const root = freshRoot('no-app-server');
    const { sandbox, connection } = sandboxFor(root);
    // CODEX_HOME removed after the set-up: Codex exits at start ("… does not exist"), so the sandbox is never tried.
    const missing = join(root, 'gone-codex-home');
    const r = await probeAgentIsolation(sandbox, { connection: { ...connection, extraEnv: { CODEX_HOME: missing } }, codexHome: missing, timeoutMs: 20_000 });
    expect(r).toMatchObject({ ok: false, cause: 'app-server', fix: APP_SERVER_FIX });
    const refusal = new IsolationUnavailableError(r.summary, r.checks, r.cause!, r.fix);
    expect(refusal.message).toMatch(/^agent isolation could not be checked \(sandbox: could not run the probe: .*\); the service will not start\. Fix: the Codex app-server did not start/);
    expect(refusal.message).not.toMatch(/namespace|CCWEB_AGENT_ISOLATION=off|seccomp/);
  }, 60_000);

  it('fails on a host without user namespaces, saying why', async () => {
    const root = freshRoot('nouserns');
    const r = await withoutUserNamespaces([process.execPath, '--import', 'tsx', join(repoRoot, 'test', 'support', 'isolation-probe-child.ts'), root], process.env);
    const result = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { ok: boolean; summary: string };
    expect(result.ok).toBe(false);
    expect(result.summary).toMatch(/^sandbox: .*Creating new namespace failed/);
  }, 120_000);
});

describe('outermostDenied', () => {
  it('keeps only outermost existing paths and never hides the Codex binary', () => {
    const root = freshRoot('denied');
    mkdirSync(join(root, 'a', 'b'), { recursive: true });
    mkdirSync(join(root, 'bin', 'codex'), { recursive: true });
    const got = outermostDenied([join(root, 'a', 'b'), join(root, 'a'), join(root, 'missing'), join(root, 'bin'), join(root, 'a')], [join(root, 'bin', 'codex')]);
    expect(got).toEqual([join(root, 'a')]);
  });
});

describe('the service on a host without user namespaces', () => {
  it('refuses to start (exit 2, the reason and both ways out) — and starts with CCWEB_AGENT_ISOLATION=off, warning on start, in /overview and in doctor', async () => {
    const root = freshRoot('service');
    const env = await startSandboxEnvironment(root);
    try {
      const serviceEnv = { ...process.env, ...env.env, CCWEB_LOG_LEVEL: 'info' };
      const refused = await withoutUserNamespaces([process.execPath, '--import', 'tsx', join(repoRoot, 'src', 'main.ts')], serviceEnv);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/agent isolation does not hold on this host \(sandbox: .*Creating new namespace failed.*\); the service will not start/);
      expect(refused.stderr).toContain('CCWEB_AGENT_ISOLATION=off');
      expect(refused.stderr).toContain('unprivileged_userns');
      expect(refused.stdout).not.toContain('ccweb-gitea listening');

      // doctor there: the agent-isolation check fails with the fix (exit 1).
      const doctor = await withoutUserNamespaces([process.execPath, join(repoRoot, 'bin', 'ccweb-gitea.js'), 'doctor', '--skip', 'codex,gitea-mcp,gitea,token-scope'], serviceEnv);
      expect(doctor.code).toBe(1);
      expect(doctor.stdout).toMatch(/^fail\s+agent-isolation\s+sandbox: .*Creating new namespace failed.*→ .*CCWEB_AGENT_ISOLATION=off/m);

      // The explicit opt-out: the service starts (here, on this host, to keep the test simple), warns, shows it.
      const off = { ...env.env, CCWEB_AGENT_ISOLATION: 'off' };
      const service = await startServiceProcess(off);
      try {
        expect(service.lines.some((l) => l.includes('"level":40') && l.includes('agent isolation is OFF'))).toBe(true);
        const res = await fetch(`${service.url}/api/gitea-workflow/overview`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
        const o = (await res.json()) as { agentIsolation: { mode: string; warning: string } };
        expect(o.agentIsolation.mode).toBe('off');
        expect(o.agentIsolation.warning).toMatch(/can read the bot token/);
      } finally {
        await service.stop();
      }
      const doctorOff = await withoutUserNamespaces(
        [process.execPath, join(repoRoot, 'bin', 'ccweb-gitea.js'), 'doctor', '--skip', 'codex,gitea-mcp,gitea,token-scope'],
        { ...serviceEnv, CCWEB_AGENT_ISOLATION: 'off' },
      );
      expect(doctorOff.stdout).toMatch(/^warn\s+agent-isolation\s+agent isolation is OFF/m);
      expect(doctorOff.code).toBe(0);
    } finally {
      await env.close();
    }
  }, 240_000);
});

describe('what the service hides', () => {
  it('the config file, the _FILE secrets and CCWEB_AGENT_HIDE_PATHS join the data dir, workspaces, CODEX_HOME, home, /tmp, /var/tmp and /run', () => {
    // Outside /tmp (itself hidden, which would swallow everything below it): under the repository's
    // ignored test-artifacts/.
    const base = join(repoRoot, 'test-artifacts');
    mkdirSync(base, { recursive: true });
    const dir = mkdtempSync(join(base, 'isolation-hidden-'));
    roots.push(dir);
    for (const f of ['token', 'webhook', 'admin', 'config.json']) writeFileSync(join(dir, f), f === 'config.json' ? '{}' : 'x');
    mkdirSync(join(dir, 'extra'));
    const config = loadConfig({
      env: {
        CCWEB_GITEA_URL: 'https://g.example',
        CCWEB_GITEA_TOKEN_FILE: join(dir, 'token'),
        CCWEB_WEBHOOK_SECRET_FILE: join(dir, 'webhook'),
        CCWEB_ADMIN_TOKEN_FILE: join(dir, 'admin'),
        CCWEB_AGENT_HIDE_PATHS: join(dir, 'extra'),
        CCWEB_DATA_DIR: join(dir, 'data'),
      },
      configPath: join(dir, 'config.json'),
      cwd: dir,
    });
    mkdirSync(config.dataDir, { recursive: true });
    const denied = agentSandboxFromConfig(config, { env: { HOME: '/root' }, extraEnv: { CODEX_HOME: join(dir, 'data', 'codex') } }).deniedPaths();
    for (const p of ['token', 'webhook', 'admin', 'config.json', 'extra', 'data']) expect(denied).toContain(join(dir, p));
    // The shared temporary folders are hidden, except one that holds the Codex binary (a checkout under /tmp).
    const codexReal = realpathSync(resolveBundledCodex().command);
    const shared = ['/tmp', '/var/tmp', '/run'].filter((p) => !codexReal.startsWith(`${p}/`));
    expect(shared.length).toBeGreaterThanOrEqual(2);
    expect(denied).toEqual(expect.arrayContaining(shared));
    // The Codex binary stays readable: its install directory is never denied.
    expect(denied.some((p) => resolveBundledCodex().command.startsWith(`${p}/`))).toBe(false);
  });
});

describe('a linked git worktree (one per resource over a shared clone, the layout of change delivery)', () => {
  it("git works in the agent's worktree; the shared clone's .git stays read-only; the other worktrees stay hidden [real gitea-mcp]", async () => {
    const SECRET = 'canary-other-worktree-5d02aa';
    const fx = await codexFixture([]);
    try {
      const ws = join(fx.root, 'data', 'workspaces', 'default');
      const clone = join(ws, 'acme', 'widget');
      const wt1 = join(ws, '.worktrees', 'acme', 'widget', 'issue-1');
      const wt2 = join(ws, '.worktrees', 'acme', 'widget', 'issue-2');
      mkdirSync(clone, { recursive: true });
      const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@e', ...args], { cwd, stdio: 'pipe' });
      git(clone, 'init', '-q', '-b', 'main');
      writeFileSync(join(clone, 'README.md'), 'hello\n');
      git(clone, 'add', '.');
      git(clone, 'commit', '-qm', 'first commit');
      git(clone, 'worktree', 'add', '-q', '-b', 'issue-1', wt1);
      git(clone, 'worktree', 'add', '-q', '-b', 'issue-2', wt2);
      writeFileSync(join(wt2, 'SECRET.txt'), SECRET);
      const script = [
        'git log --oneline -1',
        'echo change > change.txt && git status --short',
        `echo 'exit 0' > ${clone}/.git/hooks/post-checkout && echo HOOK-WRITTEN`,
        `git config --file ${clone}/.git/config core.fsmonitor evil && echo CONFIG-WRITTEN`,
        `cat ${wt2}/SECRET.txt`,
        // On one line: the shell's stdout and stderr interleave in the captured output under load.
        `echo "LS:$(ls ${join(ws, '.worktrees', 'acme', 'widget')} | tr '\\n' ',')"`,
        'echo END',
      ].join('; ');
      fx.model.push({ type: 'shell', command: script, timeoutMs: 20_000 }, { type: 'message', text: 'done' });
      const conn = await fx.connect();
      const res: any = await conn.request(
        'thread/start',
        threadStartParams({ cwd: wt1, giteaMcp: { command: fx.mcpCommand, giteaUrl: fx.giteaUrl, token: fx.token }, sandbox: fx.agentSandbox.forThread(wt1) }),
      );
      const threadId = res.thread.id as string;
      const out = await runTurn(conn, { threadId, params: turnStartParams({ threadId, text: 'go', model: conn.model!, developerInstructions: 'test' }) });
      expect(out.status).toBe('completed');
      const seen = JSON.stringify(fx.model.functionCallOutputs());
      expect(seen).toContain('END');
      expect(seen).toContain('first commit');
      expect(seen).toContain('?? change.txt');
      expect(seen).not.toContain('HOOK-WRITTEN');
      expect(seen).not.toContain('CONFIG-WRITTEN');
      expect(seen).not.toContain(SECRET);
      expect(seen).toMatch(/SECRET.txt: No such file or directory/);
      // `ls` of the worktrees' folder lists only the agent's own.
      expect(seen).toContain('LS:issue-1,\\n');
      expect(readFileSync(join(wt1, 'change.txt'), 'utf8')).toBe('change\n');
    } finally {
      await fx.cleanup();
    }
  }, 60_000);
});
