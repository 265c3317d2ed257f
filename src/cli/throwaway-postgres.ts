// A throwaway PostgreSQL server: its own data directory in a temporary folder, a free port on
// 127.0.0.1 only, trust authentication for the `postgres` user, removed when stopped. For the tests of
// the PostgreSQL store (re-exported by test/support/postgres-server.ts) and for the demo.
//
// It runs Debian's `postgresql` package (scripts/ensure-postgres.mjs installs it). The server refuses
// to run as root, so as root every binary runs as the package's `postgres` user (runuser); otherwise
// as ourselves. fsync and synchronous_commit stay on: the store's durability is tested against it.
//
// Never left behind: stop() stops and removes it; a process 'exit' hook kills what is still running;
// and a small watchdog (sh, outside our process group) kills the server and removes its folder
// once this process is gone, even by SIGKILL, where no hook runs.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';

export interface ThrowawayPostgres {
  /** `postgres://postgres@127.0.0.1:PORT/postgres` (the maintenance database). */
  url: string;
  port: number;
  /** The cluster's data directory (`<folder>/data`; the folder also holds server.log). */
  dataDir: string;
  /** The postmaster's pid (a new one after restart()). */
  pid: number;
  /** pg_ctl -m fast stop, then removes the folder. Idempotent. */
  stop(): Promise<void>;
  /** A power cut, as far as the server can tell: SIGKILL of the postmaster and all its children. */
  crash(): Promise<void>;
  /** pg_ctl start again on the same data directory and port (after crash(): crash recovery). */
  restart(): Promise<void>;
  /** CREATE DATABASE `name` (lower-case letters, digits, `_`); gives its URL. */
  createDatabase(name: string): Promise<string>;
}

export interface ThrowawayPostgresOptions {
  /** Where its folder is made (default: os.tmpdir()). */
  parentDir?: string;
  /** Lines about what it does (start, stop, crash), for a test's or the demo's log. */
  log?: (line: string) => void;
}

const PG_ROOT = '/usr/lib/postgresql';
const POSTGRES_USER = 'postgres';
const COMMAND_TIMEOUT_MS = 120_000;

/** Servers of this process still running, for the 'exit' hook. */
const live = new Set<{ folder: string; pid: () => number; watchdog: number }>();
let exitHookInstalled = false;

const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

/** `/usr/lib/postgresql/<major>/bin` of the highest major installed. */
export function postgresBinDir(): string {
  const majors = existsSync(PG_ROOT)
    ? readdirSync(PG_ROOT)
        .filter((v) => /^\d+$/.test(v) && existsSync(join(PG_ROOT, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (majors.length === 0) {
    throw new Error(
      `PostgreSQL is not installed: no ${PG_ROOT}/*/bin/postgres. Run \`node scripts/ensure-postgres.mjs\` as root (it installs Debian's postgresql package), or \`apt-get install postgresql\`.`,
    );
  }
  return join(PG_ROOT, majors[0]!, 'bin');
}

interface RunResult {
  stdout: string;
  stderr: string;
}

/**
 * Runs a PostgreSQL binary, as `postgres` when we are root. Detached (its own process group), so a
 * Ctrl-C meant for us never reaches the server pg_ctl leaves running; cwd is the server's folder,
 * which `postgres` can enter (ours may not be).
 */
function runPg(bin: string, args: string[], cwd: string): Promise<RunResult> {
  const [command, argv] = isRoot() ? ['runuser', ['-u', POSTGRES_USER, '--', bin, ...args]] : [bin, args];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ stdout, stderr });
      else reject(new Error(`${bin.split('/').pop()} ${args.join(' ')} failed (${signal ?? `exit ${code}`}): ${(stderr || stdout).trim()}`));
    });
  });
}

/** A port free on 127.0.0.1 right now (the kernel's pick). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * As root the server runs as `postgres`, which must be able to enter every folder above its data
 * directory. Our own temporary folders (mkdtemp: mode 0700, e.g. the test run's TMPDIR) are opened
 * for search only (o+x: entering by name, never listing); anything else is the caller's to fix.
 */
function makeTraversableForPostgres(folder: string, log: (line: string) => void): void {
  if (!isRoot()) return;
  const tmpRoot = realpathSync('/tmp');
  for (let dir = dirname(folder); dir !== dirname(dir); dir = dirname(dir)) {
    const st = statSync(dir);
    if ((st.mode & 0o001) !== 0) continue;
    if (st.uid === 0 && dir.startsWith(tmpRoot + '/')) {
      chmodSync(dir, (st.mode & 0o7777) | 0o001);
      log(`postgres: ${dir} opened for search (o+x) so the postgres user can reach its data directory`);
      continue;
    }
    throw new Error(
      `the postgres user cannot enter ${dir} (mode ${(st.mode & 0o777).toString(8)}), above the throwaway PostgreSQL's data directory: pass a parentDir every user can enter (mode 0755 or 0711), or chmod o+x ${dir}`,
    );
  }
}

