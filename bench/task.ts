// `npm run bench:task`: what a task costs besides the model, on a big repository, each step
// next to the bare operation it stands on, timed in the same run.
//
// The world (bench/task-env.ts): real Gitea 1.26 serving the cached generated repository
// (bench/big-repo.ts), the real service process, the real Codex app-server with the scripted model
// answering at once, the real gitea-mcp behind the gate. Every task is a comment by alice that asks
// for a change (`change-file`): the agent appends a line to CHANGES.md through Codex's shell tool and
// answers through gitea-mcp; the service commits, pushes, opens the pull request and reads the answer
// back. The service's step times come from its own audit timeline (task, session and publish events,
// `GET /api/gitea-workflow/audit`), not from instrumentation.
//
// Floors, by hand in the same run on a copy of the same repository: `git clone`; `git fetch`; `git
// worktree add`; `git add -A && git commit`; `git push`; the pull request's POST (retried at once while
// Gitea has not registered the pushed branch yet, which it does asynchronously); one GET of the issue's
// comments; a Codex `thread/start` with gitea-mcp configured directly (no gate) on an app-server of our
// own; gitea-mcp alone (spawn, MCP initialize, tools/list).
//
// Then 8 tasks on 8 copies at once, next to 8 bare clones at once. Memory: the service's and the
// app-server's RSS, sampled every 100 ms during the big-repository tasks.
//
// The service runs as production runs it (`npm run build` first, then dist/src/main.js); BENCH_TSX=1
// runs src/ through tsx (as `npm start` does). BENCH_REPO_FILES / BENCH_REPO_COMMITS: another shape (bench/big-repo.ts). BENCH_CONCURRENT=0 skips the
// 8-at-once part; BENCH_CONCURRENT=N runs N. No assertions: figures only (machines are noisy).
import { execFile, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { bigRepo, shapeFromEnv } from './big-repo.js';
import { startTaskBenchEnv, type TaskBenchEnv } from './task-env.js';
import { CodexAppServerConnection } from '../src/codex/jsonrpc-connection.js';
import { threadStartParams } from '../src/codex/thread-params.js';
import { REAL_GITEA_MCP_PATH } from '../test/support/real-gitea-mcp.js';

const execFileP = promisify(execFile);
const CONCURRENT = Number(process.env['BENCH_CONCURRENT'] ?? 8);
const COMPILED = process.env['BENCH_TSX'] !== '1';
const FINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'blocked_workspace', 'cancelled', 'aborted'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const say = (line = '') => console.error(line);

// ---------------------------------------------------------------------------------------------
// Floors

async function timedMs(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

function gitAuthArgs(token: string): string[] {
  return ['-c', `http.extraHeader=Authorization: Basic ${Buffer.from(`ccweb-bot:${token}`).toString('base64')}`];
}

async function git(env: TaskBenchEnv, args: string[], cwd: string): Promise<string> {
  const { stdout } = await execFileP('git', [...gitAuthArgs(env.botToken), '-c', 'user.name=floor', '-c', 'user.email=floor@example.invalid', ...args], {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, GIT_TERMINAL_PROMPT: '0' },
  });
  return stdout;
}

interface GitFloor {
  clone?: number;
  fetch?: number;
  worktreeAdd?: number;
  commit?: number;
  push?: number;
  pullRequest?: number;
  comments?: number;
  /** `git status` in the reused worktree (what a task must know before it works in a tree again). */
  status?: number;
}

/** The bare operations of one task on `repo`, by hand. `dir`: where the floor's clone lives. */
async function gitFloors(env: TaskBenchEnv, repo: string, dir: string, label: string, cold: boolean): Promise<GitFloor> {
  const url = `${env.gitea.url}/${env.gitea.owner}/${repo}.git`;
  const clone = join(dir, 'clone');
  const f: GitFloor = {};
  if (cold) f.clone = await timedMs(() => git(env, ['clone', '--quiet', '--', url, clone], dir));
  else f.fetch = await timedMs(() => git(env, ['fetch', '--quiet', '--prune', 'origin', '+refs/heads/*:refs/remotes/origin/*'], clone));
  if (!cold) f.status = await timedMs(() => git(env, ['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=all'], join(dir, 'wt-a')));
  const wt = join(dir, `wt-${label}`);
  f.worktreeAdd = await timedMs(() => git(env, ['worktree', 'add', '--quiet', '--no-track', '-B', `floor-${label}`, wt, 'origin/main'], clone));
  appendFileSync(join(wt, 'CHANGES.md'), `floor ${label}\n`);
  f.commit = await timedMs(async () => {
    await git(env, ['add', '--all', '--', '.'], wt);
    await git(env, ['commit', '--quiet', '--no-verify', '-m', `floor ${label}`], wt);
  });
  f.push = await timedMs(() => git(env, ['push', '--quiet', '--no-verify', '--', url, `HEAD:refs/heads/floor-${label}`], wt));
  const pullPath = `/repos/${env.gitea.owner}/${repo}/pulls`;
  f.pullRequest = await timedMs(async () => {
    for (let i = 0; ; i++) {
      const r = await env.gitea.api('acme', 'POST', pullPath, { head: `floor-${label}`, base: 'main', title: `floor ${label}` }, [201, 404, 409, 422]);
      if (r.status === 201) return;
      if (i > 400) throw new Error(`floor pull request: ${r.status}`);
      await sleep(5);
    }
  });
  f.comments = await timedMs(() => env.gitea.api('ccweb-bot', 'GET', `/repos/${env.gitea.owner}/${repo}/issues/1/comments`, undefined, 200));
  return f;
}

/** Codex `thread/start` with gitea-mcp configured directly (no gate), on an app-server of our own. */
async function threadFloor(env: TaskBenchEnv, cwd: string, n: number): Promise<number[]> {
  const conn = new CodexAppServerConnection({ cwd, requestTimeoutMs: 60_000, extraEnv: { CODEX_HOME: env.codexHome } });
  await conn.start();
  const out: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      out.push(
        await timedMs(() =>
          conn.request('thread/start', threadStartParams({ cwd, giteaMcp: { command: REAL_GITEA_MCP_PATH, giteaUrl: env.gitea.url, token: env.botToken } }), { timeoutMs: 60_000 }),
        ),
      );
    }
  } finally {
    await conn.close({ graceMs: 2_000, termMs: 2_000 }).catch(() => undefined);
  }
  return out;
}

