// `npm run demo [-- --once] [-- --port N --gitea-port N --model-port N]`: the service together with
// a local sandbox — a Gitea test double (REST, git over smart HTTP, signed webhooks as Gitea sends
// them), the real Codex app-server driven by a scripted model, and the official gitea-mcp behind the
// service's gate — then
// comments as a user would and shows what happened. Everything listens on 127.0.0.1; everything it
// writes goes to one temporary folder, removed when the demo ends (also on Ctrl-C or a failure).
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../config/index.js';
import { startService } from '../service/create-service.js';
import { isTerminalTaskState } from '../../machines/task-lifecycle.js';
import { startSandboxEnvironment, type SandboxEnvironment } from '../../test/support/sandbox/sandbox-environment.js';
import { GITEA_MCP_PIN, installGiteaMcp, isGiteaMcpInstalled } from '../../scripts/install-gitea-mcp.mjs';
import { PORTS, parseDemoArgs, type DemoOptions } from './demo-args.js';
import { UsageError } from './usage-error.js';
import { nodeVersionWarning } from '../service/node-version.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

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

/** A listen failure said in terms of the option that sets the port. */
function portProblem(err: unknown, which: (typeof PORTS)[number], port: number): Error {
  const code = (err as { code?: string }).code;
  if (code !== 'EADDRINUSE' && code !== 'EACCES') return err as Error;
  return new Error(
    `${which.what} cannot listen on 127.0.0.1:${port} (${code === 'EADDRINUSE' ? 'the port is in use' : 'permission denied'}): choose another port with ${which.flag} or ${which.env}, or 0 for a free one`,
  );
}

