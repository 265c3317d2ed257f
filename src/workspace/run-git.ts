// One git process: never through a shell, fresh environment, a timeout that kills the whole process
// group (git spawns git-remote-http, which holds the network connection), stderr redacted.
import { execa } from 'execa';

import { gitEnvironment, redactSecrets } from './git-credentials.js';

export interface GitLogEntry {
  /** The argument vector as run (never contains a secret: secrets travel in the environment). */
  args: readonly string[];
  cwd?: string;
  exitCode: number | null;
  timedOut: boolean;
  durationMs: number;
  /** Redacted, truncated. */
  stderr: string;
}

export type GitLogger = (entry: GitLogEntry) => void;

export interface RunGitOptions {
  cwd?: string;
  /** When set, the token reaches git through GIT_CONFIG_* environment, scoped to `scopeUrl`. */
  token?: string;
  scopeUrl?: string;
  timeoutMs: number;
  /** Extra strings to redact besides the token. */
  secrets?: readonly string[];
  logger?: GitLogger;
  /** Aborting kills git's process group, like the timeout (a lost lease, a service shutdown). */
  signal?: AbortSignal;
}

export interface GitResult {
  ok: boolean;
  exitCode: number | null;
  stdout: string;
  /** Redacted of the token and of any Authorization header. */
  stderr: string;
  timedOut: boolean;
  durationMs: number;
}

const MAX_LOGGED_STDERR = 4000;

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

export async function runGit(args: readonly string[], options: RunGitOptions): Promise<GitResult> {
  const secrets = [...(options.secrets ?? []), ...(options.token ? [options.token] : [])];
  const env = gitEnvironment({ token: options.token, scopeUrl: options.scopeUrl });
  const started = Date.now();
  // A stopped task starts no git command at all: nothing is pushed after a stop.
  if (options.signal?.aborted) return { ok: false, exitCode: null, stdout: '', stderr: 'not started: the task was stopped', timedOut: true, durationMs: 0 };
  let timedOut = false;
  const subprocess = execa('git', [...args], {
    cwd: options.cwd,
    env,
    extendEnv: false,
    shell: false,
    stdin: 'ignore',
    reject: false,
    detached: true,
    // We kill the group ourselves; execa's own cleanup does not cover detached processes.
    cleanup: false,
    encoding: 'utf8',
    stripFinalNewline: false,
    maxBuffer: 64 * 1024 * 1024,
  });
  const pid = subprocess.pid;
  const stop = () => {
    timedOut = true;
    killGroup(pid);
  };
  const timer = setTimeout(stop, options.timeoutMs);
  if (options.signal?.aborted) stop();
  options.signal?.addEventListener('abort', stop, { once: true });
  let result;
  try {
    result = await subprocess;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', stop);
    // Children that outlived git itself (should not happen) go too.
    if (timedOut) killGroup(pid);
  }
  const durationMs = Date.now() - started;
  let rawStderr = String(result.stderr ?? '');
  if (!timedOut && typeof result.exitCode !== 'number' && rawStderr === '') {
    // git could not be started at all (ENOENT, EACCES, cwd missing): say why.
    rawStderr = result.shortMessage ?? 'git did not run';
  }
  const stderr = redactSecrets(rawStderr, secrets);
  const stdout = redactSecrets(String(result.stdout ?? ''), secrets);
  const exitCode = typeof result.exitCode === 'number' ? result.exitCode : null;
  const out: GitResult = { ok: !timedOut && exitCode === 0, exitCode, stdout, stderr, timedOut, durationMs };
  options.logger?.({
    args: [...args],
    cwd: options.cwd,
    exitCode,
    timedOut,
    durationMs,
    stderr: stderr.slice(0, MAX_LOGGED_STDERR),
  });
  return out;
}

/** A short, redacted description of a failed git command for an error message. */
export function describeFailure(args: readonly string[], result: GitResult): string {
  const verb = args.find((a) => !a.startsWith('-') && !a.includes('=')) ?? 'git';
  if (result.timedOut) return `git ${verb} timed out after ${result.durationMs} ms`;
  const lines = result.stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith('hint:'));
  return `git ${verb} failed (exit ${result.exitCode ?? 'signal'}): ${lines.slice(-3).join(' | ') || 'no output'}`;
}
