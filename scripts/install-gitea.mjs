#!/usr/bin/env node
/**
 * Builds the real Gitea the tests run against, once per machine, from its Go module.
 *
 *   node scripts/install-gitea.mjs          # build (or reuse) and print the folder
 *   node scripts/install-gitea.mjs --print  # only print where it goes (does not build)
 *
 * The Gitea version is pinned here and only here (GITEA_VERSION); the test harness imports it.
 * Result: `<cache>/<version>/gitea` plus the `options/ templates/ public/` Gitea reads from its work
 * path (the build has no `bindata` tag). `<cache>` is `$REAL_GITEA_CACHE`, else
 * `${XDG_CACHE_HOME:-~/.cache}/ccweb-gitea/gitea` (~ is the account's home, whatever $HOME says): outside the clone, so a fresh clone on the
 * same machine (CI) reuses the build. A finished build is marked by `<version>/.complete` and
 * reused as is; a build happens in a scratch folder and is renamed into place, under a lock, so
 * concurrent runs (pretest, vitest's globalSetup, another checkout) neither race nor see half a build.
 *
 * `go install` refuses Gitea (its go.mod has `replace` directives), so: `go mod download` the module,
 * copy it, `go build` with the sqlite tags. Needs Go and a C compiler (cgo, for sqlite); when one is
 * missing it says how to install it and exits non-zero — the tests need this Gitea and must fail,
 * not skip, without it.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { accountHome, withLock } from './cache-lock.mjs';

/** The one place the Gitea version is pinned (module version, without the `v` for main.Version). */
export const GITEA_VERSION = '1.26.3';
export const GITEA_MODULE = 'code.gitea.io/gitea';
const ASSET_DIRS = ['options', 'templates', 'public'];
const STAMP = '.complete';

export function giteaCacheRoot(env = process.env) {
  if (env.REAL_GITEA_CACHE) return env.REAL_GITEA_CACHE;
  // The home directory from the password database, not $HOME: the test run gives its workers another
  // HOME (CCWEB_TEST_SLOW_PROFILE, test/support/global-setup.ts) and must still find the build.
  const base = env.XDG_CACHE_HOME || join(accountHome(), '.cache');
  return join(base, 'ccweb-gitea', 'gitea');
}

/** Where the pinned version lives: `{ dir, binary }` (may not exist yet). */
export function giteaInstallPaths(env = process.env) {
  const dir = join(giteaCacheRoot(env), GITEA_VERSION);
  return { dir, binary: join(dir, 'gitea'), version: GITEA_VERSION };
}

export function isGiteaInstalled(env = process.env) {
  const { dir, binary } = giteaInstallPaths(env);
  try {
    return readFileSync(join(dir, STAMP), 'utf8').trim() === GITEA_VERSION && statSync(binary).isFile() && ASSET_DIRS.every((d) => existsSync(join(dir, d)));
  } catch {
    return false;
  }
}

class InstallError extends Error {}

function log(msg) {
  process.stderr.write(`install-gitea: ${msg}\n`);
}

function have(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? (r.stdout || r.stderr).trim() : null;
}

function checkToolchain() {
  const go = have('go', ['version']);
  if (!go) {
    throw new InstallError(
      'Go is not installed (or not on PATH); the tests build Gitea ' + GITEA_VERSION + ' from its Go module.\n' +
        `  Install Go 1.26.3 or later (what Gitea ${GITEA_VERSION}'s go.mod asks for; Go >= 1.21 fetches it by itself unless GOTOOLCHAIN=local) from https://go.dev/dl/, e.g.\n` +
        '    curl -fsSL https://go.dev/dl/go1.26.3.linux-amd64.tar.gz | tar -C /usr/local -xz && export PATH="$PATH:/usr/local/go/bin"\n' +
        '  (Debian/Ubuntu: `apt-get install golang-go` if it is recent enough), then run `node scripts/install-gitea.mjs` again.',
    );
  }
  const cc = process.env.CC || 'gcc';
  if (!have(cc, ['--version'])) {
    throw new InstallError(
      `no C compiler (\`${cc}\`): Gitea's sqlite driver needs cgo.\n` +
        '  Install one, e.g. `apt-get install -y gcc` (Debian/Ubuntu) or `dnf install gcc`, or set CC, then run `node scripts/install-gitea.mjs` again.',
    );
  }
  return go;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', opts.capture ? 'pipe' : 'inherit', 'inherit'], encoding: 'utf8', ...opts });
  if (r.error) throw new InstallError(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new InstallError(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal})`);
  return r.stdout;
}

/** Builds the pinned Gitea unless it is already there. Resolves with its paths. */
export async function installGitea(env = process.env) {
  const paths = giteaInstallPaths(env);
  if (isGiteaInstalled(env)) return paths;
  const goVersion = checkToolchain();
  const root = giteaCacheRoot(env);
  mkdirSync(root, { recursive: true });
  return withLock(join(root, `${GITEA_VERSION}.lock`), log, async () => {
    if (isGiteaInstalled(env)) return paths; // built by whoever held the lock
    const started = Date.now();
    log(`building Gitea ${GITEA_VERSION} into ${paths.dir} with ${goVersion} (a few minutes, once per machine)`);
    // Go's module and build caches live under HOME: the account's, so a changed HOME does not start cold.
    const goEnv = { ...process.env, HOME: accountHome(), CGO_ENABLED: '1' };
    const out = run('go', ['mod', 'download', '-json', `${GITEA_MODULE}@v${GITEA_VERSION}`], { capture: true, env: goEnv });
    const moduleDir = JSON.parse(out).Dir;
    if (!moduleDir || !existsSync(join(moduleDir, 'main.go'))) throw new InstallError(`go mod download gave no module folder:\n${out}`);
    // A fixed scratch path (not per pid): Go's build cache keys Gitea's own packages by their folder.
    const scratch = join(root, `${GITEA_VERSION}.build`);
    rmSync(scratch, { recursive: true, force: true });
    const src = join(scratch, 'src');
    cpSync(moduleDir, src, { recursive: true });
    run('chmod', ['-R', 'u+w', src]); // the module cache is read-only
    run('go', ['build', '-tags', 'sqlite sqlite_unlock_notify', '-ldflags', `-X main.Version=${GITEA_VERSION}`, '-o', join(scratch, 'gitea'), '.'], {
      cwd: src,
      env: goEnv,
    });
    for (const d of ASSET_DIRS) cpSync(join(src, d), join(scratch, d), { recursive: true });
    rmSync(src, { recursive: true, force: true });
    chmodSync(join(scratch, 'gitea'), 0o755);
    const reported = run(join(scratch, 'gitea'), ['--version'], { capture: true });
    if (!reported.includes(GITEA_VERSION)) throw new InstallError(`the built binary reports "${reported.trim()}", not ${GITEA_VERSION}`);
    writeFileSync(join(scratch, STAMP), `${GITEA_VERSION}\n`);
    rmSync(paths.dir, { recursive: true, force: true });
    renameSync(scratch, paths.dir);
    log(`built in ${Math.round((Date.now() - started) / 1000)} s: ${paths.binary}`);
    return paths;
  });
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  if (process.argv.includes('--print')) {
    console.log(giteaInstallPaths().dir);
  } else {
    installGitea().then(
      (p) => {
        log(`Gitea ${p.version} ready: ${p.binary}`);
        console.log(p.dir);
      },
      (e) => {
        log(e instanceof InstallError ? e.message : String(e?.stack ?? e));
        log('the tests run against this real Gitea and cannot run without it');
        process.exitCode = 1;
      },
    );
  }
}