/** Pids whose parent is `ppid` (from /proc). */
function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === ppid) out.push(pid);
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** Alive and not a zombie (a dead postmaster may stay a zombie here until init reaps it). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function killHard(pid: number): void {
  // kill(0) and kill(-1) would signal our own process group or every process we may signal.
  if (!Number.isInteger(pid) || pid <= 1) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

/**
 * SIGKILL of the postmaster and all its children. Each child is a session of its own (PostgreSQL
 * calls setsid in every child), so a process-group kill would reach the postmaster only: they are
 * found by parent pid, with the postmaster stopped first (SIGSTOP) so that it forks none meanwhile.
 */
function killServer(pid: number): number[] {
  if (!Number.isInteger(pid) || pid <= 1) return [];
  try {
    process.kill(pid, 'SIGSTOP');
  } catch {
    /* gone: its children, if any, are found all the same while it is a zombie */
  }
  const victims = [pid, ...childrenOf(pid)];
  for (const p of victims) killHard(p);
  return victims;
}

async function untilGone(pids: number[], what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (pids.some(running)) {
    if (Date.now() > deadline) throw new Error(`${what}: processes ${pids.filter(running).join(', ')} still running after 30 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A postmaster running on `dataDir`, found by its command line (`postgres -D <dataDir>`), or 0. */
function postmasterByCommandLine(dataDir: string): number {
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0]?.endsWith('/postgres') && argv[1] === '-D' && argv[2] === dataDir && running(pid)) return pid;
    } catch {
      /* gone meanwhile */
    }
  }
  return 0;
}

/** The postmaster's pid, from the first line of postmaster.pid. */
function postmasterPid(dataDir: string): number {
  const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`${dataDir}/postmaster.pid holds no pid`);
  return pid;
}

/**
 * Kills the server and removes the folder once process `parent` is gone: an sh loop outside our
 * process group, so it outlives a SIGKILL of ours (then the 'exit' hook never runs).
 */
function startWatchdog(parent: number, folder: string): number {
  const script = [
    'parent=$1; folder=$2',
    'while kill -0 "$parent" 2>/dev/null; do sleep 1; done',
    'pid=$(head -n 1 "$folder/data/postmaster.pid" 2>/dev/null)',
    // As killServer(): stop it, then kill it and its children (each a session of its own).
    'if [ -n "$pid" ]; then kill -STOP "$pid" 2>/dev/null; kill -9 "$pid" $(ps -o pid= --ppid "$pid" 2>/dev/null) 2>/dev/null; fi',
    'rm -rf -- "$folder"',
  ].join('\n');
  const child = spawn('sh', ['-c', script, 'ccweb-postgres-watchdog', String(parent), folder], { detached: true, stdio: 'ignore' });
  child.on('error', () => {}); // reported below, synchronously
  if (child.pid === undefined) throw new Error('could not start sh for the throwaway PostgreSQL\'s watchdog: is /bin/sh on PATH?');
  child.unref();
  return child.pid;
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' allows only synchronous work: kill, then remove the folder.
  process.on('exit', () => {
    for (const server of live) {
      killHard(server.watchdog);
      const pid = server.pid();
      if (pid > 0) killServer(pid);
      rmSync(server.folder, { recursive: true, force: true });
    }
  });
}

const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export async function startThrowawayPostgres(options: ThrowawayPostgresOptions = {}): Promise<ThrowawayPostgres> {
  const log = options.log ?? (() => {});
  const bin = postgresBinDir();
  const folder = mkdtempSync(join(options.parentDir ?? tmpdir(), 'ccweb-postgres-'));
  const dataDir = join(folder, 'data');
  const logFile = join(folder, 'server.log');
  let pid = 0;
  let stopped = false;
  // What is running now: our pid, else a postmaster on our data directory all the same (a start
  // that timed out in pg_ctl may still have brought one up), so that stop() and the 'exit' hook
  // never miss one.
  const runningPid = (): number => (pid > 0 && running(pid) ? pid : postmasterByCommandLine(dataDir));
  const entry = { folder, pid: runningPid, watchdog: 0 };
  try {
    chmodSync(folder, 0o755);
    makeTraversableForPostgres(folder, log);
    if (isRoot()) {
      const chown = await new Promise<number | null>((resolve) =>
        spawn('chown', [POSTGRES_USER + ':', folder], { stdio: 'ignore' }).on('close', resolve).on('error', () => resolve(null)),
      );
      if (chown !== 0) throw new Error(`chown ${POSTGRES_USER}: ${folder} failed: is there a ${POSTGRES_USER} user (Debian's postgresql package makes it)?`);
    }
    entry.watchdog = startWatchdog(process.pid, folder);
    live.add(entry);
    installExitHook();
    // --no-sync: initdb's own final flush only; the server itself runs with fsync on.
    await runPg(join(bin, 'initdb'), ['-D', dataDir, '-U', POSTGRES_USER, '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'], folder);
  } catch (err) {
    live.delete(entry);
    killHard(entry.watchdog);
    rmSync(folder, { recursive: true, force: true });
    throw err;
  }

  const pgCtl = (args: string[]) => runPg(join(bin, 'pg_ctl'), ['-D', dataDir, ...args], folder);
  const start = async () => {
    await pgCtl(['-l', logFile, '-w', '-t', '60', 'start']);
    pid = postmasterPid(dataDir);
  };
  const logTail = () => {
    try {
      return readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n');
    } catch {
      return '(no server.log)';
    }
  };

  // The settings live in the cluster's own postgresql.conf, so that restart() is a plain pg_ctl
  // start. A port taken between freePort() and the server's bind is retried with another.
  let port = 0;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    writeFileSync(
      join(dataDir, 'postgresql.auto.conf'),
      [
        '# throwaway PostgreSQL (src/cli/throwaway-postgres.ts)',
        `port = ${port}`,
        `listen_addresses = '127.0.0.1'`,
        // TCP only: a unix socket's path must fit 107 bytes, which a test run's nested temporary
        // folders exceed (every client here connects to 127.0.0.1 anyway).
        `unix_socket_directories = ''`,
        // Durability is what the store is tested for: never trade it for speed here.
        'fsync = on',
        'synchronous_commit = on',
        'full_page_writes = on',
        // Small: several may run at once on two shared cores.
        'shared_buffers = 16MB',
        'max_connections = 50',
        '',
      ].join('\n'),
    );
    try {
      await start();
      break;
    } catch (err) {
      const portTaken = /could not bind|Address already in use/i.test(logTail());
      if (portTaken && attempt < 3) {
        appendFileSync(logFile, `-- port ${port} was taken, trying another\n`);
        continue;
      }
      live.delete(entry);
      killHard(entry.watchdog);
      const tail = logTail();
      rmSync(folder, { recursive: true, force: true });
      throw new Error(`throwaway PostgreSQL did not start: ${(err as Error).message}\nserver.log:\n${tail}`);
    }
  }
  log(`postgres: started pid ${pid} on 127.0.0.1:${port} (${dataDir})`);

  const urlOf = (database: string) => `postgres://${POSTGRES_USER}@127.0.0.1:${port}/${database}`;
  const server: ThrowawayPostgres = {
    url: urlOf('postgres'),
    port,
    dataDir,
    get pid() {
      return pid;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      live.delete(entry);
      killHard(entry.watchdog);
      const current = runningPid();
      const victims = current > 0 ? [current, ...childrenOf(current)] : [];
      if (victims.length > 0) {
        try {
          await pgCtl(['-m', 'fast', '-w', '-t', '60', 'stop']);
        } catch (err) {
          log(`postgres: pg_ctl stop failed (${(err as Error).message}), killing it`);
          killServer(current);
        }
        await untilGone(victims, 'stopping the throwaway PostgreSQL');
      }
      rmSync(folder, { recursive: true, force: true });
      log(`postgres: stopped pid ${pid}, removed ${folder}`);
    },
    async crash() {
      if (pid <= 0 || !running(pid)) throw new Error(`crash(): the throwaway PostgreSQL (pid ${pid}) is not running`);
      const victims = killServer(pid);
      await untilGone(victims, 'crashing the throwaway PostgreSQL');
      // The dead postmaster may linger as a zombie here, and PostgreSQL's lock-file check takes a
      // zombie's pid as alive; after a real crash the host would have reaped it. Its children are
      // gone (checked above), so no one still uses the old shared memory. The unix socket's lock
      // file names the same pid and is checked the same way.
      rmSync(join(dataDir, 'postmaster.pid'), { force: true });
      rmSync(join(dataDir, `.s.PGSQL.${port}.lock`), { force: true });
      rmSync(join(dataDir, `.s.PGSQL.${port}`), { force: true });
      log(`postgres: crashed (SIGKILL of ${victims.join(', ')})`);
      pid = 0;
    },
    async restart() {
      if (stopped) throw new Error('restart(): the throwaway PostgreSQL was stopped (its data directory is gone)');
      if (pid > 0 && running(pid)) throw new Error(`restart(): the throwaway PostgreSQL is still running (pid ${pid}); crash() or stop() it first`);
      try {
        await start();
      } catch (err) {
        throw new Error(`throwaway PostgreSQL did not restart: ${(err as Error).message}\nserver.log:\n${logTail()}`);
      }
      log(`postgres: restarted pid ${pid} on 127.0.0.1:${port}`);
    },
    async createDatabase(name: string) {
      if (!DATABASE_NAME.test(name)) throw new Error(`createDatabase: ${JSON.stringify(name)} is not a database name here (lower-case letters, digits and _, starting with a letter or _)`);
      const client = new pg.Client({ connectionString: urlOf('postgres') });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return urlOf(name);
    },
  };
  return server;
}