/** gitea-mcp alone: spawn, MCP initialize, tools/list answered. */
async function mcpFloor(env: TaskBenchEnv): Promise<number> {
  const t0 = performance.now();
  const child = spawn(REAL_GITEA_MCP_PATH, ['-t', 'stdio', '-host', env.gitea.url], { env: { ...process.env, GITEA_ACCESS_TOKEN: env.botToken, GITEA_HOST: env.gitea.url }, stdio: ['pipe', 'pipe', 'ignore'] });
  const lines: string[] = [];
  let buf = '';
  const got = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (lines.some((l) => l.includes('"id":2'))) resolve();
      }
    });
    child.on('exit', () => reject(new Error('gitea-mcp exited')));
  });
  const send = (m: unknown) => child.stdin.write(JSON.stringify(m) + '\n');
  send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '0' } } });
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  send({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
  await got;
  const ms = performance.now() - t0;
  child.kill('SIGKILL');
  return ms;
}

// ---------------------------------------------------------------------------------------------
// Tasks through the service, and their steps from its audit timeline

interface AuditEvent {
  seq: number;
  timestamp: string;
  action: string;
  taskId?: string | null;
  actorId?: string | null;
  fromState?: string | null;
  toState?: string | null;
  metadata?: Record<string, unknown>;
}

async function adminApi<T>(env: TaskBenchEnv, path: string): Promise<T> {
  // A poll may meet a keep-alive connection the service is closing ("other side closed"): ask again.
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(`${env.service.url}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
      if (!res.ok) throw new Error(`${path}: ${res.status}`);
      return (await res.json()) as T;
    } catch (error) {
      if (attempt >= 5 || !(error instanceof TypeError)) throw error;
      await sleep(200 * attempt);
    }
  }
}

async function allAudit(env: TaskBenchEnv, afterSeq: number): Promise<AuditEvent[]> {
  const out: AuditEvent[] = [];
  for (let after = afterSeq; ; ) {
    const page = await adminApi<{ events: AuditEvent[]; nextAfterSeq: number | null }>(env, `/audit?afterSeq=${after}&limit=1000`);
    out.push(...page.events);
    if (page.events.length < 1000 || page.nextAfterSeq === null) return out;
    after = page.nextAfterSeq;
  }
}

async function lastSeq(env: TaskBenchEnv): Promise<number> {
  const page = await adminApi<{ events: AuditEvent[] }>(env, `/audit?order=desc&limit=1`);
  return page.events[0]?.seq ?? 0;
}

interface TaskRun {
  repo: string;
  issue: number;
  taskId: string;
  state: string;
  steps: Record<string, number>;
  /** Queued → final. */
  wholeMs: number;
  /** The turn itself (model and agent tools): not the service's. */
  turnMs: number;
  /** What the first and later steps were (cloned/fetched, started/resumed). */
  kind: string;
}

async function commentTask(env: TaskBenchEnv, repo: string, issue: number, text: string): Promise<string> {
  const nonce = Math.random().toString(36).slice(2, 10);
  await env.gitea.api('alice', 'POST', `/repos/${env.gitea.owner}/${repo}/issues/${issue}/comments`, { body: `@ccweb-bot ${text} [${nonce}]` }, 201);
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    const list = await adminApi<{ items: Array<{ taskId: string; instruction: string }> }>(env, `/tasks?pageSize=100`);
    const t = list.items.find((x) => x.instruction.includes(nonce));
    if (t) return t.taskId;
    await sleep(100);
  }
  throw new Error(`no task for the comment on ${repo}#${issue}`);
}

async function waitFinal(env: TaskBenchEnv, taskId: string, timeoutMs = 1_800_000): Promise<string> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
    const d = await adminApi<{ task: { state: string } }>(env, `/tasks/${taskId}`);
    if (FINAL.includes(d.task.state)) return d.task.state;
    await sleep(250);
  }
  throw new Error(`task ${taskId} did not finish`);
}

