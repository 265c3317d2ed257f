import { randomUUID } from 'node:crypto';
import type { RepoLockEvent } from '../../machines/repo-lock.js';
import type { TaskContext, TaskEvent } from '../../machines/task-lifecycle.js';
import { DEFAULTS } from '../config/keys.js';
import { GLOBAL_CONTROL_KEY, type ControlRecord, type LeaseRecord, type RepositoryRecord, type TaskRecord } from '../domain/records.js';
import { LOCK_KIND, lockActorId } from '../leases/repo-lock-actor.js';
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { TASK_KIND, taskActorId } from '../tasks/task-actor.js';
import { systemClock } from './clock.js';
import { lockEvent, taskEvent } from './events.js';
import { nextRetryDue, pickClaims, type ClaimCandidate } from './pick-claims.js';
import { recoverAfterRestart } from './recover.js';
import type { HeldLease, RecoveryResult, RunningTask, SchedulerClock, SchedulerLogger, TaskExecutor } from './types.js';

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
}

export interface Scheduler {
  /** Subscribes to transitions, arms the safety poll and scans. Call `recover()` first after a restart. */
  start(): void;
  /** Stops claiming, aborts running executors' signals, waits for them and releases their leases. */
  stop(): Promise<void>;
  /** Asks for a scan; resolves when that scan (not the work it starts) is done. */
  wake(): Promise<void>;
  /** Restart recovery, spec §5.5 (see `recoverAfterRestart`). */
  recover(): Promise<RecoveryResult>;
  /** Tasks this process holds a lease for. */
  running(): RunningTask[];
  /** Resolves when no scan, claim, heartbeat or release is in flight (executors may still run). */
  settled(): Promise<void>;
}

interface Worker {
  repoKey: string;
  taskId: string;
  /** Null while the lease is being acquired. */
  lease: HeldLease | null;
  abort: AbortController;
  cancelHeartbeat: (() => void) | null;
  /** The lease was lost (expired, heartbeat rejected): the slot is free, the executor is orphaned. */
  lost: boolean;
  finished: boolean;
  done: Promise<void> | null;
}

/** States in which a task whose lease was lost is moved on by the scheduler (see `failLeaseless`). */
function leaseLostEvent(state: string, errorCode: string, now: number): TaskEvent | null {
  switch (state) {
    case 'preparing':
      return { type: 'PREPARE_FAILED', errorCode, retryable: true, retryAt: now, resumeAt: 'preparing' };
    case 'running':
      return { type: 'TURN_FAILED', errorCode, retryable: true, retryAt: now, resumeAt: 'preparing' };
    case 'aborting':
      // The abort was not confirmed while the lease lived: §8 "abort timeout → failed, release".
      return { type: 'ABORT_TIMEOUT' };
    default:
      // verifying_reply: the reply verifier actor owns it and has its own deadlines.
      return null;
  }
}

/**
 * Claims tasks for repositories: per repository strictly one task at a time (the repo-lock actor's
 * lease), FIFO by `queueSeq`, due `retry_wait` tasks first; repositories in parallel up to
 * `maxConcurrentTasks`. A task goes `queued → preparing` only after its repository lease was
 * acquired AND the CLAIM transition (CAS on stateVersion, in the runtime) succeeded; if the CLAIM is
 * rejected the lease is released at once.
 *
 * The in-memory worker map is only an optimisation (spec §7): the durable lease decides. Leases are
 * renewed by heartbeats; a lease that expires or whose heartbeat is rejected is lost: the executor's
 * signal aborts, its slot frees, and a task it left in preparing/running is moved to `retry_wait`
 * (errorCode `lease_expired` / `lease_lost`, §8 "lease expired: at most one retry") so it does not
 * sit leaseless until the next restart. An orphaned executor that returns later still sends its
 * RELEASE, which the lock rejects (the leaseId is stale) and the runtime alert-audits.
 */
