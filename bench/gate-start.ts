// `npm run bench:gate-start`: how long the gate takes from its spawn to answering Codex's
// `initialize`, and then `tools/list`, before and after the relay replaced the MCP SDK, in one run.
//
// "Before" is the gate's files at BENCH_GATE_BASE (default 87de11f, the last commit with the SDK
// gate), taken with `git show`; "after" is src/mcp-gate/ as it is. Each is run two ways: compiled
// (esbuild, one file each, as `npm run build` lays out dist/: what production and `npm run bench:task`
// run) and from TypeScript through tsx (as `npm start` from a checkout runs it). Beside them, the same
// run's floors: `node -e 0` (spawn to exit) and the real gitea-mcp alone (spawn, initialize,
// tools/list), which every gate also starts. Rounds rotate the order, so load drifts alike on all.
// Then BENCH_CONCURRENT (8) compiled gates started at once, before and after, as 8 threads starting
// together do (0 skips it). Last, what a thread start costs with each: Codex `thread/start` on a real
// app-server of our own (gitea-mcp `required`, so it answers once the MCP server has listed its tools),
// with gitea-mcp direct (the floor bench:task uses), the gate before, and the gate after (BENCH_THREADS, 8 each).
// No assertions: medians, p90 and ratios in the same run (machines are noisy). BENCH_ROUNDS: rounds (12).
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';
import { CodexAppServerConnection } from '../src/codex/jsonrpc-connection.js';
import { threadStartParams } from '../src/codex/thread-params.js';
import { REAL_GITEA_MCP_PATH } from '../test/support/real-gitea-mcp.js';
import { writeCodexHome } from '../src/demo/scripted-model.js';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const BASE = process.env['BENCH_GATE_BASE'] ?? '87de11f';
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 12);
const CONCURRENT = Number(process.env['BENCH_CONCURRENT'] ?? 8);
const THREADS = Number(process.env['BENCH_THREADS'] ?? 8);
const HOST = 'http://127.0.0.1:9'; // gitea-mcp asks Gitea nothing before a tool call

const work = mkdtempSync(join(tmpdir(), 'ccweb-bench-gate-'));
// The copies resolve packages (the SDK for the old gate, tsx, esbuild) from the repository's node_modules.
symlinkSync(join(repoRoot, 'node_modules'), join(work, 'node_modules'));
// ESM, as the repository's package.json says (tsx reads a .ts file as CommonJS otherwise).
writeFileSync(join(work, 'package.json'), '{"type":"module"}\n');

function gitFiles(): Map<string, string> {
  const names = execFileSync('git', ['ls-tree', '--name-only', `${BASE}:src/mcp-gate/`], { cwd: repoRoot, encoding: 'utf8' }).trim().split('\n');
  return new Map(names.map((n) => [n, execFileSync('git', ['show', `${BASE}:src/mcp-gate/${n}`], { cwd: repoRoot, encoding: 'utf8' })]));
}
function currentFiles(): Map<string, string> {
  const dir = join(repoRoot, 'src/mcp-gate');
  return new Map(readdirSync(dir).filter((n) => /\.(ts|mjs)$/.test(n)).map((n) => [n, readFileSync(join(dir, n), 'utf8')]));
}

/** Lays the gate out as a checkout (`.ts`, entry.mjs loads tsx) or as dist/ (`.js` beside entry.mjs). */
function layout(name: string, files: Map<string, string>, compiled: boolean): string {
  const dir = join(work, name);
  mkdirSync(dir);
  for (const [n, text] of files) {
    if (compiled && n.endsWith('.ts')) writeFileSync(join(dir, n.replace(/\.ts$/, '.js')), transformSync(text, { loader: 'ts', format: 'esm', target: 'node20' }).code);
    else writeFileSync(join(dir, n), text);
  }
  return join(dir, 'entry.mjs');
}

interface Start {
  initialize: number;
  toolsList: number;
}

