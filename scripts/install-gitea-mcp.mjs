#!/usr/bin/env node
/**
 * Installs the official gitea-mcp binary (the Gitea MCP server the agent's gate runs as its child),
 * once per machine, at the revision pinned in src/config/gitea-mcp-pin.json (the one place it is
 * pinned: the service's doctor hint, the config reference and the guides in docs/ read or quote it).
 *
 *   node scripts/install-gitea-mcp.mjs          # build (or reuse) and print the binary's path
 *   node scripts/install-gitea-mcp.mjs --print  # only print where it goes (does not build)
 *   node scripts/install-gitea-mcp.mjs --to DIR # also copy the binary to DIR/gitea-mcp (deployments)
 *
 * Where from, in this order:
 *   1. `CCWEB_GITEA_MCP_SOURCE`: a `git archive` tarball of the pinned revision (top folder
 *      `gitea-mcp/`), checked against the pinned sha256 and built with `go build` (its dependencies
 *      come from the Go module proxy). `.ci/run` points it at ../shared/gitea/gitea-mcp/ when that
 *      exists: the proxy reachable there refuses gitea-mcp's own module path, not its dependencies.
 *   2. otherwise `go install gitea.com/gitea/gitea-mcp@<revision>` (a machine with the public proxy).
 * Neither working is an error with the fix, and a non-zero exit: the tests run the real binary and
 * must fail, not fall back to a stand-in.
 *
 * Result: `<cache>/<version>/gitea-mcp`, `<cache>` = `$CCWEB_GITEA_MCP_CACHE`, else
 * `${XDG_CACHE_HOME:-~/.cache}/ccweb-gitea/gitea-mcp` (~ is the account's home, whatever $HOME says):
 * outside the clone, so a fresh clone on the same machine (CI) reuses it. A finished install is
 * marked by `<version>/.complete`, built in a scratch folder and renamed into place under a lock.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { accountHome, withLock } from './cache-lock.mjs';

const here = dirname(fileURLToPath(import.meta.url));
/** The pin: `{ module, revision, version, sourceArchive, sourceSha256 }`. */
export const GITEA_MCP_PIN = JSON.parse(readFileSync(join(here, '..', 'src', 'config', 'gitea-mcp-pin.json'), 'utf8'));
const STAMP = '.complete';

class InstallError extends Error {}

function log(msg) {
  process.stderr.write(`install-gitea-mcp: ${msg}\n`);
}

export function giteaMcpCacheRoot(env = process.env) {
  if (env.CCWEB_GITEA_MCP_CACHE) return env.CCWEB_GITEA_MCP_CACHE;
  return join(env.XDG_CACHE_HOME || join(accountHome(), '.cache'), 'ccweb-gitea', 'gitea-mcp');
}

/** Where the pinned version lives (may not exist yet). */
export function giteaMcpInstallPaths(env = process.env) {
  const dir = join(giteaMcpCacheRoot(env), GITEA_MCP_PIN.version);
  return { dir, binary: join(dir, 'gitea-mcp'), version: GITEA_MCP_PIN.version };
}

export function isGiteaMcpInstalled(env = process.env) {
  const { dir, binary } = giteaMcpInstallPaths(env);
  try {
    return readFileSync(join(dir, STAMP), 'utf8').trim() === GITEA_MCP_PIN.version && statSync(binary).isFile();
  } catch {
    return false;
  }
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', opts.capture ? 'pipe' : 'inherit', 'inherit'], encoding: 'utf8', ...opts });
  if (r.error) throw new InstallError(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new InstallError(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal})`);
  return r.stdout;
}

function goVersion() {
  const r = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (r.status === 0) return r.stdout.trim();
  throw new InstallError(
    `Go is not installed (or not on PATH); gitea-mcp ${GITEA_MCP_PIN.revision} is built from source.\n` +
      '  Install Go 1.24 or later from https://go.dev/dl/ (or `apt-get install golang-go` where recent enough), put it on PATH, and run `node scripts/install-gitea-mcp.mjs` again.',
  );
}

function sha256(file) {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** Builds `<scratch>/gitea-mcp` from the archive named by CCWEB_GITEA_MCP_SOURCE. */
function buildFromArchive(archive, scratch, goEnv) {
  if (!existsSync(archive)) throw new InstallError(`CCWEB_GITEA_MCP_SOURCE=${archive}: no such file. Point it at ${GITEA_MCP_PIN.sourceArchive} or unset it to use \`go install\`.`);
  const got = sha256(archive);
  if (got !== GITEA_MCP_PIN.sourceSha256) {
    throw new InstallError(`CCWEB_GITEA_MCP_SOURCE=${archive} has sha256 ${got}, not the pinned ${GITEA_MCP_PIN.sourceSha256} (revision ${GITEA_MCP_PIN.revision}). Use the archive of that revision.`);
  }
  const src = join(scratch, 'src');
  mkdirSync(src, { recursive: true });
  run('tar', ['xzf', archive, '-C', src]);
  const top = existsSync(join(src, 'gitea-mcp', 'go.mod')) ? join(src, 'gitea-mcp') : src;
  if (!existsSync(join(top, 'go.mod'))) throw new InstallError(`${archive} holds no go.mod (expected a git archive of gitea-mcp with the folder gitea-mcp/)`);
  run('go', ['build', '-trimpath', '-ldflags', `-X main.Version=${GITEA_MCP_PIN.version}`, '-o', join(scratch, 'gitea-mcp'), '.'], { cwd: top, env: { ...goEnv, CGO_ENABLED: '0' } });
  rmSync(src, { recursive: true, force: true });
}

