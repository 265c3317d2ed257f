// Where an accepted webhook's CPU goes: the real intake server of bench/webhook-receivers.ts, run under
// `node --cpu-prof` while autocannon drives it at saturation with unique signed deliveries, then
// the samples of the measured window (warm-up and start-up cut off by timestamp) summed per function.
// Also measures CPU per request (process.cpuUsage of the server: main thread, GC, fsync threads)
// for the real server and the bare-Koa baseline — a figure that, unlike req/s, hardly depends on
// what else runs on the machine. Run: npm run profile:webhook  (PROFILE_SECONDS, PROFILE_TOP)
// The .cpuprofile files stay in test-artifacts/profile-webhook/ (open them in Chrome DevTools).
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, table, us, type CpuProfile } from './cpu-profile-summary.js';
import { load, spawnServer, type Child, type ServerKind } from './webhook-harness.js';

const SECONDS = Number(process.env['PROFILE_SECONDS'] ?? 10);
const TOP = Number(process.env['PROFILE_TOP'] ?? 15);
const WARMUP_S = 3;
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const outDir = join(repoRoot, 'test-artifacts', 'profile-webhook');

interface Window {
  requests: number;
  cpuMicros: number;
  from: number;
  to: number;
  rps: number;
}

async function measure(server: Child, seconds: number): Promise<Window> {
  const before = (await server.ask({ cmd: 'cpu' })) as { cpu: number; mono: number };
  const run = await load(server.port, seconds);
  const after = (await server.ask({ cmd: 'cpu' })) as { cpu: number; mono: number };
  if (run.bad + run.errors > 0) throw new Error(`${run.bad} non-2xx answers and ${run.errors} errors during the profile`);
  return { requests: run.ok, cpuMicros: after.cpu - before.cpu, from: before.mono, to: after.mono, rps: run.rps };
}

async function exited(child: Child): Promise<void> {
  await new Promise<void>((resolve) => {
    if (child.proc.exitCode !== null) resolve();
    else child.proc.once('exit', () => resolve());
    child.proc.send({ cmd: 'exit' });
  });
}

async function profileOf(kind: ServerKind): Promise<{ window: Window; profile: CpuProfile }> {
  const dir = join(outDir, kind);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const server = await spawnServer(kind, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval=250']);
  await load(server.port, WARMUP_S);
  const window = await measure(server, SECONDS);
  await exited(server);
  // CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile: thread 0 is the main thread (tsx's loader has its own).
  const [file] = (await readdir(dir)).filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
  if (!file) throw new Error(`no .cpuprofile written in ${dir}`);
  return { window, profile: JSON.parse(await readFile(join(dir, file), 'utf8')) as CpuProfile };
}

async function main(): Promise<void> {
  const { cpus } = await import('node:os');
  console.log(`# webhook intake profile — ${SECONDS} s at saturation, 32 connections, node ${process.version}, ${cpus().length} cpus`);
  console.log(`load average at start: ${(await import('node:os')).loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  const real = await profileOf('real');
  const base = await profileOf('baseline');
  const okit = await profileOf('octokit');
  const cpu = (w: Window) => w.cpuMicros / w.requests;
  console.log('| server | req/s | CPU µs / request (all threads) |');
  console.log('|---|---:|---:|');
  console.log(`| real (durable intake) | ${real.window.rps.toFixed(0)} | ${us(cpu(real.window))} |`);
  console.log(`| baseline (Koa + HMAC) | ${base.window.rps.toFixed(0)} | ${us(cpu(base.window))} |`);
  console.log(`| @octokit/webhooks verifyAndReceive (Koa) | ${okit.window.rps.toFixed(0)} | ${us(cpu(okit.window))} |`);
  console.log(`\nCPU ratio baseline/real: ${(cpu(base.window) / cpu(real.window)).toFixed(2)} (the throughput ratio a CPU-bound server would show)\n`);

  const s = summarize(real.profile, real.window.from, real.window.to);
  const busy = s.samples - s.idle;
  // The main thread's busy time per request, spread over the frames by their share of samples.
  const mainPerRequest = ((busy / s.samples) * (real.window.to - real.window.from)) / real.window.requests;
  console.log(`real server main thread: ${s.samples} samples in the window, ${((100 * s.idle) / s.samples).toFixed(0)} % idle; busy ≈ ${us(mainPerRequest)} µs per request\n`);
  for (const line of table(`Top ${TOP} frames by self time (real server)`, s.rows, 'self', busy, mainPerRequest, TOP)) console.log(line);
  for (const line of table(`Top ${TOP} frames by inclusive time (real server)`, s.rows, 'total', busy, mainPerRequest, TOP)) console.log(line);
  console.log(`profiles: ${relative(repoRoot, outDir)}/{real,baseline,octokit}/*.cpuprofile`);
}

await main();
