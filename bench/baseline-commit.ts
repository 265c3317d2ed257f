// The code before the store moved to SQLite, for the benchmarks that print today's figures beside it
// in one run: the tree of BENCH_BASELINE_COMMIT (default: the last commit whose embedded store was the
// journal engine), unpacked from this checkout's git history into a temporary folder with this
// checkout's node_modules linked in, and, on demand, built as production runs it (`npm run build`).
// Kept between runs (keyed by the commit), so only the first run pays for the unpacking and the build.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The parent of the change that made SQLite the embedded store (the journal engine's last commit as the default). */
export const JOURNAL_ENGINE_COMMIT = 'c3a930288738d74a66f7fc511a8d843d9fd22c3e';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export interface BaselineTree {
  commit: string;
  /** The unpacked tree (its bench/, src/, test/fixtures/ …). */
  root: string;
  /** `node <mainJs>` starts its service (after `build()`). */
  mainJs: string;
  /** Builds dist/ once; later calls return at once. */
  build(): void;
}

export function baselineTree(commit = process.env['BENCH_BASELINE_COMMIT'] ?? JOURNAL_ENGINE_COMMIT): BaselineTree {
  let full: string;
  try {
    full = execFileSync('git', ['rev-parse', '--verify', `${commit}^{commit}`], { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch {
    throw new Error(`the baseline commit ${commit} is not in this checkout's history (${repoRoot}): fetch it, or name another with BENCH_BASELINE_COMMIT`);
  }
  const root = join(tmpdir(), `ccweb-bench-before-${full.slice(0, 12)}`);
  const unpacked = join(root, '.unpacked');
  if (!existsSync(unpacked)) {
    rmSync(root, { recursive: true, force: true });
    mkdirSync(root, { recursive: true });
    const archive = spawnSync('git', ['archive', '--format=tar', full], { cwd: repoRoot, maxBuffer: 1 << 30 });
    if (archive.status !== 0) throw new Error(`git archive ${full} failed: ${archive.stderr.toString()}`);
    const tar = spawnSync('tar', ['-x', '-C', root], { input: archive.stdout });
    if (tar.status !== 0) throw new Error(`unpacking ${full} failed: ${tar.stderr.toString()}`);
    // The dependencies it names are a subset of this checkout's (the change only added better-sqlite3).
    symlinkSync(realpathSync(join(repoRoot, 'node_modules')), join(root, 'node_modules'));
    writeFileSync(unpacked, `${full}\n`);
  } else if (!existsSync(join(root, 'node_modules'))) {
    // Unpacked by a checkout since removed: its link leads nowhere now.
    rmSync(join(root, 'node_modules'), { force: true });
    symlinkSync(realpathSync(join(repoRoot, 'node_modules')), join(root, 'node_modules'));
  }
  const built = join(root, 'dist', '.built');
  return {
    commit: full,
    root,
    mainJs: join(root, 'dist', 'src', 'main.js'),
    build() {
      if (existsSync(built)) return;
      const r = spawnSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
      if (r.status !== 0) throw new Error(`npm run build of the baseline ${full} in ${root} exited with ${r.status}`);
      writeFileSync(built, `${full}\n`);
    },
  };
}