export function createScheduler(options: SchedulerOptions): Scheduler {
  const { store, runtime, executor, owner } = options;
  const maxConcurrent = options.maxConcurrentTasks ?? DEFAULTS.maxConcurrentTasks;
  const ttlMs = options.leaseTtlMs ?? DEFAULTS.leaseTtlMs;
  const heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(ttlMs / 3));
  const safetyPollMs = options.safetyPollMs ?? 30_000;
  const clock: SchedulerClock = options.clock ?? (options.now ? { now: options.now, setTimer: systemClock.setTimer } : systemClock);
  const by = options.by ?? 'scheduler';
  const logger: SchedulerLogger = options.logger ?? { info: () => {}, warn: () => {}, error: () => {} };
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) throw new Error('maxConcurrentTasks must be a positive integer');
  if (heartbeatMs > 0 && heartbeatMs >= ttlMs) throw new Error('heartbeatMs must be shorter than leaseTtlMs');

  const workers = new Map<string, Worker>();
  const orphans = new Set<Worker>();
  const inflight = new Set<Promise<unknown>>();
  // Repositories whose lock actor is stored but could not be hosted (restore failed, alert-audited
  // by the runtime): claiming there would fail forever, so they wait for an operator and a restart.
  const unavailableRepos = new Set<string>();
  let started = false;
  let stopped = false;
  let unsubscribe: (() => void) | null = null;
  let cancelWakeTimer: (() => void) | null = null;
  let wakeTimerAt: number | null = null;
  let cancelPoll: (() => void) | null = null;
  let tickRequested = false;
  let tickLoop: Promise<void> | null = null;

  function track<T>(p: Promise<T>): Promise<T> {
    inflight.add(p);
    void p.then(
      () => inflight.delete(p),
      () => inflight.delete(p),
    );
    return p;
  }

  function isPaused(): boolean {
    return store.get<ControlRecord>('control', GLOBAL_CONTROL_KEY)?.globalPaused === true;
  }

  function isDisabled(repoKey: string): boolean {
    return store.get<RepositoryRecord>('repositories', repoKey)?.status === 'disabled';
  }

  function leaseHeld(repoKey: string): boolean {
    return store.get<LeaseRecord>('leases', repoKey)?.state === 'held';
  }

  function wake(): Promise<void> {
    if (!started || stopped) return Promise.resolve();
    tickRequested = true;
    if (!tickLoop) {
      tickLoop = track(
        (async () => {
          // Coalesce the burst of wake-ups one transition batch produces.
          await Promise.resolve();
          try {
            while (tickRequested && !stopped) {
              tickRequested = false;
              try {
                await tick();
              } catch (err) {
                logger.error({ err: errorMessage(err) }, 'scheduler scan failed');
              }
            }
          } finally {
            tickLoop = null;
          }
        })(),
      );
    }
    return tickLoop;
  }

  async function tick(): Promise<void> {
    const now = clock.now();

    // Expired leases first, so their repositories (and a lost worker's slot) are free for this scan.
    for (const lease of store.list<LeaseRecord>('leases', (r) => r.state === 'held')) {
      if (lease.expiresAt !== null && Date.parse(lease.expiresAt) <= now) await expireLease(lease, now);
    }

    // Only tasks with a live actor can be claimed; one whose restore failed would be retried forever.
    const tasks = [
      ...store.byIndex<TaskRecord>('tasks', 'state', 'queued'),
      ...store.byIndex<TaskRecord>('tasks', 'state', 'retry_wait'),
      ...store.byIndex<TaskRecord>('tasks', 'state', 'verifying_reply'),
    ].filter(
      (t) => runtime.has(taskActorId(t.taskId)),
    );
    const heldUntil = options.holdClaimsUntil?.(now) ?? null;
    // Global pause (§8): claim nothing, tasks stay queued; running ones finish normally.
    if (!isPaused()) {
      const picks = pickClaims({
        tasks: heldUntil === null ? tasks : tasks.filter((t) => t.state === 'verifying_reply'),
        now,
        busy: (repoKey) => workers.has(repoKey) || leaseHeld(repoKey) || unavailableRepos.has(repoKey),
        disabled: isDisabled,
        slots: maxConcurrent - workers.size,
      });
      for (const pick of picks) {
        const worker: Worker = {
          repoKey: pick.repoKey,
          taskId: pick.taskId,
          lease: null,
          abort: new AbortController(),
          cancelHeartbeat: null,
          lost: false,
          finished: false,
          done: null,
        };
        // Reserve the slot now, synchronously, so the cap and one-per-repository hold across scans.
        workers.set(pick.repoKey, worker);
        void track(
          claim(pick, worker).catch((err: unknown) => {
            // A lease acquired before the failure is not renewed and expires on its own.
            logger.error({ taskId: pick.taskId, err: errorMessage(err) }, 'claim failed');
            freeSlot(worker);
          }),
        );
      }
    }

    // Next wake-up: the earliest retry deadline or lease expiry still ahead.
    let next = heldUntil ?? nextRetryDue(tasks, now);
    for (const lease of store.list<LeaseRecord>('leases', (r) => r.state === 'held')) {
      const at = lease.expiresAt === null ? null : Date.parse(lease.expiresAt);
      if (at !== null && at > now && (next === null || at < next)) next = at;
    }
    armWakeTimer(next, now);
  }

  function armWakeTimer(at: number | null, now: number): void {
    if (at === wakeTimerAt) return;
    cancelWakeTimer?.();
    cancelWakeTimer = null;
    wakeTimerAt = at;
    if (at === null || stopped) return;
    cancelWakeTimer = clock.setTimer(() => {
      cancelWakeTimer = null;
      wakeTimerAt = null;
      void wake();
    }, at - now);
  }

  function armPoll(): void {
    if (stopped) return;
    cancelPoll = clock.setTimer(() => {
      void wake();
      armPoll();
    }, safetyPollMs);
  }

  async function claim(pick: ClaimCandidate, worker: Worker): Promise<void> {
    const taskActor = taskActorId(pick.taskId);
    const expected = pick.event === 'CLAIM' ? 'queued' : pick.event === 'RETRY_DUE' ? 'retry_wait' : 'verifying_reply';
    if (runtime.stateOf(taskActor)?.state !== expected) return freeSlot(worker);

    const leaseId = randomUUID();
    const now = clock.now();
    const acquired = await acquire(pick.repoKey, { type: 'ACQUIRE', leaseId, owner, taskId: pick.taskId, now, ttlMs });
    if (!acquired) return freeSlot(worker);
    worker.lease = { repoKey: pick.repoKey, leaseId, owner, expiresAt: now + ttlMs };

    // Pause or disable may have landed while the lease was being acquired: check again right before
    // the CLAIM, so a paused scheduler never claims (a CLAIM audit event never follows a pause).
    if (stopped || worker.lost || isPaused() || isDisabled(pick.repoKey)) {
      await release(worker.lease);
      return freeSlot(worker);
    }
    const event: TaskEvent | null =
      pick.event === 'CLAIM' ? { type: 'CLAIM', leaseId } : pick.event === 'RETRY_DUE' ? { type: 'RETRY_DUE', leaseId } : null;
    const claimed = event ? await runtime.send(taskActor, event, { by }) : { ok: runtime.stateOf(taskActor)?.state === expected };
    if (!claimed.ok) {
      // Cancelled (or otherwise moved) between the scan and the CLAIM: the CAS lost, give the lease back.
      await release(worker.lease);
      return freeSlot(worker);
    }
    startHeartbeat(worker);
    worker.done = runExecutor(worker, worker.lease);
  }

  async function acquire(repoKey: string, event: Extract<RepoLockEvent, { type: 'ACQUIRE' }>): Promise<boolean> {
    const actorId = lockActorId(repoKey);
    if (!runtime.has(actorId) && store.get('actors', actorId)) {
      unavailableRepos.add(repoKey);
      logger.error({ repoKey }, 'repository lock is stored but not live; skipping the repository');
      return false;
    }
    if (!runtime.has(actorId)) {
      try {
        await runtime.create(LOCK_KIND, actorId, { repoKey }, { events: [event], by });
        return true;
      } catch (err) {
        // Created by someone else in between: fall through to a plain ACQUIRE.
        if (!runtime.has(actorId)) {
          logger.error({ repoKey, err: errorMessage(err) }, 'repository lock could not be created');
          return false;
        }
      }
    }
    const res = await runtime.send(actorId, event, { by });
    return res.ok;
  }

  async function release(lease: HeldLease): Promise<boolean> {
    const res = await runtime.send(lockActorId(lease.repoKey), lockEvent({ type: 'RELEASE', leaseId: lease.leaseId }), { by });
    return res.ok;
  }

  function freeSlot(worker: Worker): void {
    if (workers.get(worker.repoKey) === worker) workers.delete(worker.repoKey);
    void wake();
  }

  async function runExecutor(worker: Worker, lease: HeldLease): Promise<void> {
    let failure: unknown = null;
    try {
      await executor.run(worker.taskId, lease, worker.abort.signal);
    } catch (err) {
      failure = err;
    }
    worker.finished = true;
    worker.cancelHeartbeat?.();
    await track(
      finish(worker, lease, failure).catch((err: unknown) => {
        logger.error({ taskId: worker.taskId, err: errorMessage(err) }, 'lease release after the executor failed');
      }),
    );
  }

  async function finish(worker: Worker, lease: HeldLease, failure: unknown): Promise<void> {
    try {
      if (failure !== null) logger.error({ taskId: worker.taskId, err: errorMessage(failure) }, 'executor failed');
      if (!worker.lost && !stopped) {
        // The executor must leave the task out of preparing/running before it returns; one that
        // did not (a bug, or a throw) must not leave the task stuck holding a lease nobody renews.
        // After stop() aborted it, the task stays where it is: the next start's recovery moves it
        // to retry_wait (interrupted_by_restart) instead of failing it here.
        await failLeaseless(worker.taskId, lease.leaseId, failure !== null ? 'executor_error' : 'executor_left_task', true);
      }
      // For a lost lease this RELEASE names a stale leaseId: the lock rejects it and the runtime
      // alert-audits it, which is the record that the orphaned worker came back.
      const released = await release(lease);
      if (!released && !worker.lost) logger.warn({ taskId: worker.taskId, leaseId: lease.leaseId }, 'lease release rejected');
    } finally {
      orphans.delete(worker);
      freeSlot(worker);
    }
  }

  function startHeartbeat(worker: Worker): void {
    if (heartbeatMs <= 0 || stopped) return;
    worker.cancelHeartbeat = clock.setTimer(() => {
      worker.cancelHeartbeat = null;
      void track(
        beat(worker).catch((err: unknown) => {
          logger.error({ taskId: worker.taskId, err: errorMessage(err) }, 'heartbeat failed');
          startHeartbeat(worker);
        }),
      );
    }, heartbeatMs);
  }

  async function beat(worker: Worker): Promise<void> {
    const lease = worker.lease;
    if (!lease || worker.lost || worker.finished) return;
    const now = clock.now();
    const res = await runtime.send(lockActorId(lease.repoKey), lockEvent({ type: 'HEARTBEAT', leaseId: lease.leaseId, now, ttlMs }), { by });
    if (worker.lost || worker.finished) return;
    if (res.ok) {
      lease.expiresAt = Math.max(lease.expiresAt, now + ttlMs);
      startHeartbeat(worker);
      return;
    }
    await leaseLost(worker, lease.leaseId, worker.taskId, 'lease_lost');
  }

  async function expireLease(lease: LeaseRecord, now: number): Promise<void> {
    if (lease.leaseId === null) return;
    const res = await runtime.send(lockActorId(lease.repoKey), lockEvent({ type: 'EXPIRE', now }), { by });
    if (!res.ok) return; // renewed in between
    const worker = workers.get(lease.repoKey);
    await leaseLost(worker?.lease?.leaseId === lease.leaseId ? worker : null, lease.leaseId, lease.taskId, 'lease_expired');
  }

  async function leaseLost(worker: Worker | null, leaseId: string, taskId: string | null, reason: string): Promise<void> {
    if (worker && !worker.lost) {
      worker.lost = true;
      worker.cancelHeartbeat?.();
      worker.abort.abort(new Error(reason));
      orphans.add(worker);
      if (workers.get(worker.repoKey) === worker) workers.delete(worker.repoKey);
    }
    await store.transact((tx) =>
      tx.appendAudit({
        action: 'scheduler.lease_lost',
        actor: by,
        level: 'alert',
        taskId,
        errorCode: reason,
        metadata: { leaseId, liveWorker: worker !== null },
      }),
    );
    if (taskId) await failLeaseless(taskId, leaseId, reason, false);
    void wake();
  }

  /**
   * Moves a task that still sits in a lease-holding state under `leaseId` on, because nobody will:
   * a lost lease → `retry_wait` (one retry, §8); an executor that returned or threw → `failed`.
   */
  async function failLeaseless(taskId: string, leaseId: string, errorCode: string, executorDone: boolean): Promise<void> {
    const current = runtime.stateOf(taskActorId(taskId));
    if (!current) return;
    // A resumed verification (RESUME after a restart) runs under a lease the task never recorded;
    // only this worker can be driving it (one lease per repository), and it must not loop.
    if (executorDone && current.state === 'verifying_reply') {
      logger.warn({ taskId, errorCode }, 'verification left unfinished; failing the reply');
      const failReply: TaskEvent = { type: 'REPLY_FAILED', errorCode };
      await runtime.send(taskActorId(taskId), failReply, { by });
      return;
    }
    if ((current.context as TaskContext).leaseId !== leaseId) return;
    let event: TaskEvent | null;
    if (executorDone) {
      event = current.state === 'preparing' || current.state === 'running' ? { type: 'FAIL', errorCode } : null;
    } else {
      event = leaseLostEvent(current.state, errorCode, clock.now());
    }
    if (!event) return;
    logger.warn({ taskId, state: current.state, errorCode }, 'task left holding a lease; moving it on');
    await runtime.send(taskActorId(taskId), event, { by });
  }

  function onTransition(notice: TransitionNotice): void {
    if (notice.kind === TASK_KIND && (notice.toState === 'queued' || notice.toState === 'retry_wait')) void wake();
    else if (notice.kind === LOCK_KIND && notice.toState === 'free') void wake();
  }

  async function settled(): Promise<void> {
    while (inflight.size > 0) await Promise.allSettled([...inflight]);
  }

  return {
    start() {
      if (started) return;
      started = true;
      stopped = false;
      unsubscribe = runtime.onTransition(onTransition);
      armPoll();
      void wake();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      unsubscribe?.();
      cancelWakeTimer?.();
      cancelPoll?.();
      await settled();
      const current = [...workers.values()];
      for (const w of current) {
        w.cancelHeartbeat?.();
        w.abort.abort(new Error('scheduler_stopping'));
      }
      // Executors must honour the signal; their leases are released as they return. Orphans (their
      // lease was lost, their signal already aborted) are waited for too, so nothing of theirs still
      // writes after stop() returns and the store closes.
      await Promise.all([...current, ...orphans].map((w) => w.done).filter((d): d is Promise<void> => d !== null));
      await settled();
    },
    wake,
    recover() {
      return recoverAfterRestart({
        store,
        runtime,
        owner,
        now: clock.now(),
        by,
        hasLiveWorker: (taskId) => [...workers.values()].some((w) => w.taskId === taskId),
        logger,
      });
    },
    running() {
      return [...workers.values()]
        .filter((w): w is Worker & { lease: HeldLease } => w.lease !== null && w.done !== null)
        .map((w) => ({ repoKey: w.repoKey, taskId: w.taskId, leaseId: w.lease.leaseId, expiresAt: w.lease.expiresAt }));
    },
    settled,
  };
}

function errorMessage(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}