/** Builds `<scratch>/gitea-mcp` with `go install <module>@<revision>`. */
function buildWithGoInstall(scratch, goEnv) {
  const target = `${GITEA_MCP_PIN.module}@${GITEA_MCP_PIN.revision}`;
  try {
    run('go', ['install', '-trimpath', '-ldflags', `-X main.Version=${GITEA_MCP_PIN.version}`, target], { env: { ...goEnv, GOBIN: scratch, CGO_ENABLED: '0' } });
  } catch (e) {
    // The fix first: where the Go module proxy does not serve gitea-mcp, this is the line a newcomer reads.
    throw new InstallError(
      `gitea-mcp could not be fetched with \`go install\` (the Go module proxy may not serve it): set CCWEB_GITEA_MCP_SOURCE=/path/to/${GITEA_MCP_PIN.sourceArchive} (its pinned source archive) and run again.\n` +
        `  The archive: \`git archive --prefix=gitea-mcp/ ${GITEA_MCP_PIN.revision}\` of https://gitea.com/gitea/gitea-mcp, sha256 ${GITEA_MCP_PIN.sourceSha256}.\n` +
        `  ${e.message}`,
    );
  }
}

/** Installs the pinned gitea-mcp unless it is already there. Resolves with its paths. */
export async function installGiteaMcp(env = process.env) {
  const paths = giteaMcpInstallPaths(env);
  if (isGiteaMcpInstalled(env)) return paths;
  const go = goVersion();
  const root = giteaMcpCacheRoot(env);
  mkdirSync(root, { recursive: true });
  return withLock(join(root, `${GITEA_MCP_PIN.version}.lock`), log, async () => {
    if (isGiteaMcpInstalled(env)) return paths;
    const started = Date.now();
    const scratch = mkdtempSync(join(root, `${GITEA_MCP_PIN.version}.build-`));
    // Go's module and build caches live under HOME: the account's, so a changed HOME does not start cold.
    const goEnv = { ...process.env, HOME: accountHome() };
    try {
      const archive = env.CCWEB_GITEA_MCP_SOURCE;
      if (archive) {
        log(`building gitea-mcp ${GITEA_MCP_PIN.revision} from ${archive} with ${go}`);
        buildFromArchive(resolve(archive), scratch, goEnv);
      } else {
        log(`go install ${GITEA_MCP_PIN.module}@${GITEA_MCP_PIN.revision} with ${go}`);
        buildWithGoInstall(scratch, goEnv);
      }
      const binary = join(scratch, 'gitea-mcp');
      chmodSync(binary, 0o755);
      const reported = run(binary, ['-v'], { capture: true }).trim();
      if (reported !== GITEA_MCP_PIN.version) throw new InstallError(`the built binary reports "${reported}", not ${GITEA_MCP_PIN.version}`);
      writeFileSync(join(scratch, STAMP), `${GITEA_MCP_PIN.version}\n`);
      rmSync(paths.dir, { recursive: true, force: true });
      renameSync(scratch, paths.dir);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    log(`built in ${Math.round((Date.now() - started) / 1000)} s: ${paths.binary}`);
    return paths;
  });
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1]);
if (isMain) {
  if (process.argv.includes('--print')) {
    console.log(giteaMcpInstallPaths().binary);
  } else {
    const toIndex = process.argv.indexOf('--to');
    const to = toIndex > 0 ? process.argv[toIndex + 1] : undefined;
    installGiteaMcp().then(
      (p) => {
        if (to) {
          mkdirSync(to, { recursive: true });
          const dest = join(to, 'gitea-mcp');
          // Copy beside, then rename: a running service never sees half a binary.
          const tmp = join(mkdtempSync(join(tmpdir(), 'gitea-mcp-')), 'gitea-mcp');
          copyFileSync(p.binary, tmp);
          chmodSync(tmp, 0o755);
          try {
            renameSync(tmp, dest);
          } catch {
            copyFileSync(tmp, dest);
            chmodSync(dest, 0o755);
          }
          log(`copied to ${dest}`);
        }
        log(`gitea-mcp ${p.version} ready: ${p.binary}`);
        console.log(to ? join(to, 'gitea-mcp') : p.binary);
      },
      (e) => {
        log(e instanceof InstallError ? e.message : String(e?.stack ?? e));
        log('the agent\'s Gitea tools and the tests need this binary');
        process.exitCode = 1;
      },
    );
  }
}
