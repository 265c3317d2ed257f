import { isLeaseHeld } from '../../machines/repo-lock.js';
import { TASK_STATES, taskStateTakes, type TaskContext, type TaskEvent } from '../../machines/task-lifecycle.js';
import { GLOBAL_CONTROL_KEY, type ControlRecord, type LeaseRecord, type RepositoryRecord, type SessionRecord, type TaskRecord } from '../domain/records.js';
import type { ActorRecord, TransitionNotice } from '../runtime/actor-runtime.js';
import { isLeaseRefusal, type Tx } from '../store/types.js';
import { lockActorId } from '../leases/repo-lock-actor.js';
import { taskActorId } from '../tasks/task-actor.js';
import { claimableUnderHold, SCANNED_STATES } from './claim-decisions.js';
import { claimTogether, type Claimed } from './claim-transaction.js';
import { systemClock } from './clock.js';
import { expiredLeases, renewedExpiry, workUnder } from './lease-decisions.js';
import { pickClaims, type ClaimCandidate } from './pick-claims.js';
import { recoverAfterRestart } from './recover.js';
import { errorMessage, repoLockClient } from './repo-lock-client.js';
import { resolveSchedulerSettings, type SchedulerOptions } from './scheduler-options.js';
import type { HeldLease, RecoveryResult, RunningTask, SchedulerClock, SchedulerLogger } from './types.js';
import { nextWakeAt, wakesScheduler } from './wake-decisions.js';
import { CLAIMABLE_CHANNEL } from './claimable-channel.js';
import type { ClaimPreference, PreferredNodes } from './claim-preference.js';
import { inflightSet, wakeLoop } from './wake-loop.js';

export type { SchedulerOptions } from './scheduler-options.js';

export interface Scheduler {
  /** Subscribes to transitions, arms the safety poll and scans. Call `recover()` first after a restart. */
  start(): void;
  /** Stops claiming, aborts running executors' signals, waits for them and releases their leases. */
  stop(): Promise<void>;
  /** Asks for a scan; resolves when that scan (not the work it starts) is done. */
  wake(): Promise<void>;
  /**
   * Restart recovery, spec §5.5 (see `recoverAfterRestart`); with `repos`, for those repositories
   * only (a node that took them over from one that stopped).
   */
  recover(repos?: (repoKey: string) => boolean): Promise<RecoveryResult>;
  /** Tasks this process holds a lease for. */
  running(): RunningTask[];
  /**
   * Until when (this node's clock) the task's work may still be written from here: a heartbeat before
   * its lease's expiry, as `watchExpiry` judges it; undefined when this node runs no lease of it.
   */
  writeDeadline(taskId: string): number | undefined;
  /** Resolves when no scan, claim, heartbeat or release is in flight (executors may still run). */
  settled(): Promise<void>;
}

interface Worker {
  repoKey: string;
  taskId: string;
  /** Granted with the claim, in its transaction; `expiresAt` moves with each heartbeat. */
  lease: HeldLease;
  abort: AbortController;
  cancelHeartbeat: (() => void) | null;
  /** The local watch on the lease's expiry (see `watchExpiry`). */
  cancelWatch: (() => void) | null;
  /** The lease was lost (expired, heartbeat rejected): the slot is free, the executor is orphaned. */
  lost: boolean;
  finished: boolean;
  done: Promise<void> | null;
}

/**
 * Claims tasks for repositories: per repository strictly one task at a time (the repo-lock actor's
 * lease), FIFO by `queueSeq`, due `retry_wait` tasks first; repositories in parallel up to
 * `maxConcurrentTasks` on this node. A claim is one transaction (claimTogether): the repository's lease
 * granted, its lock actor held and the task moved under it (`queued → preparing`) are kept together or
 * not at all, and nodes claiming at once take disjoint tasks (SKIP LOCKED), so no lease is granted for a
 * claim that does not happen.
 *
 * The in-memory worker map is only an optimisation (spec §7): the durable lease decides. Leases are
 * renewed by heartbeats; a lease that expires or whose heartbeat is rejected is lost: the executor's
 * signal aborts, its slot frees, and a task it left in preparing/running is moved to `retry_wait`
 * (errorCode `lease_expired` / `lease_lost`, §8 "lease expired: at most one retry") so it does not
 * sit leaseless until the next restart. An orphaned executor that returns later still sends its
 * RELEASE, which the lock rejects (the leaseId is stale) and the runtime alert-audits.
 */
