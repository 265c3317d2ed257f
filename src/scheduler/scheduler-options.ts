import { DEFAULTS } from '../config/keys.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import type { SchedulerClock, SchedulerLogger, TaskExecutor } from './types.js';
import type { ClaimPreference } from './claim-preference.js';

export interface SchedulerOptions {
  store: Store;
  runtime: ActorRuntime;
  executor: TaskExecutor;
  /** This process's lease owner, `<instance>/<pid>/<startedAt>` (see `leaseOwnerId`). */
  owner: string;
  /**
   * Global cap on tasks holding a lease at once. The spec disagrees with itself: §5.6 makes
   * `queued → preparing` wait for "a global slot and the repository lease", §7 says there is no
   * global semaphore. We keep the cap, with the configuration's default (CCWEB_MAX_CONCURRENT_TASKS,
   * 2): each running task owns a Codex app-server, a gitea-mcp process and a checkout, which a small
   * host cannot multiply without bound. Correctness never depends on it — one task per repository
   * comes from the durable lease alone — so a large value gives §7's behaviour.
   */
  maxConcurrentTasks?: number;
  /** Lease lifetime without a heartbeat (default: configuration default, 60 s). */
  leaseTtlMs?: number;
  /** Heartbeat period (default: a third of the TTL). 0 disables heartbeats (tests of expiry). */
  heartbeatMs?: number;
  /** Slow safety scan, for wake-ups nobody announced (e.g. a control record written directly). */
  safetyPollMs?: number;
  clock?: SchedulerClock;
  /** Shorthand for a clock with this `now` and real timers. */
  now?: () => number;
  logger?: SchedulerLogger;
  /** Audit/event actor name. */
  by?: string;
  /**
   * Until when (epoch ms) new claims and due retries are held, or null: the model provider's rate
   * limit (src/usage/provider-hold.ts). Verifications still resume: they need Gitea, not the model.
   */
  holdClaimsUntil?: (now: number) => number | null;
  /**
   * Other nodes share the store and may take a repository over once its lease expires on the
   * database's clock: a lease this node could not renew in time counts as lost here, and its turn stops.
   */
  othersMayTakeOver?: boolean;
  /** Several nodes: a new task waits a moment for the node holding its Codex thread, or the one that accepted it (claim-preference.ts). */
  claimPreference?: ClaimPreference;
  /** Told after each renewal of a task's lease (the gate's write deadline moves on: writeDeadline). */
  onLeaseRenewed?: (taskId: string) => void;
}

/** The scheduler's numbers once defaults are applied and checked. */
export interface SchedulerSettings {
  maxConcurrent: number;
  ttlMs: number;
  /** 0: no heartbeats. */
  heartbeatMs: number;
  safetyPollMs: number;
  by: string;
}

type SettingsInput = Pick<SchedulerOptions, 'maxConcurrentTasks' | 'leaseTtlMs' | 'heartbeatMs' | 'safetyPollMs' | 'by'>;

/** Applies the defaults and rejects settings under which leases could not be kept. */
export function resolveSchedulerSettings(options: SettingsInput): SchedulerSettings {
  const maxConcurrent = options.maxConcurrentTasks ?? DEFAULTS.maxConcurrentTasks;
  const ttlMs = options.leaseTtlMs ?? DEFAULTS.leaseTtlMs;
  const heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(ttlMs / 3));
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) throw new Error('maxConcurrentTasks must be a positive integer');
  // A heartbeat no sooner than the TTL lets the lease expire between two beats.
  if (heartbeatMs > 0 && heartbeatMs >= ttlMs) throw new Error('heartbeatMs must be shorter than leaseTtlMs');
  return { maxConcurrent, ttlMs, heartbeatMs, safetyPollMs: options.safetyPollMs ?? 30_000, by: options.by ?? 'scheduler' };
}
