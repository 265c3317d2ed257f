// `doctor` on a machine that is not (fully) set up: it names what to configure first and blames
// nothing else; each failure gets the advice for its own cause; it never prints a secret and never
// cuts one out of its own words.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCTOR_CHECKS, formatCheck, runDoctor } from '../../src/cli/doctor.js';
import { WITHHELD } from '../../src/cli/doctor-checks.js';
import { runCli } from '../../src/cli/index.js';
import { repoRoot } from '../support/codex-harness.js';

const home = mkdtempSync(join(tmpdir(), 'ccweb-doctor-fresh-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

const configured = (extra: Record<string, string | undefined> = {}) => ({
  PATH: process.env.PATH,
  HOME: home,
  CCWEB_GITEA_URL: 'http://127.0.0.1:9',
  CCWEB_GITEA_TOKEN: 'a-token-of-some-length-0001',
  CCWEB_WEBHOOK_SECRET: 'a-webhook-secret-of-length-0002',
  CCWEB_ADMIN_TOKEN: 'an-admin-token-of-length-0003',
  CCWEB_DATA_DIR: join(home, 'data'),
  CCWEB_PORT: '0',
  ...extra,
});
/** The checks that need Gitea, Codex or gitea-mcp (slow, or beside the point here). */
const OUTSIDE = ['codex', 'codex-account', 'agent-isolation', 'gitea-mcp', 'gitea', 'token-scope', 'token-scopes'];

describe('doctor on a fresh machine', () => {
  it('without configuration: names the keys to set, fails nothing but config, reports every other check (node, git run; the rest skipped)', async () => {
    const results = await runDoctor({ env: { PATH: process.env.PATH, HOME: home }, cwd: home });
    const failed = results.filter((r) => r.status === 'fail');
    expect(new Set(failed.map((r) => r.check))).toEqual(new Set(['config']));
    for (const key of ['CCWEB_GITEA_URL', 'CCWEB_GITEA_TOKEN', 'CCWEB_WEBHOOK_SECRET', 'CCWEB_ADMIN_TOKEN']) {
      expect(failed.map((r) => r.detail).join('\n')).toContain(key);
    }
    for (const check of ['codex', 'codex-account']) {
      const r = results.find((x) => x.check === check)!;
      expect(r.status).toBe('skip');
      expect(r.fix).toMatch(/configure first/);
    }
    expect(results.map((r) => r.check)[0]).toBe('config'); // the first thing it says
    // Every check doctor has is run or said skipped, in its order: none is left out silently.
    expect([...new Set(results.map((r) => r.check))]).toEqual(DOCTOR_CHECKS);
  });

  it('configured but CODEX_HOME missing: the codex check names the folder and how to make it; the isolation check does not blame user namespaces', async () => {
    const codexHome = join(home, 'no-such-codex-home');
    const results = await runDoctor({
      env: configured({ CODEX_HOME: codexHome }),
      cwd: home,
      skip: new Set(['gitea-mcp', 'gitea', 'token-scope', 'token-scopes']),
    });
    const codex = results.find((r) => r.check === 'codex')!;
    expect(codex.status).toBe('fail');
    expect(codex.detail).toBe(`CODEX_HOME ${codexHome} does not exist [CODEX_HOME]`);
    expect(codex.fix).toContain(`mkdir -m 700 ${codexHome}`);
    expect(codex.fix).toContain(`CODEX_HOME=${codexHome} codex login`);
    const isolation = results.find((r) => r.check === 'agent-isolation')!;
    expect(isolation).toMatchObject({ status: 'skip', detail: `not probed: CODEX_HOME ${codexHome} does not exist`, fix: expect.stringContaining('codex check') });
    expect(`${isolation.detail} ${isolation.fix}`).not.toMatch(/namespace|CCWEB_AGENT_ISOLATION=off|seccomp/);
    expect(results.find((r) => r.check === 'codex-account')).toMatchObject({ status: 'skip', fix: expect.stringContaining('codex check') });
  });

  it('CODEX_HOME the service user may not write: says so and how to fix it', () => {
    // Owner read and execute only; the doctor runs in a user namespace of its own, without the
    // capabilities that would let root write there anyway (the same kernel check as any service user).
    const readOnly = join(home, 'codex-home-read-only');
    mkdirSync(readOnly, { mode: 0o500 });
    chmodSync(readOnly, 0o500);
    const r = spawnSync('unshare', ['-U', '--', process.execPath, join(repoRoot, 'bin', 'ccweb-gitea.js'), 'doctor', '--only', 'codex', '--json'], {
      env: configured({ CODEX_HOME: readOnly }) as NodeJS.ProcessEnv,
      cwd: home,
      encoding: 'utf8',
    });
    const codex = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { check: string; status: string; detail: string; fix: string }).find((x) => x.check === 'codex');
    expect(codex, r.stdout + r.stderr).toMatchObject({ status: 'fail', detail: expect.stringMatching(new RegExp(`^CODEX_HOME ${readOnly} is not writable by the service user \\(uid \\d+, EACCES\\) \\[CODEX_HOME\\]$`)) });
    expect(codex!.fix).toMatch(/chown -R/);
  });

  it('CODEX_HOME a file: says it is not a directory', async () => {
    const file = join(home, 'codex-home-file');
    writeFileSync(file, '');
    const results = await runDoctor({ env: configured({ CODEX_HOME: file }), cwd: home, skip: new Set(OUTSIDE.filter((c) => c !== 'codex')) });
    expect(results.find((r) => r.check === 'codex')).toMatchObject({ status: 'fail', detail: `CODEX_HOME ${file} is not a directory [CODEX_HOME]` });
  });
});

describe('doctor and weak secrets: a failure, as serve refuses them, said without the secret and in its own words', () => {
  it('the secret `short`: "CCWEB_WEBHOOK_SECRET is shorter than 16 characters", its own words uncut, and fails (exit 1)', async () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (d: Buffer) => (text += d.toString()));
    const code = await runCli(['doctor', '--skip', OUTSIDE.join(',')], { stdout: out, stderr: new PassThrough(), env: configured({ CCWEB_WEBHOOK_SECRET: 'short' }), cwd: home });
    expect(text).toMatch(/^fail\s+webhook-secret\s+CCWEB_WEBHOOK_SECRET is shorter than 16 characters/m);
    expect(text).not.toContain('[redacted]');
    expect(code).toBe(1);
  });

  it('never prints a secret: a short admin token and secrets equal to each other are named by key only', async () => {
    const weak = 'Zq7w';
    const results = await runDoctor({ env: configured({ CCWEB_ADMIN_TOKEN: weak, CCWEB_WEBHOOK_SECRET: weak }), cwd: home, skip: new Set(OUTSIDE) });
    const secret = results.find((r) => r.check === 'webhook-secret')!;
    expect(secret.status).toBe('fail');
    expect(secret.detail).toMatch(/CCWEB_ADMIN_TOKEN is shorter than 16 characters.*CCWEB_ADMIN_TOKEN equals a webhook secret/);
    expect(results.map(formatCheck).join('\n')).not.toContain(weak);
  });

  it('with --allow-weak-secrets (as serve accepts them with it): a warning, exit 0 as far as the secrets go', async () => {
    const results = await runDoctor({ env: configured({ CCWEB_WEBHOOK_SECRET: 'short' }), cwd: home, skip: new Set(OUTSIDE), allowWeakSecrets: true });
    expect(results.find((r) => r.check === 'webhook-secret')).toMatchObject({ status: 'warn', detail: expect.stringContaining('accepted: --allow-weak-secrets') });
    expect(results.filter((r) => r.status === 'fail')).toEqual([]);
  });
});

