/**
 * The real service as its own process (`node --import tsx src/main.ts`, what `npm start` runs), for
 * tests that kill it with SIGKILL. `--import tsx` keeps it one process: a SIGKILL through the tsx
 * CLI wrapper would leave the real service running. With `compiled: true` it runs the production
 * build instead (`node dist/src/main.js`, what `npm run start:dist` runs; `npm run build` first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../codex-harness.js';

export interface ServiceProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  /** Every stdout/stderr line so far (JSON log lines from pino, or plain text). */
  lines: string[];
  /** SIGKILL, and wait for the exit. */
  kill9(): Promise<void>;
  /** SIGTERM (graceful), and wait for the exit. */
  stop(): Promise<void>;
}

export interface ServiceProcessOptions {
  timeoutMs?: number;
  /** Run the compiled service (dist/src/main.js) instead of src/main.ts through tsx. Default false. */
  compiled?: boolean;
  /** With `compiled`: the build directory under the repository root. Default `dist`. */
  buildDir?: string;
  /** Its own session and process group (as under systemd or a login shell), so a test can signal the group. Default false. */
  ownProcessGroup?: boolean;
  /** Every output line as it comes, also before the service listens (e.g. a standby's). */
  onLine?: (line: string) => void;
  /** The child as soon as it is spawned (a standby never listens until it writes, but may be killed). */
  onSpawn?: (child: ChildProcess) => void;
}

export function startServiceProcess(env: Record<string, string>, options: ServiceProcessOptions = {}): Promise<ServiceProcess> {
  const compiledMain = join(repoRoot, options.buildDir ?? 'dist', 'src', 'main.js');
  if (options.compiled && !existsSync(compiledMain)) {
    return Promise.reject(new Error(`${compiledMain} is missing: run \`npm run build\` first`));
  }
  const args = options.compiled ? [compiledMain] : ['--import', 'tsx', join(repoRoot, 'src', 'main.ts')];
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    // info: the harness waits for the "listening" line.
    env: { ...process.env, ...env, CCWEB_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup ?? false,
  });
  options.onSpawn?.(child);
  const lines: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`service did not start in time:\n${lines.slice(-30).join('\n')}`));
    }, options.timeoutMs ?? 60_000);
    const onLine = (line: string) => {
      lines.push(line);
      options.onLine?.(line);
      if (!line.includes('ccweb-gitea listening')) return;
      try {
        const url = (JSON.parse(line) as { url: string }).url;
        clearTimeout(timer);
        resolve({
          url,
          pid: child.pid!,
          child,
          lines,
          async kill9() {
            child.kill('SIGKILL');
            await exited;
          },
          async stop() {
            child.kill('SIGTERM');
            await exited;
          },
        });
      } catch {
        /* not the JSON line */
      }
    };
    for (const stream of [child.stdout!, child.stderr!]) {
      let buf = '';
      stream.on('data', (d: Buffer) => {
        buf += d.toString();
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          onLine(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
        }
      });
    }
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`service exited (${code ?? signal}) before listening:\n${lines.slice(-30).join('\n')}`));
    });
  });
}
