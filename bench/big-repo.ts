// The big repository `npm run bench:task` serves: generated once with `git fast-import`
// from a seeded generator and cached under ~/.cache/ccweb-gitea/bench-repo/<shape>/repo.git, so every
// run (and every machine with the same shape) works on the same bytes. Its shape is in the folder's
// name; BENCH_REPO_FILES / BENCH_REPO_COMMITS pick another one.
//
// Shape (default): FILES text files (≈ 3 KB each, words from a seeded generator: compressible like
// source code) in 100 top folders × 10 subfolders, added by the first commit; then COMMITS − 1 commits
// each appending a line to TOUCH files, one branch `main`. Built in a temporary folder and renamed into
// place when complete, under the same lock the Gitea build uses (scripts/cache-lock.mjs).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { accountHome, withLock } from '../scripts/cache-lock.mjs';

export interface RepoShape {
  files: number;
  commits: number;
  /** Files changed by each commit after the first. */
  touch: number;
}

export interface BigRepo {
  shape: RepoShape;
  /** The bare repository (do not write into it; clone or hardlink it). */
  path: string;
  packedBytes: number;
  /** How long generating it took (0 when it came from the cache); ms. */
  generatedMs: number;
}

export function shapeFromEnv(): RepoShape {
  return {
    files: Number(process.env['BENCH_REPO_FILES'] ?? 100_000),
    commits: Number(process.env['BENCH_REPO_COMMITS'] ?? 5_000),
    touch: Number(process.env['BENCH_REPO_TOUCH'] ?? 10),
  };
}

const cacheRoot = () => join(process.env['XDG_CACHE_HOME'] ?? join(accountHome(), '.cache'), 'ccweb-gitea', 'bench-repo');
const shapeKey = (s: RepoShape) => `f${s.files}-c${s.commits}-t${s.touch}-v1`;

/** xorshift32: the same repository from the same shape on every machine. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

const WORDS = 'const let function return if else for while import export from class extends new this await async try catch throw value result index count item list map set get user repo issue task state error data config path file line name type string number boolean null undefined true false'.split(' ');

function fileText(r: () => number, lines: number): string {
  const out: string[] = [];
  for (let i = 0; i < lines; i++) {
    const n = 4 + (r() % 8);
    const ws: string[] = [];
    for (let j = 0; j < n; j++) ws.push(WORDS[r() % WORDS.length]!);
    ws.push(String(r() % 100_000));
    out.push(ws.join(' '));
  }
  return out.join('\n') + '\n';
}

const filePath = (i: number) => `d${String(Math.floor(i / 1000) % 100).padStart(2, '0')}/s${Math.floor(i / 100) % 10}/f${i}.txt`;

function packedBytes(repo: string): number {
  const dir = join(repo, 'objects', 'pack');
  return readdirSync(dir).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
}

async function generate(shape: RepoShape, target: string, log: (m: string) => void): Promise<void> {
  rmSync(target, { recursive: true, force: true });
  mkdirSync(target, { recursive: true });
  const init = spawnSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', target]);
  if (init.status !== 0) throw new Error(`git init: ${init.stderr}`);
  const child = spawn('git', ['fast-import', '--quiet', '--done'], { cwd: target, stdio: ['pipe', 'inherit', 'inherit'] });
  const exited = new Promise<number | null>((res) => child.on('exit', res));
  const stdin = child.stdin;
  const write = (s: string) => (stdin.write(s) ? Promise.resolve() : new Promise<void>((res) => stdin.once('drain', () => res())));
  const r = rng(33);
  const lens = new Map<number, number>();
  const when = 1_700_000_000;
  const data = (text: string) => `data ${Buffer.byteLength(text)}\n${text}\n`;
  const commitHead = (n: number, msg: string) =>
    `commit refs/heads/main\nauthor Bench <bench@example.invalid> ${when + n * 60} +0000\ncommitter Bench <bench@example.invalid> ${when + n * 60} +0000\n${data(msg)}`;

  await write(commitHead(0, 'initial import\n'));
  for (let i = 0; i < shape.files; i++) {
    const text = fileText(r, 40 + (r() % 40));
    lens.set(i, text.length);
    await write(`M 100644 inline ${filePath(i)}\n${data(text)}`);
    if (i % 20_000 === 0) log(`  big repo: ${i} / ${shape.files} files`);
  }
  const extra = new Map<number, string>();
  for (let c = 1; c < shape.commits; c++) {
    let body = commitHead(c, `change ${c}\n`);
    for (let k = 0; k < shape.touch; k++) {
      const i = r() % shape.files;
      // The file is regenerated from its seed line plus the lines appended so far (kept small: a map of suffixes).
      const suffix = (extra.get(i) ?? '') + `change ${c}: ${WORDS[r() % WORDS.length]} ${r() % 1000}\n`;
      extra.set(i, suffix);
      const base = fileText(rng(i + 1), 20);
      body += `M 100644 inline ${filePath(i)}\n${data(base + suffix)}`;
    }
    await write(body);
    if (c % 1000 === 0) log(`  big repo: ${c} / ${shape.commits} commits`);
  }
  await write('done\n');
  stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`git fast-import exited with ${code}`);
  // Gitea serves it as is; a dumb-HTTP-free smart clone needs nothing more. Gitea's own repository
  // settings (hooks) come from the migration that copies it (bench/task.ts).
  spawnSync('git', ['update-server-info'], { cwd: target });
}

/** The cached big repository of `shape`, generated on first use. */
export async function bigRepo(shape: RepoShape = shapeFromEnv(), log: (m: string) => void = (m) => console.error(m)): Promise<BigRepo> {
  const root = cacheRoot();
  mkdirSync(root, { recursive: true });
  const dir = join(root, shapeKey(shape));
  const done = join(dir, '.complete');
  const path = join(dir, 'repo.git');
  let generatedMs = 0;
  if (!existsSync(done)) {
    await withLock(join(root, `.lock-${shapeKey(shape)}`), log, async () => {
      if (existsSync(done)) return;
      log(`generating the big repository ${shapeKey(shape)} (once; cached in ${dir})`);
      const t0 = Date.now();
      const tmp = `${dir}.tmp-${process.pid}`;
      await generate(shape, join(tmp, 'repo.git'), log);
      generatedMs = Date.now() - t0;
      rmSync(dir, { recursive: true, force: true });
      renameSync(tmp, dir);
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      (await import('node:fs')).writeFileSync(done, JSON.stringify({ shape, generatedMs, at: new Date().toISOString() }) + '\n');
      log(`generated in ${(generatedMs / 1000).toFixed(1)} s`);
    });
  }
  return { shape, path, packedBytes: packedBytes(path), generatedMs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const repo = await bigRepo();
  console.log(JSON.stringify({ ...repo, packedMB: Math.round(repo.packedBytes / 1e6) }));
}
