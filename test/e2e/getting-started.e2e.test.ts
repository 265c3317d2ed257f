// docs/getting-started.md, run as written: every `sh install-step` block of the guide, in order, in one bash
// shell, against a real Gitea 1.26.3 that holds only what the guide starts from (a site administrator with a
// token of the scopes it names, and a repository). The shell gets the variables the guide asks the reader to
// set (GITEA_URL, GITEA_ADMIN_TOKEN, REPO, SERVICE_DIR, PORT, HOOK_URL), a HOME of its own, and nothing else
// of this process's environment but PATH, the run's process marker and CCWEB_GITEA_MCP_SOURCE (which the
// guide tells readers to set where the Go module proxy does not serve gitea-mcp). The guide's own last block
// waits for the bot's answer; the test then checks it on Gitea and in the service's task record.
//
// Replaced, each for the reason given: `install-step=clone` (the clone and `npm ci`: this checkout, whose
// `npm ci` the suite already ran, stands for the clone; a fresh `npm ci` is a minute of CI, and
// `npm run test:install` runs one in a fresh Debian), `install-step=login` (a Codex login needs a person and
// an account: the shell's HOME gets the scripted model's ~/.codex/config.toml instead, as every e2e test does).
// The guide's alternative, a system webhook instead of the repository's, is run too: with the repository
// webhook deleted, a second mention is answered through it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installStepsOf, type InstallStep } from '../../scripts/test-install/install-steps.js';
import { REAL_GITEA_MCP_TAG } from '../support/real-gitea-mcp.js';
import { freePort, giteaApi, startRealGitea, type RealGitea } from '../support/real-gitea/index.js';
import { scriptedAgent } from '../../src/demo/scripted-agent.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel } from '../../src/demo/scripted-model.js';

const checkout = join(import.meta.dirname, '..', '..');
const guide = join(checkout, 'docs', 'getting-started.md');
const root = mkdtempSync(join(tmpdir(), 'ccweb-getting-started-'));
const home = join(root, 'home');
const serviceDir = join(root, 'service');
const ADMIN = { login: 'gitea-admin', password: 'pw-admin-0123456789', email: 'admin@example.invalid' };
/** What the guide asks the administrator's token to hold, and no more: the test shows it is enough. */
const ADMIN_SCOPES = ['write:admin', 'write:repository', 'write:issue'];
const REPO = 'gitea-admin/widget';

let gitea: RealGitea;
let model: ScriptedModel;
let adminToken = '';
let port = 0;
const shells: ChildProcess[] = [];

interface Run {
  code: number | null;
  text: string;
}

