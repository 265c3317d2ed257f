// `npm run build` runs this twice around `tsc -p tsconfig.build.json`:
//
//   --clean   before tsc: empties dist/ (no compiled file of a deleted source survives) and notes
//             when the build started.
//   (none)    after tsc: copies the non-TS files that the compiled code reads or loads at runtime to
//             the same relative place under dist/, then writes dist/.build-stamp.
//
// The stamp lets bin/ccweb-gitea.js decide whether dist/ is current: it lists every source file the
// build consumed (the .ts behind each emitted .js, the copied assets, the tsconfigs) and the build's
// start time. A listed file that is now missing, or was modified after the build started, makes
// dist/ stale, and the bin falls back to running the TypeScript through tsx.
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
// CCWEB_BUILD_DIR: another directory under the root (the build test uses one, leaving dist/ alone).
const dist = join(root, process.env.CCWEB_BUILD_DIR ?? 'dist');
const STARTED = join(dist, '.build-started');
const STAMP = join(dist, '.build-stamp');

/** Directories copied whole: static pages served by src/api/static-pages.ts. */
const ASSET_DIRS = ['src/api/admin-page', 'visualizer/page'];
/**
 * Single files read at runtime: src/cli/doctor.ts reads the Codex protocol version; the gitea-mcp pin
 * is imported as JSON (tsc emits it too, but the stamp lists only what is copied here).
 */
const ASSET_FILES = [
  'src/codex/protocol/VERSION',
  'src/config/gitea-mcp-pin.json',
  // `demo` builds the pinned gitea-mcp and the real Gitea when missing (src/demo/ imports these).
  'scripts/install-gitea-mcp.mjs',
  'scripts/install-gitea.mjs',
  'scripts/cache-lock.mjs',
];
/** Not sources of compiled output, but they shape it. */
const CONFIG_INPUTS = ['tsconfig.json', 'tsconfig.build.json'];

const posix = (p) => p.split(sep).join('/');

function walk(dir, out = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

if (process.argv.includes('--clean')) {
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(dist, { recursive: true });
  writeFileSync(STARTED, `${Date.now()}\n`);
  process.exit(0);
}

if (!existsSync(STARTED)) {
  console.error('build-copy-assets: dist/.build-started is missing; run `npm run build` (it cleans dist/ first).');
  process.exit(1);
}
const startedAtMs = Number(readFileSync(STARTED, 'utf8'));
const inputs = new Set(CONFIG_INPUTS);

// The .ts source behind every emitted .js.
const emitted = walk(dist).filter((f) => f.endsWith('.js'));
if (!emitted.some((f) => posix(relative(dist, f)) === 'src/cli/index.js')) {
  console.error('build-copy-assets: dist/src/cli/index.js is missing; did tsc -p tsconfig.build.json run?');
  process.exit(1);
}
const compiledDirs = new Set();
for (const js of emitted) {
  const rel = posix(relative(dist, js));
  const ts = rel.replace(/\.js$/, '.ts');
  if (!existsSync(join(root, ts))) continue; // only .ts sources are compiled (no allowJs)
  inputs.add(ts);
  compiledDirs.add(posix(dirname(rel)));
}

function copyFile(rel) {
  const to = join(dist, rel);
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(join(root, rel), to);
  inputs.add(rel);
}

// Plain ESM files: every src/**/*.mjs (the gate's entry.mjs, started by path), and any .mjs next to
// compiled code elsewhere.
// Their .d.mts declarations only serve tsc and are not copied.
const mjs = new Set(walk(join(root, 'src')).map((f) => posix(relative(root, f))).filter((f) => f.endsWith('.mjs')));
for (const dir of compiledDirs) {
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.mjs')) mjs.add(`${dir}/${entry.name}`);
  }
}
for (const rel of [...mjs].sort()) copyFile(rel);

for (const rel of ASSET_FILES) copyFile(rel);
for (const rel of ASSET_DIRS) {
  cpSync(join(root, rel), join(dist, rel), { recursive: true });
  for (const f of walk(join(root, rel))) inputs.add(posix(relative(root, f)));
}

const changed = [...inputs].filter((rel) => statSync(join(root, rel)).mtimeMs > startedAtMs);
if (changed.length > 0) {
  // The stamp still carries the start time, so the bin treats this dist/ as stale.
  console.warn(`build-copy-assets: modified during the build, run it again: ${changed.slice(0, 5).join(', ')}${changed.length > 5 ? ', …' : ''}`);
}
writeFileSync(STAMP, `${JSON.stringify({ startedAtMs, inputs: [...inputs].sort() }, null, 0)}\n`);
rmSync(STARTED);
console.log(`build-copy-assets: ${emitted.length} compiled file(s), ${mjs.size} .mjs, ${ASSET_FILES.length + ASSET_DIRS.length} asset path(s); stamp lists ${inputs.size} input(s)`);
