// `ccweb-gitea doctor` against a real Gitea 1.26 (test/support/real-gitea/): the real Codex app-server
// (scripted model through CODEX_HOME), the gitea-mcp command with a real MCP handshake, Gitea's REST API.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCTOR_CHECKS, runDoctor } from '../../src/cli/doctor.js';
import { runCli } from '../../src/cli/index.js';
import { nodeVersionWarning } from '../../src/service/node-version.js';
import { giteaApi } from '../../src/demo/real-gitea/api.js';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-doctor-'));
let env: RealServiceEnvironment;
let baseEnv: Record<string, string | undefined>;

function capture(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  return { stream, text: () => text };
}

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  baseEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...env.env };
}, 600_000); // the first run on a machine builds Gitea

afterAll(async () => {
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('doctor', () => {
  it('passes every check against the real Gitea, Codex and the MCP handshake included [real gitea-mcp]', async () => {
    // The seeded bot's token has no write:repository: without change delivery it is all the service needs.
    const results = await runDoctor({ env: { ...baseEnv, CCWEB_DELIVERY: 'off' }, cwd: root, repo: `${env.gitea.owner}/${env.gitea.repo}` });
    expect(results.map((r) => r.check)).toEqual([...DOCTOR_CHECKS]);
    // Node: as serve judges the Node running this; the database: none configured (the embedded store).
    const expected = (check: string) => (check === 'node' ? (nodeVersionWarning(process.version) ? 'warn' : 'ok') : check === 'database' ? 'skip' : 'ok');
    for (const r of results) expect(r.status, `${r.check}: ${r.detail} ${r.fix ?? ''}`).toBe(expected(r.check));
    expect(results.find((r) => r.check === 'codex')!.detail).toMatch(/initialize/);
    // The scripted model is a custom provider: no OpenAI login needed, and no account rate limits.
    expect(results.find((r) => r.check === 'codex-account')!.detail).toMatch(/^no login needed.*; rate limits: not available/);
    expect(results.find((r) => r.check === 'gitea')!.detail).toContain(env.gitea.users.bot.login);
    // The seeded bot's token is created with read:repository, write:issue, read:user (Gitea names them).
    expect(results.find((r) => r.check === 'token-scopes')!.detail).toMatch(/^CCWEB_GITEA_TOKEN: read:repository, read:user, write:issue; CCWEB_GITEA_MCP_TOKEN unset/);
    expect(results.find((r) => r.check === 'gitea-mcp')!.detail).toMatch(/0\.0\.0-a5dd03c7f0d8 behind the gate: MCP handshake ok, 12 tools offered/);
  });

  it('token-scopes warns when the agent\'s own token can do more than read the repository and answer, and never prints it', async () => {
    const broad = env.gitea.users.owner.token; // created with the scope `all`
    const results = await runDoctor({
      env: { ...baseEnv, CCWEB_GITEA_MCP_TOKEN: broad, CCWEB_DELIVERY: 'off' },
      cwd: root,
      skip: new Set(['codex', 'codex-account', 'agent-isolation', 'gitea-mcp', 'token-scope', 'webhook-secret', 'data-dir', 'workspace-root', 'store-lock']),
    });
    const scopes = results.find((r) => r.check === 'token-scopes')!;
    expect(scopes.status).toBe('warn');
    expect(scopes.detail).toMatch(/CCWEB_GITEA_MCP_TOKEN: all/);
    expect(scopes.fix).toMatch(/read:repository and write:issue/);
    expect(JSON.stringify(results)).not.toContain(broad);
  });

  it('token-scopes fails for tokens the service cannot work with: the agent\'s with no usable scope, the bot\'s without write:issue', async () => {
    const only = new Set(DOCTOR_CHECKS.filter((c) => c !== 'token-scopes'));
    const make = async (scopes: string[]) => {
      const bot = env.gitea.users.bot;
      const r = await giteaApi<{ sha1: string }>(env.gitea.url, { basic: { login: bot.login, password: bot.password } }, 'POST', `/users/${bot.login}/tokens`, { name: `doctor-${scopes.join('-')}-${Date.now()}`, scopes }, 201);
      return r.body.sha1;
    };
    const useless = await make(['read:notification']);
    const agent = (await runDoctor({ env: { ...baseEnv, CCWEB_GITEA_MCP_TOKEN: useless, CCWEB_DELIVERY: 'off' }, cwd: root, skip: only })).find((r) => r.check === 'token-scopes')!;
    expect(agent).toMatchObject({ check: 'token-scopes', status: 'fail', detail: expect.stringMatching(/CCWEB_GITEA_MCP_TOKEN: read:notification;.*the agent's token lacks read:repository and write:issue/) });
    const readOnly = await make(['read:repository', 'read:issue', 'read:user']);
    const bot = (await runDoctor({ env: { ...baseEnv, CCWEB_GITEA_TOKEN: readOnly, CCWEB_DELIVERY: 'off' }, cwd: root, skip: only })).find((r) => r.check === 'token-scopes')!;
    expect(bot).toMatchObject({ check: 'token-scopes', status: 'fail', detail: expect.stringContaining("the bot's token lacks write:issue") });
    expect(JSON.stringify([agent, bot])).not.toMatch(new RegExp(`${useless}|${readOnly}`));
  });

  it('codex-account fails with the login fix when Codex needs OpenAI credentials and has none', async () => {
    // A CODEX_HOME on the default (OpenAI) provider without any login; nothing leaves the machine.
    const home = join(root, 'codex-home-no-login');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'config.toml'), '[features]\nplugins = false\n[analytics]\nenabled = false\n');
    const results = await runDoctor({
      env: { ...baseEnv, CODEX_HOME: home, OPENAI_API_KEY: undefined, CODEX_API_KEY: undefined },
      cwd: root,
      skip: new Set(['codex', 'gitea-mcp', 'gitea', 'token-scope', 'webhook-secret', 'data-dir', 'workspace-root', 'store-lock']),
    });
    const account = results.find((r) => r.check === 'codex-account')!;
    expect(account.status).toBe('fail');
    expect(account.detail).toMatch(/not logged in/);
    expect(account.fix).toMatch(/codex login/);
  });

  it('a wrong token fails the gitea check with a fix, exit code 1, and the token is never printed', async () => {
    const wrong = 'wrong-token-0123456789abcdef';
    const out = capture();
    const err = capture();
    const code = await runCli(['doctor', '--skip', 'codex,codex-account,gitea-mcp', '--repo', `${env.gitea.owner}/${env.gitea.repo}`], {
      stdout: out.stream,
      stderr: err.stream,
      env: { ...baseEnv, CCWEB_GITEA_TOKEN: wrong },
      cwd: root,
    });
    expect(code).toBe(1);
    // serve's own words for the same refusal (probeGitea: it stops with exit 69).
    expect(out.text()).toMatch(/^fail\s+gitea\s+Gitea at \S+ rejects the token \(HTTP 401 on GET \/api\/v1\/user\) \[CCWEB_GITEA_TOKEN\]\s+→ create a new access token/m);
    expect(out.text()).toMatch(/^ok\s+webhook-secret/m);
    for (const secret of [wrong, env.webhookSecret, env.adminToken]) expect(out.text() + err.text()).not.toContain(secret);
  });

  it('a missing gitea-mcp command fails its check with the install fix', async () => {
    const results = await runDoctor({
      env: { ...baseEnv, CCWEB_GITEA_MCP_COMMAND: join(root, 'no-such-gitea-mcp') },
      cwd: root,
      skip: new Set(['codex', 'codex-account']),
    });
    const mcp = results.find((r) => r.check === 'gitea-mcp')!;
    expect(mcp.status).toBe('fail');
    expect(mcp.detail).toMatch(/^the gitea-mcp command `\S+no-such-gitea-mcp` was not found or is not executable \[CCWEB_GITEA_MCP_COMMAND\]$/);
    expect(mcp.fix).toMatch(/install-gitea-mcp\.mjs/);
    expect(results.find((r) => r.check === 'gitea')!.status).toBe('ok');
  });

  it('an invalid configuration fails with one line per problem and skips what needs it', async () => {
    const { CCWEB_GITEA_TOKEN: _t, ...rest } = baseEnv;
    const results = await runDoctor({ env: { ...rest, CCWEB_PORT: 'eighty' }, cwd: root, skip: new Set(['codex', 'codex-account']) });
    const config = results.filter((r) => r.check === 'config');
    expect(config.map((r) => r.status)).toEqual(['fail', 'fail']);
    expect(config.map((r) => r.detail).join('\n')).toMatch(/CCWEB_GITEA_TOKEN[\s\S]*CCWEB_PORT|CCWEB_PORT[\s\S]*CCWEB_GITEA_TOKEN/);
    expect(results.find((r) => r.check === 'git')!.status).toBe('ok');
    // Every check but these (the first three need no configuration, the other two were left out) says it was skipped.
    const withoutConfig = ['config', 'node', 'git', 'codex', 'codex-account'];
    expect(results.filter((r) => r.status === 'skip').map((r) => r.check)).toEqual(DOCTOR_CHECKS.filter((c) => !withoutConfig.includes(c)));
  });
});