export async function runDemo(options: DemoOptions): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-demo-'));
  let env: SandboxEnvironment | null = null;
  let service: Awaited<ReturnType<typeof startService>> | null = null;
  // --nodes 2|3: a throwaway PostgreSQL, the first node writing, the others waiting as standbys.
  let postgres: ThrowawayPostgres | null = null;
  const standbys: Array<Promise<Awaited<ReturnType<typeof startService>>>> = [];
  const stopStandbys = new AbortController();
  // One cleanup, however many signals arrive: Ctrl-C under `npm run demo` delivers SIGINT twice (the terminal's
  // to the whole group, and npm forwards its own), and a second call that exited at once cut the first short
  // before the folder was removed (issue 32). Every caller waits for the same promise.
  let cleaning: Promise<void> | null = null;
  const cleanup = (): Promise<void> =>
    (cleaning ??= (async () => {
      await service?.close().catch(() => undefined);
      stopStandbys.abort();
      for (const standby of standbys) await standby.then((s) => s.close(), () => undefined).catch(() => undefined);
      await postgres?.stop().catch(() => undefined);
      await env?.close().catch(() => undefined);
      rmSync(root, { recursive: true, force: true });
    })());
  const stop = (code: number) => {
    void cleanup().finally(() => process.exit(code));
  };
  // `on`, not `once`: signal-exit (through execa) re-raises a signal when no other listener is
  // left, which would kill the process before the folder is removed.
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));

  try {
    console.log(`ccweb-gitea demo — everything on 127.0.0.1, files under ${root} (removed on exit)\n`);
    // The agent's Gitea tools are the official gitea-mcp (behind the service's gate): built once per machine.
    if (!isGiteaMcpInstalled()) {
      console.log(`installing gitea-mcp ${GITEA_MCP_PIN.revision} (once per machine; needs Go) …`);
      await installGiteaMcp();
    }
    try {
      env = await startSandboxEnvironment(root, { giteaPort: options.giteaPort, modelPort: options.modelPort });
    } catch (err) {
      const which = PORTS[(err as { port?: number }).port === options.modelPort && options.modelPort !== 0 ? 2 : 1];
      throw portProblem(err, which, which.key === 'modelPort' ? options.modelPort : options.giteaPort);
    }
    const locale = process.env['CCWEB_LOCALE'];
    let nodeEnv = (_n: number): Record<string, string> => ({});
    if (options.nodes > 1) {
      postgres = await startThrowawayPostgres({ parentDir: root });
      const databaseUrl = await postgres.createDatabase('ccweb_demo');
      nodeEnv = (n) => ({ CCWEB_DATABASE_URL: databaseUrl, CCWEB_NODE_ID: `demo-node-${n}`, CCWEB_DATA_DIR: join(root, `node-${n}`) });
      console.log(`PostgreSQL        ${postgres.url.replace(/\/postgres$/, '/ccweb_demo')}  (throwaway, shared by ${options.nodes} nodes)`);
    }
    const configOf = (n: number, port: number) =>
      loadConfig({
        env: {
          ...env!.env,
          CCWEB_PORT: String(port),
          CCWEB_LOG_LEVEL: process.env['CCWEB_LOG_LEVEL'] ?? 'warn',
          ...(locale ? { CCWEB_LOCALE: locale } : {}),
          ...nodeEnv(n),
        },
      });
    const config = configOf(1, options.port);
    const codexEnv = { CODEX_HOME: env.codexHome };
    try {
      service = await startService({ config, codexEnv, retryDelayMs: 1_000 });
    } catch (err) {
      throw portProblem(err, PORTS[0], options.port);
    }
    // The other nodes start now and wait: they take over when node 1 stops.
    for (let n = 2; n <= options.nodes; n++) {
      const standby = startService({
        config: configOf(n, 0),
        codexEnv,
        retryDelayMs: 1_000,
        signal: stopStandbys.signal,
        onStoreLost: (error) => console.error(`node ${n}: the store stopped: ${error.message}`),
      });
      standby.catch(() => undefined);
      standbys.push(standby);
    }
    const gitea = env.gitea;
    gitea.connectWebhook(`${service.url}${config.webhookPath}`, env.webhookSecret);
    console.log(`sandbox Gitea     ${gitea.url}  (repo ${gitea.owner}/${gitea.repo}, issue #1, PR #2)`);
    console.log(`service           ${service.url}  (bot login learned from the token: ${service.botLogin})`);
    console.log(`gitea-mcp         ${GITEA_MCP_PIN.version}, behind the service's gate\n`);

    const posts = [
      { who: 'alice', index: 1, body: '@ccweb-bot please look into the flaky login test and note it in CHANGES.md' },
      { who: 'alice', index: 2, body: '@ccweb-bot which commit does this PR check out? Look at the head.' },
      { who: 'bob', index: 1, body: '@ccweb-bot delete the repository' },
      { who: 'alice', index: 1, body: 'Thanks! (no mention, so the bot stays quiet)' },
    ];
    for (const p of posts) {
      const { delivery } = await gitea.comment(p.who, p.index, p.body);
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

    // The receipt's final edit follows the task's end at once (not after the edit interval): what is printed
    // below is the thread as it then reads. A few seconds at most, so a receipt that lags is seen lagging.
    await finalReceipts(service.url, env.adminToken, tasks, 5_000);

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
      for (const c of gitea.comments(index)) {
        const user = (c.user as { login: string }).login;
        const body = String(c.body).replace(/<!--.*?-->/g, '').trim().replace(/\n+/g, ' ');
        console.log(`  [${user}] ${body}`);
      }
    }

    // What the agent changed arrives as a pull request (change delivery): the sandbox lists it like Gitea.
    console.log('\n== pull requests ==');
    const pulls = await fetch(`${gitea.url}/api/v1/repos/${gitea.owner}/${gitea.repo}/pulls?state=all`, {
      headers: { Authorization: `token ${gitea.userTokens['alice']}` },
    }).then((r) => r.json() as Promise<Array<{ number: number; title: string; html_url: string; user: { login: string }; head: { ref: string; sha: string }; base: { ref: string } }>>);
    for (const p of pulls) {
      console.log(`  #${p.number} ${p.head.ref} → ${p.base.ref} by ${p.user.login} (head ${p.head.sha.slice(0, 10)}): ${p.title}\n      ${p.html_url}`);
    }

    let allDone = tasks.length > 0 && tasks.every((t) => isTerminalTaskState(t.state));
    if (options.nodes > 1) allDone = (await showFailover(gitea, env, service, standbys, config.webhookPath, (s) => (service = s))) && allDone;
    if (options.once) {
      await cleanup();
      if (!allDone) {
        console.error('\ndemo: some tasks did not finish in time');
        process.exit(1);
      }
      console.log('\n--once: the service and the sandbox have stopped and their folder is removed. Run `npm run demo` without --once to keep them up: it then prints the admin page, its token and a curl command to comment as alice.');
      process.exit(0);
    }

    const comments = `${gitea.url}/api/v1/repos/${gitea.owner}/${gitea.repo}/issues/1/comments`;
    console.log(`\nadmin page        ${service.url}/admin       (admin token: ${env.adminToken})`);
    console.log(`visualizer        ${service.url}/visualizer`);
    console.log(`\nComment as alice (who may write) on issue #1 — the sandbox Gitea sends the webhook and the bot answers on the issue:\n`);
    console.log(`  curl -sS -X POST -H 'Authorization: token ${gitea.userTokens['alice']}' -H 'Content-Type: application/json' \\`);
    console.log(`    -d '{"body":"@ccweb-bot please explain src/login.js"}' ${comments}`);
    console.log(`\nRead the thread (a few seconds later):\n\n  curl -sS -H 'Authorization: token ${gitea.userTokens['alice']}' ${comments}`);
    console.log(`\nThe same as bob (read access only: the task is rejected): token ${gitea.userTokens['bob']}`);
    console.log('\nRunning until Ctrl-C.');
  } catch (err) {
    console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
    stop(1);
  }
}