/** The states a lost lease moves a task on from (the task machine's LEASE_LOST); the others resume on their own. */
const HOLDING_STATES = TASK_STATES.filter((state) => taskStateTakes(state, 'LEASE_LOST'));
/** How soon a scan looks again at a claimable task its claim left to another transaction holding its rows. */
const SKIPPED_RECHECK_MS = 1_000;

export function createScheduler(options: SchedulerOptions): Scheduler {
  const { store, runtime, executor, owner } = options;
  const { maxConcurrent, ttlMs, heartbeatMs, safetyPollMs, by } = resolveSchedulerSettings(options);
  const clock: SchedulerClock = options.clock ?? (options.now ? { now: options.now, setTimer: systemClock.setTimer } : systemClock);
  const logger: SchedulerLogger = options.logger ?? { info: () => {}, warn: () => {}, error: () => {} };
  const locks = repoLockClient({ runtime, by });
  const { track, settled } = inflightSet();

  const workers = new Map<string, Worker>();
  const orphans = new Set<Worker>();
  // Repositories whose lock actor is stored but could not be hosted (restore failed, alert-audited
  // by the runtime): claiming there would fail forever, so they wait for an operator and a restart.
  const unavailableRepos = new Set<string>();
  let started = false;
  let stopped = false;
  let unsubscribe: (() => void) | null = null;
  let unlisten: (() => void) | null = null;
  let cancelWakeTimer: (() => void) | null = null;
  let wakeTimerAt: number | null = null;
  let cancelPoll: (() => void) | null = null;

  const wake = wakeLoop({
    scan: tick,
    canRun: () => started && !stopped,
    onError: (err) => logger.error({ err: errorMessage(err) }, 'scheduler scan failed'),
    track,
  });

  const isPaused = async () => (await store.get<ControlRecord>('control', GLOBAL_CONTROL_KEY))?.globalPaused === true;
  const isDisabled = async (repoKey: string) => (await store.get<RepositoryRecord>('repositories', repoKey))?.status === 'disabled';
  const leaseHeld = async (repoKey: string) => isLeaseHeld(await store.get<LeaseRecord>('leases', repoKey));
  const heldLeases = () => store.list<LeaseRecord>('leases', (r) => isLeaseHeld(r));
  /** The repository's lock actor is stored but could not be hosted (its restore failed, alert-audited by the runtime). */
  const lockUnavailable = async (repoKey: string) => {
    // Stored first, then live: on a shared store another node may create the lock between the two reads.
    if (!(await store.get('actors', lockActorId(repoKey)))) return false;
    if (await runtime.has(lockActorId(repoKey))) return false;
    logger.error({ repoKey }, 'repository lock is stored but not live; skipping the repository');
    return true;
  };

  async function tick(): Promise<void> {
    const now = clock.now();

    // Expired leases first, so their repositories (and a lost worker's slot) are free for this scan.
    for (const lease of expiredLeases(await heldLeases(), now)) {
      // One lease that cannot be ended (its lock actor failed) must not stop every repository's claims.
      await expireLease(lease, now).catch((err: unknown) => logger.error({ repoKey: lease.repoKey, err: errorMessage(err) }, 'expired lease could not be ended'));
    }

    // Several nodes: a task still in a lease-holding state after its lease ended (its holder died, or
    // stopped and could not say so; another node ended the lease and may not have moved the task on
    // yet) is moved on now, and its repository is busy until it has been. So a repository never has a
    // task claimed while another is still recorded as running there. (One node: restart recovery.)
    const stranded = new Set<string>();
    const holding = options.othersMayTakeOver ? (await Promise.all(HOLDING_STATES.map((state) => store.byIndex<TaskRecord>('tasks', 'state', state)))).flat() : [];
    for (const task of holding) {
      if ([...workers.values()].some((w) => w.taskId === task.taskId)) continue;
      const lease = await store.get<LeaseRecord>('leases', task.repoKey);
      if (isLeaseHeld(lease) && lease?.leaseId === task.leaseId) continue;
      stranded.add(task.repoKey);
      if (task.leaseId !== null) await failLeaseless(task.taskId, task.leaseId, 'lease_expired', false).catch((err: unknown) => logger.error({ taskId: task.taskId, err: errorMessage(err) }, 'stranded task not moved on'));
    }
    const owned = (await Promise.all(SCANNED_STATES.map((state) => store.byIndex<TaskRecord>('tasks', 'state', state)))).flat();
    const dead = new Set<string>();
    let recheckAt: number | null = null;
    const heldUntil = options.holdClaimsUntil?.(now) ?? null;
    // Global pause (§8): claim nothing, tasks stay queued; running ones finish normally.
    if (workers.size < maxConcurrent && !(await isPaused())) {
      // What pickClaims asks of the store, read first (it decides synchronously).
      const candidates = claimableUnderHold(owned, heldUntil);
      const leased = new Set<string>();
      const disabled = new Set<string>();
      await Promise.all(
        [...new Set(candidates.map((t) => t.repoKey))].map(async (repoKey) => {
          const [held, off] = await Promise.all([leaseHeld(repoKey), isDisabled(repoKey)]);
          if (held) leased.add(repoKey);
          if (off) disabled.add(repoKey);
        }),
      );
      const takenNow = (repoKey: string) => workers.has(repoKey) || leased.has(repoKey) || unavailableRepos.has(repoKey) || stranded.has(repoKey);
      // Repositories whose head waits a moment for the node it would rather run on (claim-preference.ts).
      const deferred = options.claimPreference ? await preferredNodes(options.claimPreference, candidates, pickClaims({ tasks: candidates, now, busy: takenNow, disabled: (r) => disabled.has(r), slots: candidates.length })) : null;
      if (deferred?.waitMs != null) recheckAt = now + deferred.waitMs;
      // Repositories whose head a claim transaction of this scan tried: taken, or left to another node.
      const tried = new Set<string>();
      const claim = (picks: readonly ClaimCandidate[]) => claimTogether({ runtime, picks, owner, by, ttlMs, now: () => clock.now(), stopped: () => stopped });
      const claimAlone = async (pick: ClaimCandidate) => {
        try {
          return await claim([pick]);
        } catch (err) {
          // Nothing of it was kept; a later scan tries it again, and the other picks go on meanwhile.
          logger.error({ taskId: pick.taskId, err: errorMessage(err) }, 'claim failed');
          dead.add(pick.taskId);
          return [];
        }
      };
      while (!stopped && workers.size < maxConcurrent) {
        const picks = pickClaims({
          tasks: candidates.filter((t) => !dead.has(t.taskId)),
          now,
          busy: (repoKey) => takenNow(repoKey) || tried.has(repoKey) || deferred?.repos.has(repoKey) === true,
          disabled: (repoKey) => disabled.has(repoKey),
          slots: maxConcurrent - workers.size,
        });
        if (picks.length === 0) break;
        // Only tasks with a live actor can be claimed (one whose restore failed would be retried forever),
        // and only where the repository's lock actor is live or not made yet. Asked of the picks only: a
        // long queue is not read twice at every scan.
        const live = await Promise.all(picks.map((p) => runtime.has(taskActorId(p.taskId))));
        picks.forEach((p, i) => !live[i] && dead.add(p.taskId));
        const lockless = await Promise.all(picks.map((p) => lockUnavailable(p.repoKey)));
        picks.forEach((p, i) => lockless[i] && unavailableRepos.add(p.repoKey));
        if (!live.every(Boolean) || lockless.some(Boolean)) continue;
        picks.forEach((p) => tried.add(p.repoKey));
        // One pick the transaction cannot move undoes the batch: then each is claimed alone, so it holds up no other.
        const claimed =
          picks.length === 1
            ? await claimAlone(picks[0]!)
            : await claim(picks).catch(async () => {
                const alone: Claimed[] = [];
                for (const pick of picks) alone.push(...(await claimAlone(pick)));
                return alone;
              });
        for (const { pick, lease } of claimed) startWorker(pick, lease);
        if (claimed.length < picks.length) recheckAt = Math.min(recheckAt ?? Infinity, now + SKIPPED_RECHECK_MS);
      }
    }

    armWakeTimer(nextWakeAt({ heldUntil, tasks: owned.filter((t) => !dead.has(t.taskId)), leases: await heldLeases(), now, recheckAt }), now);
  }

  /** Where each new head's task would rather run (its session's thread node, the node that accepted it), for the preference's decision. */
  async function preferredNodes(preference: ClaimPreference, candidates: readonly TaskRecord[], heads: readonly ClaimCandidate[]) {
    const taskOf = new Map(candidates.map((t) => [t.taskId, t]));
    const preferred = new Map<string, PreferredNodes>();
    for (const head of heads) {
      const task = taskOf.get(head.taskId);
      if (head.event !== 'CLAIM' || task === undefined) continue;
      preferred.set(head.taskId, { threadNode: (await store.get<SessionRecord>('sessions', task.sessionKey))?.threadNode, acceptedBy: task.acceptedBy });
    }
    return preference.defer(heads, preferred);
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

  /** A claim committed (claimTogether): the worker runs the task under its lease from here. */
  function startWorker(pick: ClaimCandidate, lease: HeldLease): void {
    const worker = newWorker(pick, lease);
    workers.set(pick.repoKey, worker);
    // The scan armed its wake before the lease existed: the lease's expiry is a time to look again too
    // (nextWakeAt's rule, for a lease the scan could not see).
    if (wakeTimerAt === null || lease.expiresAt < wakeTimerAt) armWakeTimer(lease.expiresAt, clock.now());
    startHeartbeat(worker);
    watchExpiry(worker);
    worker.done = runExecutor(worker, lease);
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
    worker.cancelWatch?.();
    await track(
      finish(worker, lease, failure).catch((err: unknown) => {
        logger.error({ taskId: worker.taskId, err: errorMessage(err) }, 'lease release after the executor failed');
      }),
    );
  }

  async function finish(worker: Worker, lease: HeldLease, failure: unknown): Promise<void> {
    try {
      // The executor's writes were fenced off: the lease ended under it (a pause, a cut-off store)
      // before this scheduler heard of it. That is a lost lease (one retry), not an executor's error.
      if (failure !== null && isLeaseRefusal(failure) && !worker.lost && !stopped) await leaseLost(worker, lease.leaseId, worker.taskId, 'lease_lost');
      else if (failure !== null) logger.error({ taskId: worker.taskId, err: errorMessage(failure) }, 'executor failed');
      if (!worker.lost && !stopped) {
        // The executor must leave the task out of preparing/running before it returns; one that
        // did not (a bug, or a throw) must not leave the task stuck holding a lease nobody renews.
        // After stop() aborted it, the task stays where it is: the next start's recovery moves it
        // to retry_wait (interrupted_by_restart) instead of failing it here.
        await failLeaseless(worker.taskId, lease.leaseId, failure !== null ? 'executor_error' : 'executor_left_task', true);
      }
      // For a lost lease this RELEASE names a stale leaseId: the lock rejects it and the runtime
      // alert-audits it, which is the record that the orphaned worker came back.
      const released = await locks.release(lease);
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

  /**
   * When several nodes share the store (options.othersMayTakeOver): a lease this node could not renew (the store does not
   * answer: a database outage, a node cut off from it) ends at its expiry on the other nodes'
   * clocks whether or not this node hears of it, and another node may run the task from then on.
   * So a heartbeat before its expiry, still unrenewed, the lease counts as lost here: the turn stops
   * before another can start. With one node (or without heartbeats) nobody else can run the task,
   * and a turn waits out an outage as it always did.
   */
  function watchExpiry(worker: Worker): void {
    const lease = worker.lease;
    if (!options.othersMayTakeOver || heartbeatMs <= 0 || stopped || worker.finished || worker.lost) return;
    worker.cancelWatch = clock.setTimer(() => {
      worker.cancelWatch = null;
      if (worker.finished || worker.lost || worker.lease !== lease) return;
      if (clock.now() < lease.expiresAt - heartbeatMs) return watchExpiry(worker);
      logger.warn({ taskId: worker.taskId, leaseId: lease.leaseId }, 'lease not renewed before its expiry: stopping the turn');
      void track(leaseLost(worker, lease.leaseId, worker.taskId, 'lease_expired').catch((err: unknown) => logger.error({ taskId: worker.taskId, err: errorMessage(err) }, 'lease loss not recorded')));
    }, Math.max(1, lease.expiresAt - heartbeatMs - clock.now()));
  }

  async function beat(worker: Worker): Promise<void> {
    const lease = worker.lease;
    if (worker.lost || worker.finished) return;
    const now = clock.now();
    const ok = await locks.heartbeat(lease, now, ttlMs);
    if (worker.lost || worker.finished) return;
    if (ok) {
      lease.expiresAt = renewedExpiry(lease.expiresAt, now, ttlMs);
      startHeartbeat(worker);
      options.onLeaseRenewed?.(worker.taskId);
      return;
    }
    await leaseLost(worker, lease.leaseId, worker.taskId, 'lease_lost');
  }

  async function expireLease(lease: LeaseRecord, now: number): Promise<void> {
    if (lease.leaseId === null) return;
    if (!(await locks.expire(lease.repoKey, now))) return; // renewed in between
    const worker = workers.get(lease.repoKey);
    await leaseLost(worker?.lease.leaseId === lease.leaseId ? worker : null, lease.leaseId, lease.taskId, 'lease_expired');
  }

  async function leaseLost(worker: Worker | null, leaseId: string, taskId: string | null, reason: string): Promise<void> {
    if (worker && !worker.lost) {
      worker.lost = true;
      worker.cancelHeartbeat?.();
      worker.cancelWatch?.();
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
   * Tells a task that the work under `leaseId` ended without moving it on: the lease was lost under it
   * (LEASE_LOST), or its worker returned or threw (STEP_FAILED, not retryable: nothing drives it any
   * more). What that means in the task's state is the machine's to say; a state that takes no such news
   * keeps the task where it is.
   */
  async function failLeaseless(taskId: string, leaseId: string, errorCode: string, workerEnded: boolean): Promise<void> {
    const actorId = taskActorId(taskId);
    const current = await runtime.stateOf(actorId);
    const why = current ? workUnder(current.state, (current.context as TaskContext).leaseId, leaseId) : null;
    if (!current || why === null) return;
    const event: TaskEvent = workerEnded ? { type: 'STEP_FAILED', errorCode, retryable: false } : { type: 'LEASE_LOST', errorCode, retryAt: clock.now() };
    // Decided on this node's copy of the task, which is older than the stored one when another node
    // took the task over meanwhile (this node cut off or paused past the lease): the event is kept only
    // if the stored task is still the one decided on — under this lease, or (a resumed step, which
    // records no lease) at the version read — or it would end the other node's run.
    const stillTheSame = async (tx: Tx) => {
      const stored = await tx.get<ActorRecord>('actors', actorId);
      const storedLease = (stored?.snapshot as { context?: Partial<TaskContext> } | undefined)?.context?.leaseId;
      const same = why === 'recorded' ? storedLease === leaseId : stored?.stateVersion === current.stateVersion;
      if (!stored || !same) throw new TaskMovedOn();
    };
    try {
      const sent = await runtime.send(actorId, event, { by, guard: stillTheSame, optional: true });
      if (sent.ok) logger.warn({ taskId, state: current.state, errorCode }, 'task left holding a lease; moving it on');
    } catch (error) {
      if (!(error instanceof TaskMovedOn)) throw error;
      logger.info({ taskId, leaseId }, 'the task runs under another lease now: left as it is');
    }
  }

  function onTransition(notice: TransitionNotice): void {
    if (wakesScheduler(notice)) void wake();
  }

  return {
    start() {
      if (started) return;
      started = true;
      stopped = false;
      unsubscribe = runtime.onTransition(onTransition);
      // Other nodes' transitions reach no runtime here: they are announced on the database (claimable-channel.ts).
      if (options.othersMayTakeOver)
        void store
          // This node's own announcements woke it already (onTransition).
          .listen(CLAIMABLE_CHANNEL, (from) => from !== owner && void wake())
          .then((stop) => (stopped ? stop() : (unlisten = stop)))
          .catch((err: unknown) => logger.warn({ err: errorMessage(err) }, 'other nodes\' claimable tasks are found by the safety poll only'));
      armPoll();
      void wake();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      unsubscribe?.();
      unlisten?.();
      cancelWakeTimer?.();
      cancelPoll?.();
      await settled();
      const current = [...workers.values()];
      for (const w of current) {
        w.cancelHeartbeat?.();
        w.cancelWatch?.();
        w.abort.abort(new Error('scheduler_stopping'));
      }
      // Executors must honour the signal; their leases are released as they return. Orphans (their
      // lease was lost, their signal already aborted) are waited for too, so nothing of theirs still
      // writes after stop() returns and the store closes.
      await Promise.all([...current, ...orphans].map((w) => w.done).filter((d): d is Promise<void> => d !== null));
      await settled();
    },
    wake,
    async recover(repos) {
      const only = repos;
      return recoverAfterRestart({
        store,
        runtime,
        owner,
        ...(only ? { repos: only } : {}),
        now: clock.now(),
        by,
        hasLiveWorker: (taskId) => [...workers.values()].some((w) => w.taskId === taskId),
        logger,
      });
    },
    writeDeadline(taskId) {
      const worker = [...workers.values()].find((w) => w.taskId === taskId && !w.lost && !w.finished);
      return worker ? worker.lease.expiresAt - heartbeatMs : undefined;
    },
    running() {
      return [...workers.values()]
        .filter((w) => w.done !== null)
        .map((w) => ({ repoKey: w.repoKey, taskId: w.taskId, leaseId: w.lease.leaseId, expiresAt: w.lease.expiresAt }));
    },
    settled,
  };
}

function newWorker(pick: ClaimCandidate, lease: HeldLease): Worker {
  return { repoKey: pick.repoKey, taskId: pick.taskId, lease, abort: new AbortController(), cancelHeartbeat: null, cancelWatch: null, lost: false, finished: false, done: null };
}

/** A lease-loss decision made on an outdated copy of the task: the stored task runs under another lease. */
class TaskMovedOn extends Error {
  constructor() {
    super('the task runs under another lease now');
  }
}