const at = (e: AuditEvent | undefined) => (e ? Date.parse(e.timestamp) : Number.NaN);

/** The steps of one task, from the audit events of the task, its session and its verifier. */
export function stepsOf(events: AuditEvent[], taskId: string, sessionActor: string): Omit<TaskRun, 'repo' | 'issue' | 'state'> {
  const own = events.filter((e) => e.taskId === taskId || (e.actorId ?? '').includes(taskId));
  const find = (p: (e: AuditEvent) => boolean) => own.find(p);
  const tr = (from: string | null, to: string) => find((e) => e.action === 'task.transition' && (from === null || e.fromState === from) && e.toState === to);
  const queued = tr(null, 'queued');
  const claimed = tr('queued', 'preparing');
  const running = tr('preparing', 'running');
  const publishing = tr('running', 'publishing');
  const verifying = tr('publishing', 'verifying_reply');
  const final = own.filter((e) => e.action === 'task.transition' && FINAL.includes(e.toState ?? '')).at(-1);
  // The session's thread start or resume inside this task's preparing.
  const window = (e: AuditEvent) => at(e) >= at(claimed) && at(e) <= at(running) + 5;
  const sess = events.filter((e) => e.actorId === sessionActor && window(e));
  const threadBegin = sess.find((e) => e.toState === 'thread_starting' || e.toState === 'resuming');
  const threadEnd = sess.find((e) => e.fromState === threadBegin?.toState && (e.toState === 'idle' || e.toState === 'ready'));
  const turnStart = find((e) => e.action === 'codex.turn_start');
  const turnDone = find((e) => e.action === 'codex.turn_completed');
  const commit = find((e) => e.action === 'publish.commit');
  const push = find((e) => e.action === 'publish.push');
  const pr = find((e) => e.action === 'publish.pull_request_created' || e.action === 'publish.pull_request_reused');
  const verified = find((e) => e.action === 'publish.verified');
  const workspaceEnd = threadBegin ?? running;
  const steps: Record<string, number> = {
    queue: at(claimed) - at(queued),
    workspace: at(workspaceEnd) - at(claimed),
    thread: threadBegin && threadEnd ? at(threadEnd) - at(threadBegin) : 0,
    turn: at(turnDone) - at(turnStart),
    commit: at(commit) - at(publishing),
    push: at(push) - at(commit),
    pullRequest: at(pr) - at(push),
    publishReadBack: at(verified) - at(pr),
    verification: at(final) - at(verifying),
  };
  const wholeMs = at(final) - at(queued);
  return { taskId, steps, wholeMs, turnMs: steps['turn']!, kind: threadBegin === undefined ? 'thread kept' : threadBegin.toState === 'resuming' ? 'resumed' : 'new thread' };
}

