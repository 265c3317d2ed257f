// `npm test` runs this first: the PostgreSQL store tests start throwaway servers from
// Debian's `postgresql` package (src/cli/throwaway-postgres.ts). On a fresh machine where we are
// root (CI, the project's machines) it is installed from Debian's packages; elsewhere it only says
// what to do, and the PostgreSQL tests then fail with that same message. Debian's package, not the
// binaries some npm packages carry: a real server of the major a Debian 12 deployment gets, and
// installable here (the npm-packaged ones are 18.x betas, unverified on these machines).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = '/usr/lib/postgresql';

/** `/usr/lib/postgresql/<major>/bin`, the highest major present, or null. */
function binDir() {
  if (!existsSync(ROOT)) return null;
  const majors = readdirSync(ROOT)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(ROOT, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return majors.length > 0 ? join(ROOT, majors[0], 'bin') : null;
}

function report(bin) {
  const version = execFileSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }).trim();
  console.log(`ensure-postgres: ${version} (${bin})`);
}

/**
 * The package creates its own cluster (`<major>/main`, port 5432) and may start it; the tests never
 * use it, and a server nobody asked for would hold a port and memory on a shared machine.
 */
function stopPackageClusters() {
  if (!existsSync('/usr/bin/pg_lsclusters')) return;
  const lines = execFileSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const line of lines) {
    const [version, cluster, , status] = line.trim().split(/\s+/);
    if (status === 'online') {
      console.log(`ensure-postgres: stopping the package's own cluster ${version}/${cluster}`);
      execFileSync('pg_ctlcluster', [version, cluster, 'stop'], { stdio: 'inherit' });
    }
  }
}

const found = binDir();
if (found) {
  report(found);
  process.exit(0);
}
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
if (!isRoot || !existsSync('/usr/bin/apt-get')) {
  console.warn(`ensure-postgres: no ${ROOT}/*/bin/postgres; the PostgreSQL store tests need it (Debian: apt-get install postgresql).`);
  process.exit(0);
}
console.log('ensure-postgres: installing Debian postgresql for the PostgreSQL store tests…');
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
execFileSync('apt-get', ['install', '-y', '-qq', 'postgresql'], { stdio: 'inherit', env });
stopPackageClusters();
const installed = binDir();
if (!installed) {
  console.error(`ensure-postgres: apt-get installed postgresql but ${ROOT}/*/bin/postgres is still missing`);
  process.exit(1);
}
report(installed);
