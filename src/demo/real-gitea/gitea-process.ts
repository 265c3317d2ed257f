/**
 * A throwaway real Gitea (the build of scripts/install-gitea.mjs): its own temp folder, sqlite, a
 * free port on 127.0.0.1, its own process group; `close()` kills the group and removes the folder,
 * and a process `exit` hook kills it too if a test run ends without calling `close()`.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { installGitea } from '../../../scripts/install-gitea.mjs';

const execFileP = promisify(execFile);

export interface RealGitea {
  /** `http://127.0.0.1:<port>` (no trailing slash); the API is under `/api/v1`. */
  url: string;
  port: number;
  /** The instance's folder (app.ini, sqlite, repositories, logs). */
  root: string;
  version: string;
  binary: string;
  appIni: string;
  pid: number;
  /** Runs `gitea --config app.ini <args>` (the real admin CLI) and resolves with its stdout. */
  cli(args: string[]): Promise<string>;
  /** Gitea's own stdout/stderr so far (for failure messages). */
  output(): string;
  close(): Promise<void>;
}

export interface RealGiteaOptions {
  /** Folder to use (created; removed by close() unless `keep`). Default: a new temp folder. */
  root?: string;
  /** Keep the folder on close (to inspect it). */
  keep?: boolean;
  /** Fixed port (default: a free one). */
  port?: number;
  /** Gitea's log level (console). Default `warn`. */
  logLevel?: string;
  /**
   * Gitea's ROOT_URL (what it writes into html_url, clone_url… of API answers and webhooks). Default
   * its own `http://127.0.0.1:<port>/`; the fixture recorder uses `https://gitea.example.com/`.
   */
  rootUrl?: string;
  /** Start-up timeout. Default 60 s. */
  timeoutMs?: number;
  /**
   * `[security] IMPORT_LOCAL_PATHS`: admins may migrate a repository from a folder on this machine
   * (bench/task.ts imports its generated big repository that way: a local clone hardlinks the packs).
   */
  importLocalPaths?: boolean;
  /**
   * `[queue.webhook_sender] MAX_WORKERS`: how many deliveries Gitea sends at once. Gitea's default is
   * half its CPUs (1 on a 2-core machine: then one delivery to an unresponsive receiver holds every
   * other delivery back for DELIVER_TIMEOUT); a test of a node that stops answering sets what a larger host has.
   */
  webhookWorkers?: number;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) killGroup(child, 'SIGKILL');
  });
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    /* already gone */
  }
}

/**
 * A tiny `sh` loop that outlives a SIGKILLed test process: once this process is gone it kills Gitea's
 * process group and removes the folder (the `exit` hook cannot run after a SIGKILL).
 */