async function runTask(env: TaskBenchEnv, repo: string, issue: number): Promise<TaskRun> {
  const from = await lastSeq(env);
  const taskId = await commentTask(env, repo, issue, 'change-file please');
  const state = await waitFinal(env, taskId);
  await sleep(300);
  const events = await allAudit(env, from);
  const sessionActor = `session:default:${env.gitea.owner}/${repo}:issue:${issue}`;
  return { repo, issue, state, ...stepsOf(events, taskId, sessionActor) };
}

// ---------------------------------------------------------------------------------------------
// Memory: RSS of the service and of its app-server (and the app-server's children), sampled.

function rssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((t) => {
      try {
        return readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      } catch {
        return [];
      }
    });
  } catch {
    return [];
  }
}

function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of childrenOf(p)) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
};

function sampleMemory(servicePid: number): { stop(): { serviceMb: number; appServerMb: number; agentTreeMb: number; tree: string[] } } {
  let service = 0;
  let appServer = 0;
  let tree = 0;
  let seen: string[] = [];
  const timer = setInterval(() => {
    service = Math.max(service, rssKb(servicePid));
    const ds = descendants(servicePid);
    // The codex binary itself (not a launcher in front of it, whose cmdline names app-server too).
    const codex = ds.filter((p) => /(^|\/)codex app-server/.test(cmdline(p)));
    appServer = Math.max(appServer, codex.reduce((s, p) => s + rssKb(p), 0));
    // Everything below the app-server: the gates, gitea-mcp, the agent's commands.
    const below = [...new Set(codex.flatMap((p) => descendants(p)))].filter((p) => !codex.includes(p));
    const sum = below.reduce((s, p) => s + rssKb(p), 0);
    if (sum > tree) seen = below.map((p) => `${Math.round(rssKb(p) / 1024)} MB ${cmdline(p).slice(0, 120)}`);
    tree = Math.max(tree, sum);
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      return { serviceMb: service / 1024, appServerMb: appServer / 1024, agentTreeMb: tree / 1024, tree: seen };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The report

const fmt = (ms: number | undefined) => (ms === undefined || Number.isNaN(ms) ? '–' : ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`);
const ratio = (a: number, b: number | undefined) => (b && b > 0 && !Number.isNaN(a) ? `${(a / b).toFixed(2)}×` : '–');
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : Number.NaN;
};

function table(rows: string[][]): string[] {
  const w = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r, j) => {
    const line = `| ${r.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join(' | ')} |`;
    return j === 0 ? `${line}\n|${w.map((x, i) => (i === 0 ? '-'.repeat(x + 2) : '-'.repeat(x + 1) + ':')).join('|')}|` : line;
  });
}

interface FloorSet {
  workspace: number;
  thread: number;
  commit: number;
  push: number;
  pullRequest: number;
  verification: number;
}

function taskTable(title: string, run: TaskRun, floor: FloorSet, floorNames: Record<keyof FloorSet, string>): string[] {
  const s = run.steps;
  const rows: string[][] = [['step', 'service', 'floor', 'floor is', 'ratio']];
  const add = (name: string, key: keyof FloorSet, svc: number) => rows.push([name, fmt(svc), fmt(floor[key]), floorNames[key], ratio(svc, floor[key])]);
  rows.push(['waiting for the scheduler', fmt(s['queue']), '', '', '']);
  add('workspace (clone or fetch, worktree)', 'workspace', s['workspace']!);
  add(`thread (${run.kind}; gate and gitea-mcp start)`, 'thread', s['thread']!);
  rows.push(['turn (model and agent tools; not the service)', fmt(s['turn']), '', '', '']);
  add('commit', 'commit', s['commit']!);
  add('push', 'push', s['push']!);
  add('pull request', 'pullRequest', s['pullRequest']! + s['publishReadBack']!);
  add('verification (answer read back)', 'verification', s['verification']!);
  const service = run.wholeMs - run.turnMs;
  const floorSum = Object.values(floor).reduce((a, b) => a + b, 0);
  rows.push(['whole task without the turn', fmt(service), fmt(floorSum), 'sum of the floors', ratio(service, floorSum)]);
  return [`### ${title} (${run.repo}#${run.issue}, ${run.state})`, '', ...table(rows), ''];
}

async function main(): Promise<void> {
  const shape = shapeFromEnv();
  const big = await bigRepo(shape, say);
  const root = mkdtempSync(join(tmpdir(), 'ccweb-bench-task-'));
  const out: string[] = [];
  const t0 = Date.now();
  if (COMPILED) {
    say('npm run build (the service as production runs it; BENCH_TSX=1 runs src/ through tsx instead) …');
    const r = spawnSync('npm', ['run', '-s', 'build'], { cwd: fileURLToPath(new URL('..', import.meta.url)), stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`npm run build exited with ${r.status}`);
  }
  const env = await startTaskBenchEnv(root, { CCWEB_MAX_CONCURRENT_TASKS: String(Math.max(2, CONCURRENT)) }, { compiled: COMPILED });
  try {
    say(`environment up in ${((Date.now() - t0) / 1000).toFixed(1)} s (${root})`);
    const repos = ['big0', 'floor0', ...Array.from({ length: CONCURRENT }, (_, i) => `big${i + 1}`), ...Array.from({ length: CONCURRENT }, (_, i) => `floor${i + 1}`)];
    const ti = Date.now();
    for (const r of repos) await env.importRepo(r, big.path);
    say(`imported ${repos.length} copies in ${((Date.now() - ti) / 1000).toFixed(1)} s`);
    for (const r of repos) for (let i = 0; i < 3; i++) await env.gitea.api('alice', 'POST', `/repos/${env.gitea.owner}/${r}/issues`, { title: `bench ${i + 1}` }, 201);
    const floorDir = join(root, 'floor');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(floorDir, { recursive: true });

    // 1. The first task on a big repository: the floor's clone first, then the service's.
    say('floor: clone …');
    const cold = await gitFloors(env, 'floor0', floorDir, 'a', true);
    say(`  ${JSON.stringify(cold)}`);
    const mem = sampleMemory(env.service.pid);
    say('service: first task (first clone) …');
    const first = await runTask(env, 'big0', 1);
    say(`  ${JSON.stringify(first)}`);

    // 2. Later tasks: the floor's fetch and worktree, then the service's task on another issue, then
    //    one on the first issue again (its worktree and thread exist).
    say('floor: fetch, worktree …');
    const warm = await gitFloors(env, 'floor0', floorDir, 'b', false);
    say(`  ${JSON.stringify(warm)}`);
    const second = await runTask(env, 'big0', 2);
    say(`  ${JSON.stringify(second)}`);
    const warmAgain = await gitFloors(env, 'floor0', floorDir, 'c', false);
    const third = await runTask(env, 'big0', 1);
    say(`  ${JSON.stringify(third)}`);
    const memory = mem.stop();
    say(`  processes below the app-server at its peak:\n    ${memory.tree.join('\n    ')}`);
    const threads = await threadFloor(env, join(floorDir, 'wt-b'), 3);
    const mcps = [await mcpFloor(env), await mcpFloor(env), await mcpFloor(env)];
    say(`  thread floor ${threads.map(Math.round).join(', ')} ms; gitea-mcp ${mcps.map(Math.round).join(', ')} ms`);

    const threadFloorMs = median(threads.slice(1));
    const names = { workspace: '', thread: 'thread/start, gitea-mcp direct', commit: 'git add -A && git commit', push: 'git push', pullRequest: 'POST pulls (until Gitea has the branch)', verification: 'GET comments' };
    const floorOf = (g: GitFloor, workspace: number): FloorSet => ({ workspace, thread: threadFloorMs, commit: g.commit!, push: g.push!, pullRequest: g.pullRequest!, verification: g.comments! });
    out.push(`## bench:task — ${shape.files.toLocaleString('en')} files, ${shape.commits.toLocaleString('en')} commits, ${(big.packedBytes / 1e6).toFixed(0)} MB packed`, '');
    out.push(`Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load average ${loadavg().map((x) => x.toFixed(1)).join(' / ')} at the end; Node ${process.version}; git ${(await execFileP('git', ['--version'])).stdout.trim()}.`, '');
    out.push(...taskTable('first task: first clone', first, floorOf(cold, cold.clone!), { ...names, workspace: 'git clone' }));
    out.push(`First task without the turn / bare clone: ${ratio(first.wholeMs - first.turnMs, cold.clone)} (${fmt(first.wholeMs - first.turnMs)} / ${fmt(cold.clone)}).`, '');
    out.push(...taskTable('later task, another issue', second, floorOf(warm, warm.fetch! + warm.worktreeAdd!), { ...names, workspace: 'git fetch + git worktree add' }));
    out.push(...taskTable('later task, the same issue again', third, floorOf(warmAgain, warmAgain.fetch! + warmAgain.status!), { ...names, workspace: 'git fetch + git status' }));
    out.push(`(The same issue's worktree is reused: its floor is the fetch (${fmt(warmAgain.fetch)}) and the \`git status\` (${fmt(warmAgain.status)}) that must find it clean before a task works in it again.)`, '');
    out.push(`Floors for reference: gitea-mcp alone (spawn, initialize, tools/list) ${mcps.map(fmt).join(', ')}; thread/start with it ${threads.map(fmt).join(', ')} (the first on a fresh app-server).`, '');
    out.push(`Memory during these tasks (peak RSS): service ${memory.serviceMb.toFixed(0)} MB, app-server ${memory.appServerMb.toFixed(0)} MB, below the app-server (gate, gitea-mcp, agent commands) ${memory.agentTreeMb.toFixed(0)} MB.`, '');

    // Printed now: a failure in the part below must not lose it.
    console.log(out.join('\n'));
    out.length = 0;
    // 3. N at once: N bare clones at once, then N first tasks on N repositories at once.
    if (CONCURRENT > 0) {
      say(`floor: ${CONCURRENT} clones at once …`);
      const floors = await Promise.all(
        Array.from({ length: CONCURRENT }, async (_, i) => {
          const d = join(root, `floor-c${i + 1}`);
          mkdirSync(d, { recursive: true });
          const url = `${env.gitea.url}/${env.gitea.owner}/floor${i + 1}.git`;
          return timedMs(() => git(env, ['clone', '--quiet', '--', url, join(d, 'clone')], d));
        }),
      );
      say(`  ${floors.map(Math.round).join(', ')}`);
      say(`service: ${CONCURRENT} first tasks at once …`);
      const mem8 = sampleMemory(env.service.pid);
      const runs = await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => runTask(env, `big${i + 1}`, 1)));
      const memory8 = mem8.stop();
      for (const r of runs) say(`  ${JSON.stringify(r)}`);
      const rows: string[][] = [['', '1 task', `${CONCURRENT} at once: median`, 'max', 'median / 1 task']];
      const w1 = first.wholeMs - first.turnMs;
      const ws = runs.map((r) => r.wholeMs - r.turnMs);
      rows.push(['bare clone (floor)', fmt(cold.clone), fmt(median(floors)), fmt(Math.max(...floors)), ratio(median(floors), cold.clone)]);
      rows.push(['whole first task without the turn', fmt(w1), fmt(median(ws)), fmt(Math.max(...ws)), ratio(median(ws), w1)]);
      rows.push(['  of which workspace', fmt(first.steps['workspace']), fmt(median(runs.map((r) => r.steps['workspace']!))), fmt(Math.max(...runs.map((r) => r.steps['workspace']!))), '']);
      rows.push(['  of which waiting for the scheduler', fmt(first.steps['queue']), fmt(median(runs.map((r) => r.steps['queue']!))), fmt(Math.max(...runs.map((r) => r.steps['queue']!))), '']);
      rows.push(['service / bare clone, each side at its own concurrency', ratio(w1, cold.clone), ratio(median(ws), median(floors)), '', '']);
      out.push(`### 1 vs ${CONCURRENT} first tasks at once (${CONCURRENT} repositories, one node; states: ${[...new Set(runs.map((r) => r.state))].join(', ')})`, '', ...table(rows), '');
      out.push(`Memory with ${CONCURRENT} at once (peak RSS): service ${memory8.serviceMb.toFixed(0)} MB, app-server ${memory8.appServerMb.toFixed(0)} MB, below it ${memory8.agentTreeMb.toFixed(0)} MB.`, '');
    }
    console.log(out.join('\n'));
  } finally {
    await env.close();
    if (process.env['BENCH_KEEP'] !== '1') rmSync(root, { recursive: true, force: true });
  }
}

await main();
