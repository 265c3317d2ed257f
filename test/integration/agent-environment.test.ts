// The environment the agent's commands run in, through the real `codex app-server` and the scripted
// model: the service user's HOME has a shell profile that sleeps 30 s and prints a marker, and the
// service's environment carries a variable of the operator's. Neither may reach the agent's shell.
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultAgentPath } from '../../src/codex/agent-environment.js';
import { runTurn } from '../../src/codex/run-turn.js';
import { threadStartParams, turnStartParams } from '../../src/codex/thread-params.js';
import { gatedMcpConfig } from '../../src/sessions/thread-keeper.js';
import { codexFixture, type CodexFixture } from '../support/codex-harness.js';

let fx: CodexFixture | null = null;
let slowHome: string | null = null;
afterEach(async () => {
  await fx?.cleanup();
  fx = null;
  if (slowHome) rmSync(slowHome, { recursive: true, force: true });
  slowHome = null;
});

/** A HOME whose every shell start-up file announces itself and then hangs for 30 s. */
function slowProfileHome(): string {
  const home = mkdtempSync(join(tmpdir(), 'ccweb-slow-home-'));
  const profile = 'echo PROFILE-SOURCED-$0 >&2; echo PROFILE-SOURCED; sleep 30\n';
  for (const f of ['.profile', '.bash_profile', '.bash_login', '.bashrc']) writeFileSync(join(home, f), profile);
  return home;
}

const PROBE = [
  'echo "home=$HOME"',
  'echo "path=$PATH"',
  'echo "tmp=$TMPDIR"',
  'shopt -q login_shell && echo shell=login || echo shell=plain',
  'echo "operator=${CCWEB_TEST_OPERATOR_VAR:-absent}"',
  'echo "bashenv=${BASH_ENV:-absent}"',
  'ls -A "$HOME" | tr "\\n" " "; echo "<-home-listing"',
  'git config --global --list 2>&1 | head -3; echo "<-git-global"',
].join('; ');

describe("the agent's commands (real app-server, scripted model)", () => {
  it('run without the host profile, with a private HOME, an explicit PATH and no operator variables [real gitea-mcp]', async () => {
    slowHome = slowProfileHome();
    const bashEnv = join(slowHome, '.bashrc');
    fx = await codexFixture([{ type: 'shell', command: PROBE }, { type: 'message', text: 'probed' }]);
    const agentHome = join(fx.root, 'data', 'agent-home');
    const conn = await fx.connect({
      env: { ...process.env, HOME: slowHome, BASH_ENV: bashEnv, ENV: bashEnv, CCWEB_TEST_OPERATOR_VAR: 'leaked-from-operator' },
      agentHome,
    });
    const started: any = await conn.request(
      'thread/start',
      threadStartParams({
        cwd: fx.workspace,
        giteaMcp: gatedMcpConfig({
          command: fx.mcpCommand,
          args: ['-t', 'stdio', '-host', fx.giteaUrl],
          giteaUrl: fx.giteaUrl,
          token: fx.token,
          scope: { owner: 'acme', repo: 'widget', number: 1 },
          stateDir: join(fx.root, 'data', 'mcp-gate', 'probe'),
          startupTimeoutSec: 20,
        }),
      }),
    );
    const threadId = started.thread.id as string;
    const out = await runTurn(conn, { threadId, params: turnStartParams({ threadId, text: 'probe', model: conn.model!, reasoningEffort: null }) });
    expect(out.status).toBe('completed');
    const cmd = out.items.find((i) => i.type === 'commandExecution') as any;
    // Had a profile been sourced, the command would still be sleeping when Codex yields (10 s): no exit code.
    expect(cmd?.exitCode, JSON.stringify(cmd)).toBe(0);
    const text = String(cmd.aggregatedOutput);
    expect(text).not.toContain('PROFILE-SOURCED');
    expect(text).toContain(`home=${agentHome}\n`);
    expect(text).toContain(`tmp=${join(agentHome, 'tmp')}\n`);
    expect(text).toContain('shell=plain');
    expect(text).toContain('operator=absent');
    expect(text).toContain('bashenv=absent');
    // Codex puts its own helper directories first; the rest is exactly the service's choice.
    expect(text).toMatch(new RegExp(`path=[^\\n]*${defaultAgentPath().replaceAll('/', '\\/')}\\n`));
    expect(text).not.toContain('.pyenv');
    // The real gitea-mcp writes its log (`$HOME/.gitea-mcp/gitea-mcp.log`, Gitea's error texts) at
    // start: the gate gives it a HOME in the data directory, so the agent's home holds only tmp.
    expect(text).toMatch(/(^|\n)tmp *<-home-listing/);
    expect(existsSync(join(fx.root, 'data', 'mcp-gate', 'probe', 'home', '.gitea-mcp'))).toBe(true);
    expect(text).toMatch(/(^|\n)(fatal: unable to read config file[^\n]*\n)?<-git-global/);
    expect(statSync(agentHome).mode & 0o777).toBe(0o700);
  });

  it('keeps a throwaway agent HOME only while the app-server runs when no data directory is given', async () => {
    fx = await codexFixture([]);
    const conn = await fx.connect();
    const home = (conn as unknown as { agentHome: { home: string } }).agentHome.home;
    expect(existsSync(home)).toBe(true);
    expect(statSync(home).mode & 0o777).toBe(0o700);
    await conn.close({ graceMs: 2_000, termMs: 2_000 });
    expect(existsSync(home)).toBe(false);
  });
});

describe('prepared agent HOME', () => {
  it('tightens an existing folder to 0700', async () => {
    const { prepareAgentHome } = await import('../../src/codex/agent-environment.js');
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-agent-home-test-'));
    const home = join(dir, 'agent-home');
    mkdirSync(home, { mode: 0o755 });
    const h = prepareAgentHome(home);
    expect(statSync(home).mode & 0o777).toBe(0o700);
    h.dispose();
    expect(existsSync(home)).toBe(true); // an operator's folder is never removed
    rmSync(dir, { recursive: true, force: true });
  });
});