describe('text from outside that holds a secret is withheld whole', () => {
  // Test double: a "Gitea" whose error message holds a value that is also configured as a secret
  // (here the admin token) — real Gitea knows no such value, so only a stand-in can show what doctor
  // does with outside text that holds one. (The Gitea client already cuts its own token out of errors.)
  const secret = 'c0ffee-7f3c9a0b1d2e4f56a7b8';
  let echo: Server;
  let url: string;
  beforeAll(async () => {
    echo = createServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: `internal error, reference ${secret}` }));
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => echo.close(() => r())));

  it('the gitea line keeps its own words, says the error was withheld, and the value is nowhere in the output', async () => {
    const results = await runDoctor({ env: configured({ CCWEB_GITEA_URL: url, CCWEB_ADMIN_TOKEN: secret }), cwd: home, skip: new Set(['codex', 'codex-account', 'agent-isolation', 'gitea-mcp']) });
    const text = results.map(formatCheck).join('\n') + JSON.stringify(results);
    expect(text).not.toContain(secret);
    expect(text).not.toMatch(/redacted/i);
    const gitea = results.find((r) => r.check === 'gitea')!;
    expect(gitea.status).toBe('fail');
    expect(gitea.detail).toMatch(new RegExp(`^GET /api/v1/user at ${url.replace(/[.]/g, '\\.')} did not answer: \\(withheld: it contains the value of a configured secret\\)$`));
    expect(gitea.detail).toContain(WITHHELD);
  });
});
