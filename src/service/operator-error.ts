// Failures an operator causes and can fix: one line naming the cause, the configuration
// key and the fix, and an exit code systemd can tell apart from a crash (sysexits.h values, see
// docs/operations.md "Start-up failures and exit codes"). Anything else is a crash: exit 1 with the stack.

export const EXIT_CODES = {
  /** Bad configuration (a key's value, weak secrets, a port in use, a missing binary). Do not restart. */
  config: 78, // EX_CONFIG
  /** A dependency refused us (Gitea rejects the token). */
  unavailable: 69, // EX_UNAVAILABLE
  /** The data directory cannot be created or written. */
  cantCreate: 73, // EX_CANTCREAT
  /** Another process holds the data directory; restarting later may work. */
  tempFail: 75, // EX_TEMPFAIL
  /** Stopping took longer than the shutdown deadline; the process exited anyway. */
  shutdownTimeout: 75,
  /** Agent isolation does not hold on this host (src/isolation/service-isolation.ts); also a usage error of the CLI. */
  isolation: 2,
} as const;

/**
 * The exit codes a restart cannot cure: the unit's `RestartPreventExitStatus=` lists exactly these
 * (deploy/systemd/ccweb-gitea.service; test/unit/deploy-systemd.test.ts checks it). Not 75: another
 * process holding the data directory, or a slow stop, may be gone at the next try. Not 1: a crash.
 */
export const RESTART_CANNOT_CURE: readonly number[] = [EXIT_CODES.isolation, EXIT_CODES.unavailable, EXIT_CODES.cantCreate, EXIT_CODES.config];

export class OperatorError extends Error {
  override readonly name = 'OperatorError';
  constructor(
    /** What is wrong, e.g. "port 8080 on 127.0.0.1 is already in use". */
    readonly problem: string,
    /** The configuration key to look at, e.g. CCWEB_PORT. */
    readonly key: string,
    /** What to do. */
    readonly fix: string,
    readonly exitCode: number,
    /** Which of START_REFUSALS (start-refusals.ts, where every one is made). */
    readonly refusal?: string,
  ) {
    super(`${problem} [${key}]: ${fix}`);
  }
}

/** The one line `serve` prints to stderr for an operator error. */
export function formatOperatorError(error: OperatorError): string {
  return `ccweb-gitea: ${error.problem} [${error.key}]: ${error.fix} (exit ${error.exitCode})`;
}

/** An errno code of a Node error, when it has one. */
export function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