type RunningService = Awaited<ReturnType<typeof startService>>;

/** The nodes of `/overview`, as far as the demo prints them. */
type OverviewNodes = { nodes: Array<{ nodeId: string; role: string; self: boolean; heartbeatAt: string }> };

function printNodes(nodes: OverviewNodes['nodes']): void {
  for (const n of nodes) console.log(`  ${n.nodeId.padEnd(12)} ${n.role.padEnd(8)} last heartbeat ${n.heartbeatAt}${n.self ? '   (the node asked)' : ''}`);
}

/**
 * --nodes 2|3: the nodes as the writer sees them, then node 1 stops and node 2 takes over; one more
 * comment is answered by node 2. True when that answer arrived.
 */
async function showFailover(
  gitea: SandboxEnvironment['gitea'],
  env: SandboxEnvironment,
  first: RunningService,
  standbys: Array<Promise<RunningService>>,
  webhookPath: string,
  replace: (s: RunningService) => void,
): Promise<boolean> {
  // A standby registers while it waits; the writer reads the list with its heartbeat (every 10 s).
  let nodes: OverviewNodes['nodes'] = [];
  for (const until = Date.now() + 15_000; Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
    nodes = (await api<OverviewNodes>(first.url, env.adminToken, '/overview')).nodes;
    if (nodes.filter((n) => n.role === 'standby').length >= standbys.length) break;
  }
  console.log('\n== nodes (one PostgreSQL) ==');
  printNodes(nodes);
  console.log('\nstopping node 1: node 2 takes over …');
  const t0 = Date.now();
  await first.close();
  const second = await standbys.shift()!;
  replace(second);
  console.log(`node 2 listens at ${second.url} after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  gitea.connectWebhook(`${second.url}${webhookPath}`, env.webhookSecret);
  const body = '@ccweb-bot one more line in CHANGES.md, please';
  const { delivery } = await gitea.comment('alice', 1, body);
  console.log(`alice on #1: "${body}"\n    → webhook ${delivery.deliveryId.slice(0, 8)}… answered ${delivery.status} by node 2`);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const items = (await api<{ items: TaskView[] }>(second.url, env.adminToken, '/tasks?pageSize=50')).items;
    const last = items[0];
    if (last && isTerminalTaskState(last.state)) {
      console.log(`    → ${last.taskId} ${last.state}`);
      break;
    }
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 250));
  }
  console.log('\n== nodes after the take-over ==');
  printNodes((await api<OverviewNodes>(second.url, env.adminToken, '/overview')).nodes);
  return true;
}

// Run directly (`npm run demo`, `node --import tsx src/cli/demo.ts`); the CLI calls runDemo itself.
function isEntryPoint(): boolean {
  try {
    return process.argv[1] !== undefined && realpathSync(resolve(process.argv[1])) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}
if (isEntryPoint()) {
  const oldNode = nodeVersionWarning(process.version);
  if (oldNode) process.stderr.write(`${oldNode}\n`);
  try {
    await runDemo(parseDemoArgs(process.argv.slice(2), process.env));
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(err instanceof UsageError ? 2 : 1);
  }
}

/** Waits (at most `timeoutMs`) until every posted receipt of `tasks` has had its final edit. */
async function finalReceipts(url: string, token: string, tasks: TaskView[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const t of tasks) {
    for (;;) {
      const { comments } = await api<{ comments: Array<{ commentKey: string; status: string; progress?: { final?: boolean } }> }>(url, token, `/tasks/${encodeURIComponent(t.taskId)}`);
      const receipt = comments.find((c) => c.commentKey === `${t.taskId}:status:received`);
      if (!receipt || receipt.status !== 'sent' || receipt.progress?.final === true || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
