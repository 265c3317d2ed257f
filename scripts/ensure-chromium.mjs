// `npm test` runs this first: the browser tests drive Debian's Chromium. On a fresh machine where we
// are root (CI, the project's machines) it is installed from Debian's packages; elsewhere it only
// says what to do, and the browser tests then fail with that same message.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const CHROMIUM = process.env.CCWEB_CHROMIUM ?? '/usr/bin/chromium';
if (existsSync(CHROMIUM)) process.exit(0);
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
if (!isRoot || !existsSync('/usr/bin/apt-get')) {
  console.warn(`ensure-chromium: ${CHROMIUM} is missing; the browser tests need it (Debian: apt-get install chromium).`);
  process.exit(0);
}
// Another apt or dpkg (unattended-upgrades, a second test run, a provisioning script) may hold the
// package locks: wait for them, up to LOCK_TIMEOUT_S, instead of failing at once. `apt-get install`
// waits for dpkg's lock itself (DPkg::Lock::Timeout); `apt-get update` (apt 2.6) ignores that option
// for the lists lock and fails at once, so it is retried until the lock is free.
const LOCK_TIMEOUT_S = 600;
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
const deadline = Date.now() + LOCK_TIMEOUT_S * 1000;
const secondsLeft = () => Math.max(1, Math.ceil((deadline - Date.now()) / 1000));

function aptGet(args) {
  for (;;) {
    const run = spawnSync('apt-get', ['-o', `DPkg::Lock::Timeout=${secondsLeft()}`, ...args], { stdio: ['ignore', 'inherit', 'pipe'], env, encoding: 'utf8' });
    const held = /Could not get lock (\S+?)\.? It is held by (process \d+(?: \([^)]*\))?)/.exec(run.stderr ?? '');
    if (run.status !== 0 && held && Date.now() < deadline) {
      console.log(`ensure-chromium: waiting for ${held[1]}, held by ${held[2]} (another apt or dpkg is running; up to ${secondsLeft()} s more)…`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5000);
      continue;
    }
    process.stderr.write(run.stderr ?? '');
    if (run.error) throw run.error;
    if (run.status !== 0) {
      console.error(`ensure-chromium: apt-get ${args.join(' ')} failed (exit ${run.status})${held ? `: ${held[1]} was still held by ${held[2]} after ${LOCK_TIMEOUT_S} s` : ''}`);
      process.exit(run.status ?? 1);
    }
    return;
  }
}

console.log(`ensure-chromium: installing Debian chromium for the browser tests… (waits up to ${LOCK_TIMEOUT_S} s for another apt or dpkg to finish)`);
aptGet(['update', '-qq']);
aptGet(['install', '-y', '-qq', 'chromium']);
