// `npm run demo [-- --once]`: the service together with a local sandbox — a Gitea test double (REST,
// git over smart HTTP, signed webhooks as Gitea sends them), the real Codex app-server driven by a
// scripted model, and a gitea-mcp stand-in — then comments as a user would and shows what happened.
// Everything listens on 127.0.0.1.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../config/index.js';
import { startService } from '../service/create-service.js';
import { isTerminalTaskState } from '../../machines/task-lifecycle.js';
import { startSandboxEnvironment } from '../../test/support/sandbox/sandbox-environment.js';

const once = process.argv.includes('--once');
const root = mkdtempSync(join(tmpdir(), 'ccweb-demo-'));

interface TaskView {
  taskId: string;
  state: string;
  resourceKey: string;
  author: string;
  errorCode: string | null;
}

async function api<T>(base: string, token: string, path: string): Promise<T> {
  const res = await fetch(`${base}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

async function main(): Promise<void> {
  console.log(`ccweb-gitea demo — everything on 127.0.0.1, files under ${root}\n`);
  const env = await startSandboxEnvironment(root);
  const config = loadConfig({ env: { ...env.env, CCWEB_PORT: process.env.CCWEB_PORT ?? '0', CCWEB_LOG_LEVEL: process.env.CCWEB_LOG_LEVEL ?? 'warn' } });
  const service = await startService({ config, codexEnv: { CODEX_HOME: env.codexHome }, retryDelayMs: 1_000 });
  env.gitea.connectWebhook(`${service.url}${config.webhookPath}`, env.webhookSecret);
  console.log(`sandbox Gitea     ${env.gitea.url}  (repo ${env.gitea.owner}/${env.gitea.repo}, issue #1, PR #2)`);
  console.log(`service           ${service.url}  (bot login learned from the token: ${service.botLogin})`);
  console.log(`gitea-mcp         ${env.mcp === 'real' ? 'the real binary' : 'stand-in (same tool names and schemas)'}\n`);

  const posts = [
    { who: 'alice', index: 1, body: '@ccweb-bot please look into the flaky login test' },
    { who: 'alice', index: 2, body: '@ccweb-bot which commit does this PR check out? Look at the head.' },
    { who: 'bob', index: 1, body: '@ccweb-bot delete the repository' },
    { who: 'alice', index: 1, body: 'Thanks! (no mention, so the bot stays quiet)' },
  ];
  for (const p of posts) {
    const { delivery } = await env.gitea.comment(p.who, p.index, p.body);
    console.log(`${p.who} on #${p.index}: "${p.body}"\n    → webhook ${delivery.deliveryId.slice(0, 8)}… answered ${delivery.status} ${delivery.responseBody}`);
  }

  const deadline = Date.now() + 120_000;
  let tasks: TaskView[] = [];
  for (;;) {
    tasks = (await api<{ items: TaskView[] }>(service.url, env.adminToken, '/tasks?pageSize=50')).items;
    if (tasks.length > 0 && tasks.every((t) => isTerminalTaskState(t.state))) break;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 250));
  }

  console.log('\n== task timelines ==');
  for (const t of [...tasks].reverse()) {
    const detail = await api<{ audit: Array<{ action: string; fromState: string | null; toState: string | null; timestamp: string; actor: string }> }>(
      service.url,
      env.adminToken,
      `/tasks/${encodeURIComponent(t.taskId)}`,
    );
    console.log(`${t.taskId}  ${t.resourceKey}  by ${t.author}  → ${t.state}${t.errorCode ? ` (${t.errorCode})` : ''}`);
    const start = detail.audit[0] ? Date.parse(detail.audit[0].timestamp) : 0;
    for (const e of detail.audit.filter((a) => a.action === 'task.transition')) {
      const ms = String(Date.parse(e.timestamp) - start).padStart(6);
      console.log(`   +${ms} ms  ${e.fromState ?? '∅'} → ${e.toState}   (${e.actor})`);
    }
  }

  for (const index of [1, 2]) {
    console.log(`\n== comments on #${index} ==`);
    for (const c of env.gitea.comments(index)) {
      const user = (c.user as { login: string }).login;
      const body = String(c.body).replace(/<!--.*?-->/g, '').trim().replace(/\n+/g, ' ');
      console.log(`  [${user}] ${body}`);
    }
  }
  console.log(`\nadmin page        ${service.url}/admin       (admin token: ${env.adminToken})`);
  console.log(`visualizer        ${service.url}/visualizer`);

  const allDone = tasks.length > 0 && tasks.every((t) => isTerminalTaskState(t.state));
  if (once) {
    await service.close();
    await env.close();
    if (!allDone) {
      console.error('\ndemo: some tasks did not finish in time');
      process.exit(1);
    }
    process.exit(0);
  }
  console.log('\nRunning until Ctrl-C. Comment as alice with: curl (see README) or open the admin page.');
  process.on('SIGINT', () => {
    void service.close().then(() => env.close()).then(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  console.error(`demo failed: ${err instanceof Error ? err.stack : String(err)}`);
  process.exit(1);
});