/** Spawns `command`, sends initialize at once and tools/list after its answer; ms from spawn to each answer. */
function timeStart(command: string, args: string[], env: Record<string, string>): Promise<Start> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'ignore'] });
    const send = (m: unknown) => child.stdin.write(`${JSON.stringify(m)}\n`);
    let buf = '';
    let initialize = 0;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not answer within 60 s`));
    }, 60_000);
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const msg = JSON.parse(buf.slice(0, nl)) as { id?: number; error?: unknown };
        buf = buf.slice(nl + 1);
        if (msg.error) reject(new Error(`${command}: ${JSON.stringify(msg.error)}`));
        if (msg.id === 0) {
          initialize = performance.now() - t0;
          send({ jsonrpc: '2.0', method: 'notifications/initialized' });
          send({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
        } else if (msg.id === 1) {
          const toolsList = performance.now() - t0;
          clearTimeout(timer);
          child.stdin.end();
          child.on('exit', () => resolve({ initialize, toolsList }));
        }
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (!initialize) reject(new Error(`${command} ${args.join(' ')} exited (${code}) before answering`));
    });
    send({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } });
  });
}

function timeNode(): Promise<Start> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => {
      const ms = performance.now() - t0;
      resolve({ initialize: ms, toolsList: ms });
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * 0.9) - 1)]!;

async function main() {
  const stateDir = join(work, 'state');
  mkdirSync(stateDir);
  const gateEnv = (): Record<string, string> => ({
    PATH: process.env['PATH'] ?? '',
    HOME: process.env['HOME'] ?? '',
    GITEA_HOST: HOST,
    GITEA_ACCESS_TOKEN: 'bench-token',
    CCWEB_GATE_SCOPE: JSON.stringify({ owner: 'acme', repo: 'widget', number: 1 }),
    CCWEB_GATE_STATE_DIR: stateDir,
    CCWEB_GATE_CHILD: JSON.stringify({ command: REAL_GITEA_MCP_PATH, args: ['-t', 'stdio', '-host', HOST] }),
  });
  const gateScopeEnv = { CCWEB_GATE_SCOPE: gateEnv().CCWEB_GATE_SCOPE!, CCWEB_GATE_STATE_DIR: stateDir, CCWEB_GATE_CHILD: gateEnv().CCWEB_GATE_CHILD! };
  const before = gitFiles();
  const after = currentFiles();
  const variants: [string, () => Promise<Start>][] = [
    ['node -e 0 (floor: Node itself)', timeNode],
    ['gitea-mcp alone (floor: the child)', () => timeStart(REAL_GITEA_MCP_PATH, ['-t', 'stdio', '-host', HOST], { PATH: process.env['PATH'] ?? '', HOME: stateDir, GITEA_HOST: HOST, GITEA_ACCESS_TOKEN: 'bench-token' })],
  ];
  for (const [label, files, compiled] of [
    [`gate before (${BASE}, MCP SDK), compiled`, before, true],
    ['gate after (relay), compiled', after, true],
    [`gate before (${BASE}, MCP SDK), tsx`, before, false],
    ['gate after (relay), tsx', after, false],
  ] as const) {
    const entry = layout(label.replace(/\W+/g, '-'), files, compiled);
    variants.push([label, () => timeStart(process.execPath, [entry], gateEnv())]);
  }
  process.stdout.write(`bench:gate-start: ${ROUNDS} rounds (+1 warm-up), load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  const times = new Map<string, Start[]>(variants.map(([l]) => [l, []]));
  for (let round = -1; round < ROUNDS; round++) {
    for (let i = 0; i < variants.length; i++) {
      const [label, run] = variants[(i + Math.max(round, 0)) % variants.length]!;
      const t = await run();
      if (round >= 0) times.get(label)!.push(t);
    }
  }
  const rows = variants.map(([label]) => {
    const ts = times.get(label)!;
    return { label, init: median(ts.map((t) => t.initialize)), initP90: p90(ts.map((t) => t.initialize)), list: median(ts.map((t) => t.toolsList)), listP90: p90(ts.map((t) => t.toolsList)) };
  });
  const out = [
    '',
    '| start | initialize answered, median (p90) | tools/list answered, median (p90) |',
    '|---|---:|---:|',
    ...rows.map((r) => `| ${r.label} | ${r.init.toFixed(0)} ms (${r.initP90.toFixed(0)}) | ${r.list.toFixed(0)} ms (${r.listP90.toFixed(0)}) |`),
    '',
  ];
  const by = (prefix: string) => rows.find((r) => r.label.startsWith(prefix))!;
  const node = by('node');
  const child = by('gitea-mcp');
  for (const mode of ['compiled', 'tsx']) {
    const b = rows.find((r) => r.label.startsWith('gate before') && r.label.endsWith(mode))!;
    const a = rows.find((r) => r.label.startsWith('gate after') && r.label.endsWith(mode))!;
    out.push(
      `${mode}: tools/list answered after ${a.list.toFixed(0)} ms against ${b.list.toFixed(0)} ms before (${(a.list / b.list).toFixed(2)}×); ` +
        `after is ${(a.list / (node.list + child.list)).toFixed(2)}× Node's start plus gitea-mcp's, before was ${(b.list / (node.list + child.list)).toFixed(2)}×`,
    );
  }
  if (CONCURRENT > 0) {
    out.push('', `| ${CONCURRENT} compiled gates started at once (3 rounds) | tools/list answered, median (slowest) |`, '|---|---:|');
    const compiledVariants = variants.filter(([l]) => l.startsWith('gate') && l.endsWith('compiled'));
    const together = new Map<string, number[]>(compiledVariants.map(([l]) => [l, []]));
    for (let round = 0; round < 3; round++) {
      for (const [label, run] of round % 2 ? [...compiledVariants].reverse() : compiledVariants) {
        const ts = await Promise.all(Array.from({ length: CONCURRENT }, () => run()));
        together.get(label)!.push(...ts.map((t) => t.toolsList));
      }
    }
    for (const [label, ts] of together) out.push(`| ${label} | ${median(ts).toFixed(0)} ms (${Math.max(...ts).toFixed(0)}) |`);
    const [b, a] = [...together.values()];
    out.push('', `${CONCURRENT} at once: after ${median(a!).toFixed(0)} ms against ${median(b!).toFixed(0)} ms before (${(median(a!) / median(b!)).toFixed(2)}×)`);
  }
  if (THREADS > 0) {
    const cwd = join(work, 'thread-cwd');
    mkdirSync(cwd);
    const codexHome = join(work, 'codex-home');
    writeCodexHome(codexHome, { port: 9, model: 'fake-model' }); // thread/start asks the model nothing
    const conn = new CodexAppServerConnection({ cwd, requestTimeoutMs: 60_000, extraEnv: { CODEX_HOME: codexHome } });
    await conn.start();
    const entryOf = (label: string) => join(work, label.replace(/\W+/g, '-'), 'entry.mjs');
    const starts: [string, { command: string; args?: string[]; extraEnv?: Record<string, string> }][] = [
      ['thread/start, gitea-mcp direct (floor)', { command: REAL_GITEA_MCP_PATH }],
      [`thread/start, gate before (${BASE}), compiled`, { command: process.execPath, args: [entryOf(`gate before (${BASE}, MCP SDK), compiled`)], extraEnv: gateScopeEnv }],
      ['thread/start, gate after (relay), compiled', { command: process.execPath, args: [entryOf('gate after (relay), compiled')], extraEnv: gateScopeEnv }],
    ];
    const thread = new Map<string, number[]>(starts.map(([l]) => [l, []]));
    try {
      for (let round = -1; round < THREADS; round++) {
        for (let i = 0; i < starts.length; i++) {
          const [label, mcp] = starts[(i + Math.max(round, 0)) % starts.length]!;
          const t0 = performance.now();
          await conn.request('thread/start', threadStartParams({ cwd, giteaMcp: { ...mcp, giteaUrl: HOST, token: 'bench-token' } }), { timeoutMs: 60_000 });
          if (round >= 0) thread.get(label)!.push(performance.now() - t0);
        }
      }
    } finally {
      await conn.close({ graceMs: 2_000, termMs: 2_000 }).catch(() => undefined);
    }
    out.push('', `| Codex thread/start on one app-server (${THREADS} each, +1 warm-up) | median (p90) |`, '|---|---:|');
    for (const [label, ts] of thread) out.push(`| ${label} | ${median(ts).toFixed(0)} ms (${p90(ts).toFixed(0)}) |`);
    const [floor, b, a] = [...thread.values()].map(median);
    out.push('', `thread/start with the gate: after ${a!.toFixed(0)} ms (${(a! / floor!).toFixed(1)}× gitea-mcp direct) against ${b!.toFixed(0)} ms before (${(b! / floor!).toFixed(1)}×)`);
  }
  process.stdout.write(`${out.join('\n')}\nload average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
}

try {
  await main();
} finally {
  rmSync(work, { recursive: true, force: true });
}
