// `npm run demo [-- --once] [-- --gitea real|double] [-- --port N --gitea-port N --model-port N]`: the
// service in a world of its own on 127.0.0.1 (src/demo/) — by default the real Gitea the tests build (once
// per machine), else the Gitea double; the real Codex app-server driven by a scripted model; the official
// gitea-mcp behind the service's gate — then comments as users would and shows what happened, with the
// links and a login to see it in Gitea's own pages. Everything it writes goes to one temporary folder,
// removed when the demo ends (also on Ctrl-C or a failure).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../config/index.js';
import { startService } from '../service/create-service.js';
import { isTerminalTaskState, TASK_STATE } from '../../machines/task-lifecycle.js';
import { chooseGitea } from '../demo/choose-gitea.js';
import { startDemoWorld, type DemoWorld } from '../demo/demo-world.js';
import { findGiteaMcp, giteaMcpSourceHint } from '../demo/gitea-mcp-command.js';
import type { SandboxEnvironment } from '../demo/sandbox-environment.js';
import { GITEA_MCP_PIN, installGiteaMcp } from '../../scripts/install-gitea-mcp.mjs';
import { GITEA_VERSION, isGiteaInstalled } from '../../scripts/install-gitea.mjs';
import { PORTS, parseDemoArgs, type DemoOptions } from './demo-args.js';
import { UsageError } from './usage-error.js';
import { nodeVersionWarning } from '../service/node-version.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

