/** A repository lease the scheduler holds for one task; `expiresAt` moves with each heartbeat. */
export interface HeldLease {
  repoKey: string;
  leaseId: string;
  owner: string;
  /** Epoch ms, scheduler clock. */
  expiresAt: number;
}

/**
 * Runs one claimed task (workspace → Codex turn → reply verification). The scheduler calls it AFTER
 * it moved the task into `preparing` (CLAIM{leaseId}) or out of `retry_wait` (RETRY_DUE{leaseId});
 * the promise settles when the task no longer needs the lease (a terminal state, `waiting_user`,
 * `blocked_workspace`, `retry_wait`, …), and the scheduler then releases the lease.
 *
 * `signal` aborts when the lease is lost (heartbeat rejected, lease expired) or the scheduler stops:
 * the executor must then stop touching the workspace and send no further task events, because the
 * task may already belong to another worker.
 */
export interface TaskExecutor {
  run(taskId: string, lease: HeldLease, signal: AbortSignal): Promise<void>;
}

/** Time and timers the scheduler uses; injectable so tests can move time by hand. */
export interface SchedulerClock {
  now(): number;
  /** Calls `fn` once after `ms`; returns a cancel function. */
  setTimer(fn: () => void, ms: number): () => void;
}

export interface SchedulerLogger {
  info(obj: Record<string, unknown>, msg?: string): void;
  warn(obj: Record<string, unknown>, msg?: string): void;
  error(obj: Record<string, unknown>, msg?: string): void;
}

export interface RunningTask {
  repoKey: string;
  taskId: string;
  leaseId: string;
  expiresAt: number;
}

/** What `recover()` did, per rule of spec §5.5. */
export interface RecoveryResult {
  /** Rule 1: expired leases ended with EXPIRE. */
  leasesExpired: number;
  /** Rule 1: unexpired leases of a previous process of this instance, released. */
  leasesReleased: number;
  /** Rule 1: unexpired leases of other owners, kept until they expire. */
  leasesKept: number;
  /** Rule 2: `queued` tasks, eligible again as they are. */
  queued: number;
  /** Rule 3: `retry_wait` tasks whose timers were re-armed (already due ones included). */
  retryWait: number;
  /** Rule 4: `preparing`/`running` tasks moved to `retry_wait` (interrupted_by_restart). */
  interruptedToRetry: string[];
  /** Rule 4: `preparing`/`running` tasks over the retry limit, moved to `failed`. */
  interruptedToFailed: string[];
  /** Rule 4: `aborting` tasks, moved to `aborted`. */
  abortingToAborted: string[];
  /** Untouched; the reply verifier actor restores itself, the caller resumes these. */
  verifyingReply: string[];
  /** Untouched: a user must answer first. */
  waitingUser: string[];
}