/** Runs `script` in bash with only the guide's variables (plus PATH, HOME and the run's marker). */
function bash(script: string): Promise<Run> {
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    LANG: 'C.UTF-8',
    GITEA_URL: gitea.url,
    GITEA_ADMIN_TOKEN: adminToken,
    REPO,
    SERVICE_DIR: serviceDir,
    PORT: String(port),
    HOOK_URL: `http://127.0.0.1:${port}/api/gitea/webhook`,
  };
  for (const key of ['CCWEB_TEST_RUN_ID', 'CCWEB_GITEA_MCP_SOURCE']) if (process.env[key]) env[key] = process.env[key]!;
  return new Promise((resolve) => {
    // Its own process group: the service the guide starts in the background is stopped with it.
    const child = spawn('bash', ['-c', script], { env, cwd: root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    shells.push(child);
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.stderr.on('data', (d: Buffer) => (text += d.toString()));
    child.on('close', (code) => resolve({ code, text }));
  });
}

const label = (s: InstallStep) => `docs/getting-started.md:${s.line}${s.name ? ` (${s.name}: replaced)` : ''}`;

interface GiteaComment {
  id: number;
  body: string;
  user: { login: string };
}

const comments = async (issue: number) =>
  (await giteaApi<GiteaComment[]>(gitea.url, { token: adminToken }, 'GET', `/repos/${REPO}/issues/${issue}/comments`, undefined, 200)).body;

/** The service's record of the task a comment became (control API, with the admin token the guide made). */
async function taskOf(commentId: number): Promise<{ state: string; taskId: string } | undefined> {
  const token = readFileSync(join(serviceDir, 'admin_token'), 'utf8');
  const res = await fetch(`http://127.0.0.1:${port}/api/gitea-workflow/tasks?pageSize=100`, { headers: { Authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { items: Array<{ taskId: string; state: string; commentUrl: string | null }> };
  const t = body.items.find((i) => i.commentUrl?.endsWith(`#issuecomment-${commentId}`));
  return t ? { state: t.state, taskId: t.taskId } : undefined;
}

beforeAll(async () => {
  const t0 = Date.now();
  // The Gitea the guide starts from: a site administrator (made with Gitea's CLI, as on a fresh install),
  // a token of the scopes the guide names, and a repository with a file.
  gitea = await startRealGitea();
  await gitea.cli(['admin', 'user', 'create', '--username', ADMIN.login, '--password', ADMIN.password, '--email', ADMIN.email, '--admin', '--must-change-password=false']);
  const basic = { basic: { login: ADMIN.login, password: ADMIN.password } };
  adminToken = (await giteaApi<{ sha1: string }>(gitea.url, basic, 'POST', `/users/${ADMIN.login}/tokens`, { name: 'admin', scopes: ADMIN_SCOPES }, 201)).body.sha1;
  await giteaApi(gitea.url, basic, 'POST', '/user/repos', { name: 'widget', auto_init: true, default_branch: 'main', private: true }, 201);
  model = await startScriptedModel();
  model.setResponder(scriptedAgent());
  mkdirSync(home, { recursive: true });
  writeCodexHome(join(home, '.codex'), { port: model.port, model: 'fake-model' });
  port = await freePort();
  console.log(`the existing Gitea: ${Date.now() - t0} ms`);
}, 120_000);

afterAll(async () => {
  // The guide's `kill "$(cat "$SERVICE_DIR/service.pid")"`, to every shell's group (the service the guide
  // started in the background is in it); what has not stopped after the service's 20 s drain is killed.
  const alive = (s: ChildProcess) => {
    try {
      process.kill(-s.pid!, 0);
      return true;
    } catch {
      return false;
    }
  };
  const t0 = Date.now();
  for (const s of shells.filter(alive)) process.kill(-s.pid!, 'SIGTERM');
  const deadline = Date.now() + 25_000;
  while (shells.some(alive) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 200));
  for (const s of shells.filter(alive)) process.kill(-s.pid!, 'SIGKILL');
  const t1 = Date.now();
  await model?.close();
  await gitea?.close();
  console.log(`service stopped in ${t1 - t0} ms, Gitea in ${Date.now() - t1} ms`);
  rmSync(root, { recursive: true, force: true });
}, 60_000);

describe(`docs/getting-started.md, as written, against a real Gitea ${REAL_GITEA_MCP_TAG}`, () => {
  let issue = 0;

  it('its steps, run in one shell, end with the bot answering the mention', { timeout: 300_000 }, async () => {
    const steps = installStepsOf(guide);
    expect(steps.map((s) => s.name).filter(Boolean)).toEqual(['clone', 'login']);
    const replaced: Record<string, string> = {
      clone: `cd ${JSON.stringify(checkout)}`,
      login: 'test -s "$HOME/.codex/config.toml"',
    };
    const script = ['set -euo pipefail', ...steps.map((s) => `echo "== $(date +%T.%N | cut -c1-12) ${label(s)}"\n${s.name ? replaced[s.name] : s.script}`)].join('\n');
    const started = Date.now();
    const run = await bash(script);
    console.log(`getting-started steps: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    writeFileSync(join(tmpdir(), 'ccweb-getting-started.log'), run.text);
    expect(run.code, run.text.slice(-6000)).toBe(0);

    // doctor (step 7) found nothing wrong; its lines are `ok|warn|fail|skip  <check>  …`.
    const doctor = run.text.split('\n').filter((l) => /^(ok|warn|fail|skip)\s{2,}/.test(l));
    console.log(doctor.join('\n'));
    expect(doctor.filter((l) => l.startsWith('fail')), run.text.slice(-6000)).toEqual([]);
    for (const check of ['config', 'codex', 'codex-account', 'agent-isolation', 'gitea-mcp', 'gitea', 'token-scope', 'token-scopes', 'webhook-secret']) {
      expect(doctor.some((l) => new RegExp(`^ok\\s+${check}\\s`).test(l)), `doctor: ${check} ok\n${doctor.join('\n')}`).toBe(true);
    }

    // The last step printed the issue's URL and then the bot's comments: the receipt and the answer.
    const url = new RegExp(`${gitea.url}/${REPO}/issues/(\\d+)`).exec(run.text);
    expect(url, run.text.slice(-3000)).not.toBeNull();
    issue = Number(url![1]);
    const thread = await comments(issue);
    const mention = thread.find((c) => c.user.login === ADMIN.login)!;
    const bot = thread.filter((c) => c.user.login === 'ccweb-bot');
    expect(bot, JSON.stringify(thread, null, 1)).toHaveLength(2);
    expect(bot[0]!.body).toMatch(/^giteabot: /);
    expect(bot[1]!.body).toMatch(/<!-- ccweb taskId=\S+ turnKey=\S+ resource=default:gitea-admin\/widget:issue:\d+ -->/);
    expect(run.text).toContain(bot[1]!.body.split('\n')[0]!);
    // The service verified the answer on Gitea before it called the task done.
    const deadline = Date.now() + 30_000;
    let task = await taskOf(mention.id);
    while (task?.state !== 'succeeded' && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 500));
      task = await taskOf(mention.id);
    }
    expect(task?.state).toBe('succeeded');
  });

  it('the alternative, one system webhook instead of the repository webhook, delivers mentions too', { timeout: 120_000 }, async () => {
    expect(issue).toBeGreaterThan(0);
    const [alternative, ...more] = installStepsOf(guide, 'install-alternative');
    expect(alternative?.name).toBe('system-webhook');
    expect(more).toEqual([]);
    const hooks = (await giteaApi<Array<{ id: number }>>(gitea.url, { token: adminToken }, 'GET', `/repos/${REPO}/hooks`, undefined, 200)).body;
    expect(hooks).toHaveLength(1);
    await giteaApi(gitea.url, { token: adminToken }, 'DELETE', `/repos/${REPO}/hooks/${hooks[0]!.id}`, undefined, 204);
    const run = await bash(`set -euo pipefail\n${alternative!.script}`);
    expect(run.code, run.text).toBe(0);

    const mention = (
      await giteaApi<GiteaComment>(gitea.url, { token: adminToken }, 'POST', `/repos/${REPO}/issues/${issue}/comments`, { body: '@ccweb-bot and once more, please' }, 201)
    ).body;
    const deadline = Date.now() + 60_000;
    let task = await taskOf(mention.id);
    while (!['succeeded', 'failed', 'failed_reply', 'rejected'].includes(task?.state ?? '') && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 500));
      task = await taskOf(mention.id);
    }
    expect(task?.state).toBe('succeeded');
    // Its receipt and its answer, after the first task's two.
    const bot = (await comments(issue)).filter((c) => c.user.login === 'ccweb-bot');
    expect(bot).toHaveLength(4);
    expect(bot[3]!.body).toContain(`<!-- ccweb taskId=${task!.taskId} `);
  });
});