function startWatchdog(giteaPid: number, removeDir: string | null): ChildProcess {
  const rm = removeDir ? `; rm -rf '${removeDir.replace(/'/g, `'\\''`)}'` : '';
  const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; kill -KILL -${giteaPid} 2>/dev/null${rm}`;
  const w = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
  w.unref();
  return w;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

function appIni(o: { root: string; port: number; staticRoot: string; logLevel: string; rootUrl?: string | undefined; importLocalPaths?: boolean | undefined; webhookWorkers?: number | undefined }): string {
  const secret = () => randomBytes(32).toString('hex');
  // Root may run it only with these two lines at the very top (tests run as root on CI machines).
  const asRoot = process.getuid?.() === 0 ? `I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\nRUN_USER = root\n` : '';
  return `${asRoot}APP_NAME = ccweb-gitea test
RUN_MODE = prod
WORK_PATH = ${o.root}

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = ${o.port}
DOMAIN = ${o.rootUrl ? new URL(o.rootUrl).hostname : '127.0.0.1'}
ROOT_URL = ${o.rootUrl ?? `http://127.0.0.1:${o.port}/`}
${o.rootUrl ? `; html_url/clone_url from ROOT_URL, not from the Host of the request that made the comment (the default "auto")
PUBLIC_URL_DETECTION = legacy
` : ''}DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = ${join(o.root, 'data')}
; options/ templates/ public/ of the build (it has no bindata tag)
STATIC_ROOT_PATH = ${o.staticRoot}

[database]
DB_TYPE = sqlite3
PATH = ${join(o.root, 'data', 'gitea.db')}
SQLITE_JOURNAL_MODE = WAL

[security]
INSTALL_LOCK = true
SECRET_KEY = ${secret()}
INTERNAL_TOKEN = ${secret()}
PASSWORD_HASH_ALGO = pbkdf2_hi
MIN_PASSWORD_LENGTH = 8
PASSWORD_COMPLEXITY = off
${o.importLocalPaths ? 'IMPORT_LOCAL_PATHS = true\n' : ''}
[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
DEFAULT_KEEP_EMAIL_PRIVATE = true
NO_REPLY_ADDRESS = ${o.rootUrl ? `noreply.${new URL(o.rootUrl).hostname}` : 'noreply.localhost'}

[webhook]
; the service under test listens on 127.0.0.1
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 10
; every delivery on the hook's settings page (Replay is driven from there)
PAGING_NUM = 1000
${o.webhookWorkers ? `\n[queue.webhook_sender]\nMAX_WORKERS = ${o.webhookWorkers}\n` : ''}
[repository]
ROOT = ${join(o.root, 'repos')}
DEFAULT_BRANCH = main

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[mailer]
ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[log]
MODE = console
LEVEL = ${o.logLevel}
ROOT_PATH = ${join(o.root, 'log')}
`;
}

/** Builds Gitea if needed (fails with the installer's message when it cannot), then starts one. */
export async function startRealGitea(options: RealGiteaOptions = {}): Promise<RealGitea> {
  const install = await installGitea();
  const root = options.root ?? mkdtempSync(join(tmpdir(), 'ccweb-real-gitea-'));
  mkdirSync(join(root, 'data'), { recursive: true });
  mkdirSync(join(root, 'home'), { recursive: true });
  const iniPath = join(root, 'app.ini');
  // A clean environment: nothing of the caller's (GITEA__* overrides, git config, tokens) reaches it.
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: join(root, 'home'),
    USER: process.env.USER ?? 'root',
    LANG: 'C.UTF-8',
    GITEA_WORK_DIR: root,
    // The test run's process marker (test/support/global-setup.ts), so a Gitea left behind is found.
    ...(process.env.CCWEB_TEST_RUN_ID ? { CCWEB_TEST_RUN_ID: process.env.CCWEB_TEST_RUN_ID } : {}),
  };
  const cli = async (args: string[]): Promise<string> => {
    try {
      const { stdout } = await execFileP(install.binary, ['--config', iniPath, ...args], { env, cwd: root, maxBuffer: 16 * 1024 * 1024 });
      return stdout;
    } catch (e) {
      const err = e as { stderr?: string; stdout?: string; message: string };
      throw new Error(`gitea ${args.join(' ')} failed: ${err.message}\n${err.stderr ?? ''}${err.stdout ?? ''}`);
    }
  };

  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = options.port ?? (await freePort());
    writeFileSync(iniPath, appIni({ root, port, staticRoot: install.dir, logLevel: options.logLevel ?? 'warn', rootUrl: options.rootUrl, importLocalPaths: options.importLocalPaths, webhookWorkers: options.webhookWorkers }));
    if (attempt === 0) await cli(['migrate']);
    const url = `http://127.0.0.1:${port}`;
    const child = spawn(install.binary, ['--config', iniPath, 'web', '--port', String(port)], {
      env,
      cwd: root,
      detached: true, // its own process group: close() kills whatever it started too
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    live.add(child);
    installExitHook();
    const watchdog = startWatchdog(child.pid!, options.keep ? null : root);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-64 * 1024)));
    child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-64 * 1024)));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    let gone = false;
    void exited.then(() => {
      gone = true;
      live.delete(child);
    });
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    let ready = false;
    while (!gone && Date.now() < deadline) {
      try {
        const res = await fetch(`${url}/api/v1/version`, { signal: AbortSignal.timeout(2_000) });
        if (res.ok) {
          ready = true;
          break;
        }
      } catch {
        /* not listening yet */
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    if (ready) {
      let closed: Promise<void> | undefined;
      return {
        url,
        port,
        root,
        version: install.version,
        binary: install.binary,
        appIni: iniPath,
        pid: child.pid!,
        cli,
        output: () => out,
        close() {
          closed ??= (async () => {
            killGroup(child, 'SIGTERM');
            const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 5_000);
            await exited;
            clearTimeout(timer);
            killGroup(child, 'SIGKILL'); // anything it left in its group
            killGroup(watchdog, 'SIGKILL'); // the sh loop and its sleep
            if (!options.keep) rmSync(root, { recursive: true, force: true });
          })();
          return closed;
        },
      };
    }
    killGroup(child, 'SIGKILL');
    killGroup(watchdog, 'SIGKILL');
    await exited;
    lastError = new Error(`Gitea did not start on ${url}${gone ? ' (it exited)' : ''}:\n${out.slice(-4000)}`);
    if (options.port !== undefined) break; // a fixed port will not get better
  }
  if (!options.keep) rmSync(root, { recursive: true, force: true });
  throw lastError ?? new Error('Gitea did not start');
}
