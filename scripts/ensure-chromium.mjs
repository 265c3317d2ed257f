// `npm test` runs this first: the browser tests drive Debian's Chromium. On a fresh machine where we
// are root (CI, the project's machines) it is installed from Debian's packages; elsewhere it only
// says what to do, and the browser tests then fail with that same message.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const CHROMIUM = process.env.CCWEB_CHROMIUM ?? '/usr/bin/chromium';
if (existsSync(CHROMIUM)) process.exit(0);
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
if (!isRoot || !existsSync('/usr/bin/apt-get')) {
  console.warn(`ensure-chromium: ${CHROMIUM} is missing; the browser tests need it (Debian: apt-get install chromium).`);
  process.exit(0);
}
console.log('ensure-chromium: installing Debian chromium for the browser tests…');
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env });