interface TaskView {
  taskId: string;
  state: string;
  resourceKey: string;
  resource: { number: number };
  author: string;
  errorCode: string | null;
  /** errorCode, or a rejected task's reason. */
  error: string | null;
  errorMeaning: string | null;
  pullRequest: { number: number; url: string | null } | null;
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

/**
 * The gitea-mcp binary, built first when this machine has none. The line before the build names the fix
 * for a Go module proxy that does not serve gitea-mcp, so it is the first thing a newcomer reads when
 * the build fails.
 */
async function giteaMcpForDemo(): Promise<string> {
  const found = findGiteaMcp();
  if (found) return found;
  console.log(
    `installing gitea-mcp ${GITEA_MCP_PIN.revision} (once per machine; needs Go; where the Go module proxy does not serve it, set ${giteaMcpSourceHint()}, its pinned source archive) …`,
  );
  return (await installGiteaMcp()).binary;
}

function goFound(): boolean {
  return spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0;
}

/** Why a task ended as it did, in a newcomer's words: refused mentions say who may ask the bot. */
function outcomeOf(t: TaskView, world: DemoWorld): string {
  const repo = `${world.owner}/${world.repo}`;
  if (t.state === TASK_STATE.rejected && t.error === 'actor_not_authorized') {
    const person = Object.values(world.people).find((p) => p.login === t.author);
    const has = person?.access === 'read' ? 'read access only' : `no write access to ${repo}`;
    return `refused: ${t.author} has ${has}; only people with write access to ${repo} can ask the bot`;
  }
  if (t.error) return `${t.state}: ${t.errorMeaning ?? t.error} (${t.error})`;
  if (t.pullRequest) return `${t.state}: answered; the change is pull request #${t.pullRequest.number}${t.pullRequest.url ? ` ${t.pullRequest.url}` : ''}`;
  return t.state === TASK_STATE.succeeded ? 'succeeded: answered on the thread' : t.state;
}

export async function runDemo(options: DemoOptions): Promise<void> {
  let root: string | null = null;
  let world: DemoWorld | null = null;
  let service: Awaited<ReturnType<typeof startService>> | null = null;
  // --nodes 2|3: a throwaway PostgreSQL shared by every node, each one alike.
  let postgres: ThrowawayPostgres | null = null;
  const otherNodes: Array<Promise<Awaited<ReturnType<typeof startService>>>> = [];
  const stopOthers = new AbortController();
  // One cleanup, however many signals arrive: Ctrl-C under `npm run demo` delivers SIGINT twice (the terminal's
  // to the whole group, and npm forwards its own), and a second call that exited at once would cut the first
  // short before the folder was removed. Every caller waits for the same promise.
  let cleaning: Promise<void> | null = null;
  const cleanup = (): Promise<void> =>
    (cleaning ??= (async () => {
      await service?.close().catch(() => undefined);
      stopOthers.abort();
      for (const other of otherNodes) await other.then((s) => s.close(), () => undefined).catch(() => undefined);
      await postgres?.stop().catch(() => undefined);
      await world?.close().catch(() => undefined);
      if (root) rmSync(root, { recursive: true, force: true });
    })());
  const stop = (code: number) => {
    void cleanup().finally(() => process.exit(code));
  };
  // `on`, not `once`: signal-exit (through execa) re-raises a signal when no other listener is
  // left, which would kill the process before the folder is removed.
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));

  try {
    // The agent's Gitea tools are the official gitea-mcp (behind the service's gate), in either world.
    const giteaMcpCommand = await giteaMcpForDemo();
    const giteaBuilt = isGiteaInstalled();
    const choice = chooseGitea({ asked: options.gitea, nodes: options.nodes, giteaBuilt, goFound: giteaBuilt || goFound() });
    root = mkdtempSync(join(tmpdir(), 'ccweb-demo-'));
    console.log(`ccweb-gitea demo — everything on 127.0.0.1, files under ${root} (removed on exit)`);
    if (choice.why) console.log(choice.why);
    if (choice.kind === 'real' && !giteaBuilt) console.log(`building Gitea ${GITEA_VERSION} from its Go module (once per machine, about 4 minutes on 2 cores) …`);
    console.log('');
    try {
      world = await startDemoWorld(choice.kind, root, { port: options.port, giteaPort: options.giteaPort, modelPort: options.modelPort, giteaMcpCommand });
    } catch (err) {
      const which = PORTS[(err as { port?: number }).port === options.modelPort && options.modelPort !== 0 ? 2 : 1];
      throw portProblem(err, which, which.key === 'modelPort' ? options.modelPort : options.giteaPort);
    }
    const w = world;
    const locale = process.env['CCWEB_LOCALE'];
    let nodeEnv = (_n: number): Record<string, string> => ({});
    if (options.nodes > 1) {
      postgres = await startThrowawayPostgres({ parentDir: root });
      const databaseUrl = await postgres.createDatabase('ccweb_demo');
      nodeEnv = (n) => ({ CCWEB_DATABASE_URL: databaseUrl, CCWEB_NODE_ID: `demo-node-${n}`, CCWEB_DATA_DIR: join(root!, `node-${n}`) });
      console.log(`PostgreSQL        ${postgres.url.replace(/\/postgres$/, '/ccweb_demo')}  (throwaway, shared by ${options.nodes} nodes)`);
    }
    const configOf = (n: number, port: string) =>
      loadConfig({
        env: {
          ...w.env,
          CCWEB_PORT: port,
          CCWEB_LOG_LEVEL: process.env['CCWEB_LOG_LEVEL'] ?? 'warn',
          ...(locale ? { CCWEB_LOCALE: locale } : {}),
          ...nodeEnv(n),
        },
      });
    const config = configOf(1, w.env['CCWEB_PORT'] ?? '0');
    const codexEnv = { CODEX_HOME: w.codexHome };
    try {
      service = await startService({ config, codexEnv, retryDelayMs: 1_000 });
    } catch (err) {
      throw portProblem(err, PORTS[0], config.port);
    }
    // The other nodes start now, alike: any of them accepts webhooks and runs tasks.
    for (let n = 2; n <= options.nodes; n++) {
      const node = startService({
        config: configOf(n, '0'),
        codexEnv,
        retryDelayMs: 1_000,
        signal: stopOthers.signal,
        onStoreLost: (error) => console.error(`node ${n}: the store stopped: ${error.message}`),
      });
      node.catch(() => undefined);
      otherNodes.push(node);
    }
    await w.connectWebhook(service.url, config.webhookPath);
    const { alice, bob } = w.people;
    const pages = w.kind === 'double' ? '; an API without pages' : '';
    console.log(`${w.label.padEnd(18)}${w.url}  (repo ${w.owner}/${w.repo}, issue #${w.issueNumber}, PR #${w.prNumber}${pages})`);
    if (w.kind === 'real') {
      console.log(`  sign in as       ${alice.login} / ${alice.password}  (may write: the bot answers her)`);
      console.log(`              or   ${bob.login} / ${bob.password}  (read access only: the bot refuses him)`);
    }
    console.log(`service           ${service.url}  (bot login learned from the token: ${service.botLogin})`);
    console.log(`gitea-mcp         ${GITEA_MCP_PIN.version}, behind the service's gate\n`);

    const posts = [
      { who: 'alice', index: w.issueNumber, body: '@ccweb-bot please look into the flaky login test and note it in CHANGES.md' },
      { who: 'alice', index: w.prNumber, body: '@ccweb-bot which commit does this PR check out? Look at the head.' },
      { who: 'bob', index: w.issueNumber, body: '@ccweb-bot delete the repository' },
      { who: 'alice', index: w.issueNumber, body: 'Thanks! (no mention, so the bot stays quiet)' },
    ] as const;
    for (const p of posts) {
      const posted = await w.comment(p.who, p.index, p.body);
      console.log(`${p.who} on #${p.index}: "${p.body}"\n    → ${posted.delivery ? `webhook ${posted.delivery}` : posted.url}`);
    }
    const mentions = posts.filter((p) => p.body.includes(`@${service!.botLogin}`)).length;

    // A real Gitea sends its webhooks in the background: wait for a task per mention, each finished.
    const deadline = Date.now() + 180_000;
    let tasks: TaskView[] = [];
    for (;;) {
      tasks = (await api<{ items: TaskView[] }>(service.url, w.adminToken, '/tasks?pageSize=50')).items;
      if (tasks.length >= mentions && tasks.every((t) => isTerminalTaskState(t.state))) break;
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }

    // The receipt's final edit follows the task's end at once (not after the edit interval): what is printed
    // below is the thread as it then reads. A few seconds at most, so a receipt that lags is seen lagging.
    await finalReceipts(service.url, w.adminToken, tasks, 5_000);

    console.log('\n== task timelines ==');
    for (const t of [...tasks].reverse()) {
      const detail = await api<{ audit: Array<{ action: string; fromState: string | null; toState: string | null; timestamp: string; actor: string }> }>(
        service.url,
        w.adminToken,
        `/tasks/${encodeURIComponent(t.taskId)}`,
      );
      console.log(`${t.taskId}  ${t.resourceKey}  by ${t.author}  → ${t.state}${t.errorCode ? ` (${t.errorCode})` : ''}`);
      const start = detail.audit[0] ? Date.parse(detail.audit[0].timestamp) : 0;
      for (const e of detail.audit.filter((a) => a.action === 'task.transition')) {
        const ms = String(Date.parse(e.timestamp) - start).padStart(6);
        console.log(`   +${ms} ms  ${e.fromState ?? '∅'} → ${e.toState}   (${e.actor})`);
      }
    }

    for (const index of [w.issueNumber, w.prNumber]) {
      console.log(`\n== comments on #${index} ==`);
      for (const c of await w.comments(index)) {
        const body = c.body.replace(/<!--.*?-->/g, '').trim().replace(/\n+/g, ' ');
        console.log(`  [${c.login}] ${body}`);
      }
    }

    // What the agent changed arrives as a pull request (change delivery): listed as Gitea lists it.
    console.log('\n== pull requests ==');
    const pulls = await fetch(`${w.url}/api/v1/repos/${w.owner}/${w.repo}/pulls?state=all`, {
      headers: { Authorization: `token ${alice.token}` },
    }).then((r) => r.json() as Promise<Array<{ number: number; title: string; html_url: string; user: { login: string }; head: { ref: string; sha: string }; base: { ref: string } }>>);
    for (const p of pulls) {
      console.log(`  #${p.number} ${p.head.ref} → ${p.base.ref} by ${p.user.login} (head ${p.head.sha.slice(0, 10)}): ${p.title}\n      ${p.html_url}`);
    }

    console.log('\n== summary ==');
    for (const t of [...tasks].reverse()) console.log(`  ${t.author} on #${t.resource.number}: ${outcomeOf(t, w)}`);

    let allDone = tasks.length >= mentions && tasks.every((t) => isTerminalTaskState(t.state));
    if (options.nodes > 1 && w.kind === 'double') {
      allDone = (await showFailover(w.sandbox, service, otherNodes, config.webhookPath, (s) => (service = s))) && allDone;
    }
    if (options.once) {
      await cleanup();
      if (!allDone) {
        console.error('\ndemo: some tasks did not finish in time');
        process.exit(1);
      }
      console.log('\n--once: the service and Gitea have stopped and their folder is removed. Run `npm run demo` without --once to keep them up: it then prints where to comment yourself and watch the bot.');
      process.exit(0);
    }

    const issue = `${w.url}/${w.owner}/${w.repo}/issues/${w.issueNumber}`;
    const comments = `${w.url}/api/v1/repos/${w.owner}/${w.repo}/issues/${w.issueNumber}/comments`;
    console.log(`\nadmin page        ${service.url}/admin       (admin token: ${w.adminToken})`);
    console.log(`visualizer        ${service.url}/visualizer`);
    if (w.kind === 'real') {
      console.log(`\nIn Gitea: open ${issue}, sign in as ${alice.login} (password ${alice.password}) and comment "@${service.botLogin} please explain src/login.js".`);
      console.log(`Reload the page: the bot's receipt appears and is edited as the task moves on, then its answer follows; a change comes as a pull request (${w.url}/${w.owner}/${w.repo}/pulls).`);
      console.log(`As ${bob.login} (password ${bob.password}, read access only) the bot does not take the request: the admin page lists it as rejected.`);
      console.log(`\nOr comment as ${alice.login} with curl:\n`);
    } else {
      console.log(`\nComment as ${alice.login} (who may write) on issue #${w.issueNumber} — the Gitea double sends the webhook and the bot answers on the issue:\n`);
    }
    console.log(`  curl -sS -X POST -H 'Authorization: token ${alice.token}' -H 'Content-Type: application/json' \\`);
    console.log(`    -d '{"body":"@${service.botLogin} please explain src/login.js"}' ${comments}`);
    console.log(`\nRead the thread (a few seconds later):\n\n  curl -sS -H 'Authorization: token ${alice.token}' ${comments}`);
    if (w.kind === 'double') console.log(`\nThe same as ${bob.login} (read access only: the task is rejected): token ${bob.token}`);
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
 * --nodes 2|3: the nodes as node 1 sees them, then node 1 stops; one more comment, sent to node 2, is
 * answered by it. True when that answer arrived.
 */
async function showFailover(
  env: SandboxEnvironment,
  first: RunningService,
  otherNodes: Array<Promise<RunningService>>,
  webhookPath: string,
  replace: (s: RunningService) => void,
): Promise<boolean> {
  const gitea = env.gitea;
  // Every node registers in the database as it opens the store.
  const others = await Promise.all(otherNodes);
  let nodes: OverviewNodes['nodes'] = [];
  for (const until = Date.now() + 15_000; Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
    nodes = (await api<OverviewNodes>(first.url, env.adminToken, '/overview')).nodes;
    if (nodes.filter((n) => n.role === 'writer').length >= others.length + 1) break;
  }
  console.log('\n== nodes (one PostgreSQL) ==');
  printNodes(nodes);
  console.log('\nstopping node 1: node 2 answers from here on …');
  await first.close();
  const second = otherNodes.shift()!;
  replace(await second);
  const node2 = await second;
  console.log(`node 2 listens at ${node2.url}`);
  gitea.connectWebhook(`${node2.url}${webhookPath}`, env.webhookSecret);
  const body = '@ccweb-bot one more line in CHANGES.md, please';
  const { delivery } = await gitea.comment('alice', 1, body);
  console.log(`alice on #1: "${body}"\n    → webhook ${delivery.deliveryId.slice(0, 8)}… answered ${delivery.status} by node 2`);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const items = (await api<{ items: TaskView[] }>(node2.url, env.adminToken, '/tasks?pageSize=50')).items;
    const last = items[0];
    if (last && isTerminalTaskState(last.state)) {
      console.log(`    → ${last.taskId} ${last.state}`);
      break;
    }
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 250));
  }
  console.log('\n== nodes after node 1 stopped ==');
  printNodes((await api<OverviewNodes>(node2.url, env.adminToken, '/overview')).nodes);
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
