// Suite-level guard (vitest globalSetup): every process the run starts is marked, and the run
// fails if any of them is still alive once all test files have finished. A leftover process holds
// ports, files and CPU for the next run, and usually means a test that does not wait for or kill
// what it started.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BUNDLE_DIR, repoRoot } from './codex-harness.js';
import { allPids, leftoverProcesses, RUN_MARKER_VAR, selfAndAncestors } from './leftover-processes.js';

/** How long processes may take to exit after the last test file (app-servers close their MCP children). */
const GRACE_MS = 15_000;

/**
 * Test-only knob `CCWEB_TEST_SLOW_PROFILE=<seconds>` (1 means 30): the run's HOME becomes a folder
 * whose shell start-up files sleep that long, as a host with a slow or broken profile (pyenv, conda)
 * would. Nothing the suite or the agent runs may depend on the host's profile, so the suite must
 * pass unchanged.
 */
function slowProfileHome(): string | null {
  const raw = process.env['CCWEB_TEST_SLOW_PROFILE'];
  if (!raw || raw === '0') return null;
  const seconds = raw === '1' ? 30 : Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new Error(`CCWEB_TEST_SLOW_PROFILE must be a number of seconds, got ${raw}`);
  const home = mkdtempSync(join(tmpdir(), 'ccweb-slow-profile-home-'));
  const script = `# ccweb test knob: a host profile that takes ${seconds} s\necho "slow profile sourced by $0" >&2\nsleep ${seconds}\n`;
  for (const f of ['.profile', '.bash_profile', '.bash_login', '.bashrc', '.zshrc', '.zprofile']) writeFileSync(join(home, f), script);
  process.env['HOME'] = home;
  console.log(`slow host profile: HOME=${home} (start-up files sleep ${seconds} s)`);
  return home;
}

/** The run's temporary folder, once the first project's setup has made it. */
const RUN_TMP_VAR = 'CCWEB_TEST_RUN_TMP';

export default function setup(): () => Promise<void> {
  const runId = randomUUID();
  // Set before the pool forks its workers, so every test process and everything it spawns inherits it.
  process.env[RUN_MARKER_VAR] = runId;
  // A temporary folder of this run's own, as every test's os.tmpdir(): what names it was started by
  // this run — not by a concurrent run on the same machine — even when its environment is scrubbed.
  // Every project of vitest.config.ts runs this setup in the same process: the later ones reuse the
  // first one's folder instead of nesting theirs in it (four levels made Chromium's socket path too long).
  // (Keyed by this process: a run started from inside a test makes its own.)
  const [ownerPid, earlier] = (process.env[RUN_TMP_VAR] ?? '').split(':');
  const runTmp = ownerPid === String(process.pid) && earlier ? earlier : mkdtempSync(join(tmpdir(), 'ccweb-run-'));
  process.env[RUN_TMP_VAR] = `${process.pid}:${runTmp}`;
  process.env['TMPDIR'] = runTmp;
  const slowHome = slowProfileHome();
  const preexisting = process.platform === 'linux' ? allPids() : new Set<number>();
  return async function teardown() {
    if (slowHome) rmSync(slowHome, { recursive: true, force: true });
    try {
      rmdirSync(runTmp); // only when the tests removed what they made
    } catch {
      /* not empty: left for a look */
    }
    if (process.platform !== 'linux') return;
    const exclude = selfAndAncestors();
    const needles = [join(repoRoot, 'test') + '/', BUNDLE_DIR + '/'];
    // The run's own temporary folder: Codex's sandboxes there carry no marker (leftover-processes.ts).
    const sandboxRoots = [runTmp + '/'];
    const isOwnWorker = (p: { ppid: number; cmdline: string }) => p.ppid === process.pid && p.cmdline.includes('/vitest/');
    const deadline = Date.now() + GRACE_MS;
    let left = leftoverProcesses({ runId, cmdlineNeedles: needles, exclude, preexisting, sandboxRoots }).filter((p) => !isOwnWorker(p));
    while (left.length > 0 && Date.now() < deadline) {
      await sleep(250);
      left = leftoverProcesses({ runId, cmdlineNeedles: needles, exclude, preexisting, sandboxRoots }).filter((p) => !isOwnWorker(p));
    }
    if (left.length === 0) {
      console.log('process check: no process started by the suite is alive');
      return;
    }
    for (const p of left) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    const list = left.map((p) => `  pid ${p.pid} (parent ${p.ppid}): ${p.cmdline}`).join('\n');
    // vitest reports an error thrown here but still exits 0: set the exit code ourselves.
    process.exitCode = 1;
    throw new Error(`process check: ${left.length} process(es) started by the suite outlived it (now killed):\n${list}`);
  };
}
