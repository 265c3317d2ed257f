import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { isLeaseRefusal, type Store } from '../store/types.js';
import { leaseFence, type LeaseFence } from '../leases/lease-fence.js';
import type { RepositoryRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import type { TurnOutcome } from '../domain/turn-outcome.js';
import { sameRepoKey } from '../domain/repository-identity.js';
import type { HeldLease, TaskExecutor } from '../scheduler/types.js';
import { taskActorId } from '../tasks/task-actor.js';
import { taskStateHas, taskStatesWith, type TaskContext, type TaskEvent } from '../../machines/task-lifecycle.js';

/** What the executor needs from the workspace manager (src/workspace). */
export interface WorkspacePort {
  /** `current`: the repository's owner/name on Gitea now (after a rename or transfer), when known. */
  prepare(task: TaskRecord, repo: RepositoryRecord, signal: AbortSignal, current?: { owner: string; name: string }): Promise<
    | { ok: true; path: string; head: string; lastFetchAt: string }
    | { ok: false; code: string; retryable: boolean; message: string }
  >;
  /** Where the task's agent works (its resource's worktree); default: the repository's workspace path. */
  pathFor?(task: TaskRecord, repo: RepositoryRecord): string;
}

/** What the executor needs from change delivery (src/publish): publish, idempotently, what the turn left. */
export interface PublishPort {
  /** `fence`: checked in each write the publish makes for the task (src/leases/lease-fence.ts). */
  publish(taskId: string, options?: { signal?: AbortSignal; fence?: LeaseFence }): Promise<{ ok: true } | { ok: false; errorCode: string; message: string }>;
}

export type { TurnOutcome };

/** What the executor needs from the Codex session manager (src/sessions). */
export interface SessionPort {
  ensureThread(task: TaskRecord, cwd: string): Promise<{ threadId: string; resumed: boolean }>;
  runTurn(
    task: TaskRecord,
    options: { kind: 'normal' | 'reply_retry'; cwd: string; signal: AbortSignal; replyRetryPrompt?: string; fence?: LeaseFence },
  ): Promise<TurnOutcome>;
  interrupt(taskId: string): Promise<{ confirmed: boolean }>;
}

export type VerificationResult =
  | { result: 'confirmed'; commentId?: number }
  | { result: 'confirmed_via_fallback'; commentId?: number; mcpFailureReason?: string | null }
  | { result: 'failed'; errorCode?: string };

/** What the executor needs from reply verification (src/verification). */
export interface VerificationPort {
  verify(input: {
    task: TaskRecord;
    turn: TurnRecord;
    runReplyRetryTurn: () => Promise<{ ok: boolean }>;
    /** Checked in each write the verification makes for the task (its fallback post): rejects with LeaseLostError once the lease is gone. */
    fence?: LeaseFence;
  }): Promise<VerificationResult>;
  replyRetryPrompt(previousFinalMessage: string | null, marker: string): string;
  /** The retry turn's prompt after a question that did not land; without it, `replyRetryPrompt` of the question. */
  questionRetryPrompt?(question: string, marker: string): string;
}

export interface ExecutorOptions {
  store: Store;
  runtime: ActorRuntime;
  workspace: WorkspacePort;
  sessions: SessionPort;
  verification: VerificationPort;
  /** Change delivery; without it a turn goes straight to verification (nothing is published). */
  publisher?: PublishPort;
  /**
   * Whether the bot's comment carrying `turn`'s marker is on Gitea. Before a retry runs the
   * instruction again after an interrupted turn (a restart, a crash of the app-server), this tells
   * whether the agent had already answered: then the answer is verified instead of produced twice.
   */
  replyExists?: (task: TaskRecord, turn: TurnRecord) => Promise<boolean>;
  /**
   * The repository's owner/name on Gitea now, looked up by its id (it follows renames and transfers);
   * null when Gitea does not know it or cannot be asked (the record's owner/name are used then).
   */
  currentRepository?: (repo: RepositoryRecord) => Promise<{ owner: string; name: string } | null>;
  /** Delay before an execution retry (§8: at most one). */
  retryDelayMs?: number;
  /**
   * When a failed step's retry is due, if something knows better than `retryDelayMs` (a provider
   * rate limit's reset, src/usage/provider-hold.ts); null → the usual delay.
   */
  retryAtFor?: (errorCode: string) => number | null;
  now?: () => number;
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

/** Errors whose `errorCode` means the task cannot succeed by retrying (§8 MCP rows: fail, one receipt). */
const FATAL_PREPARE_CODES = new Set(['mcp_command_missing', 'mcp_start_failed', 'mcp_initialize_failed']);

/** States in which the executor holds the repository lease and has work to do (the machine's `holdsLease` tag). */
const ACTIVE: ReadonlySet<string> = new Set(taskStatesWith('holdsLease'));

/**
 * Runs one claimed task from whatever state it is in until it no longer needs the repository lease:
 * workspace → Codex thread → turn → reply verification (with its one reply-retry turn) → outcome.
 * Every step is a task event; the machine decides what is legal, the runtime makes it durable.
 */
export function createTaskExecutor(options: ExecutorOptions): TaskExecutor & {
  abort(taskId: string): void;
  /** The fence of this node's worker of the task while one runs it (its lease), else undefined. */
  fenceOf(taskId: string): LeaseFence | undefined;
} {
  const { store, runtime, workspace, sessions, verification, publisher } = options;
  /** After a normal turn: publish its changes first when change delivery is on. */
  const replied: TaskEvent = { type: 'TURN_REPLIED', publish: publisher !== undefined };
  const now = options.now ?? Date.now;
  const retryDelayMs = options.retryDelayMs ?? 30_000;
  const log = options.log ?? (() => undefined);
  const aborts = new Map<string, AbortController>();

  const task = async (taskId: string): Promise<TaskRecord> => {
    const t = await store.get<TaskRecord>('tasks', taskId);
    if (!t) throw new Error(`task ${taskId} not found`);
    return t;
  };

  /** The lease each running task's events are fenced by (src/leases/lease-fence.ts): a worker that lost it moves nothing. */
  const leases = new Map<string, HeldLease>();

  /** The check every write made for a running task passes: its lease is still the current one. */
  function fenceOf(taskId: string): { fence?: LeaseFence } {
    const lease = leases.get(taskId);
    return lease ? { fence: leaseFence(lease) } : {};
  }

  async function send(taskId: string, event: TaskEvent, how: { optional?: boolean } = {}): Promise<boolean> {
    const { fence } = fenceOf(taskId);
    const result = await runtime.send(taskActorId(taskId), event, { by: 'system:executor', ...(fence ? { guard: fence } : {}), ...how });
    if (!result.ok && how.optional !== true) log('task event rejected', { taskId, event: event.type, state: result.state });
    return result.ok;
  }

  /** When a failed step's retry is due: what knows better (a provider's rate-limit reset), else after the retry delay. */
  function retryAtOf(errorCode: string): number {
    return options.retryAtFor?.(errorCode) ?? now() + retryDelayMs;
  }

  /** A failed step: retry_wait (re-prepare after the retry delay) while a retry is left, else failed — the machine decides. */
  function failStep(taskId: string, type: 'PREPARE_FAILED' | 'TURN_FAILED', errorCode: string, retryable: boolean): Promise<boolean> {
    return send(taskId, { type, errorCode, retryable, retryAt: retryAtOf(errorCode), resumeAt: 'preparing' });
  }

  async function prepare(t: TaskRecord, signal: AbortSignal): Promise<void> {
    const repo = await store.get<RepositoryRecord>('repositories', t.repoKey);
    if (!repo) {
      await send(t.taskId, { type: 'FAIL', errorCode: 'repository_unknown' });
      return;
    }
    const current = await followRepository(repo);
    const ws = await workspace.prepare(t, repo, signal, current ?? undefined);
    if (!ws.ok) {
      await recordGitError(t.taskId, ws.code, ws.message);
      if (ws.code === 'workspace_dirty') await send(t.taskId, { type: 'WORKSPACE_BLOCKED', errorCode: ws.code });
      else await failStep(t.taskId, 'PREPARE_FAILED', ws.code, ws.retryable);
      return;
    }
    await store.transact(async (tx) => {
      const current = await tx.get<RepositoryRecord>('repositories', repo.repoKey);
      if (current) await tx.put('repositories', repo.repoKey, { ...current, lastFetchAt: ws.lastFetchAt }, { expectVersion: current.version });
    });
    try {
      await sessions.ensureThread(await task(t.taskId), ws.path);
    } catch (err) {
      const code = (err as { errorCode?: string }).errorCode ?? 'app_server_unavailable';
      log('thread start failed', { taskId: t.taskId, errorCode: code, error: (err as Error).message });
      if (FATAL_PREPARE_CODES.has(code)) await send(t.taskId, { type: 'FAIL', errorCode: code });
      else
        await failStep(t.taskId, 'PREPARE_FAILED', code, true);
      return;
    }
    await send(t.taskId, { type: 'WORKSPACE_READY' });
  }

  /** Renames and transfers on Gitea are followed: the record keeps its key and workspace, its clone URL moves. */
  async function followRepository(repo: RepositoryRecord): Promise<{ owner: string; name: string } | null> {
    if (!options.currentRepository) return null;
    const current = await options.currentRepository(repo).catch(() => null);
    if (current === null) return null;
    const fullName = `${current.owner}/${current.name}`;
    // Gitea's names compare case-insensitively: another letter case is the same place, not a move.
    if (!sameRepoKey(repo.currentFullName ?? `${repo.owner}/${repo.name}`, fullName)) {
      log('repository moved on Gitea', { repoKey: repo.repoKey, to: fullName });
      await store
        .transact(async (tx) => {
          const now = await tx.get<RepositoryRecord>('repositories', repo.repoKey);
          if (!now) return;
          await tx.put('repositories', repo.repoKey, { ...now, currentFullName: fullName }, { expectVersion: now.version });
          await tx.appendAudit({ action: 'repository.moved', actor: 'service:executor', metadata: { repoKey: repo.repoKey, from: `${repo.owner}/${repo.name}`, to: fullName } });
        })
        .catch(() => undefined);
    }
    return current;
  }

  /**
   * The last git error is kept on the task (redacted by the workspace manager, bounded here), logged
   * and audited, so a failing clone is visible in the task detail instead of only as an error code.
   */
  async function recordGitError(taskId: string, code: string, message: string): Promise<void> {
    const summary = message.replace(/\s+/g, ' ').trim().slice(0, 500);
    log('workspace preparation failed', { taskId, errorCode: code, error: summary });
    await store
      .transact(async (tx) => {
        const current = await tx.get<TaskRecord>('tasks', taskId);
        if (current) await tx.put('tasks', taskId, { ...current, lastGitError: { code, message: summary, at: new Date(now()).toISOString() } });
        await tx.appendAudit({ action: 'workspace.failed', actor: 'service:executor', taskId, errorCode: code, metadata: { message: summary } });
      })
      .catch(() => undefined);
  }

  async function workspacePathOf(t: TaskRecord): Promise<string> {
    const repo = await store.get<RepositoryRecord>('repositories', t.repoKey);
    if (!repo) throw new Error(`repository ${t.repoKey} not found`);
    return workspace.pathFor ? workspace.pathFor(t, repo) : repo.workspacePath;
  }

  /**
   * Ends an abort once the work in flight has stopped. `turn`: how the interrupted turn ended, when
   * one was running — interrupted (Codex confirmed), or given up on (`abort_timeout`: the session
   * manager has ended the app-server's processes before returning); otherwise any turn of the task
   * is interrupted here (none runs when the stop came during preparing, publishing or verifying).
   */
  async function finishAbort(taskId: string, turn?: TurnOutcome): Promise<void> {
    const gaveUp = turn?.kind === 'failed' && turn.errorCode === 'abort_timeout';
    const confirmed = !gaveUp && (turn?.kind === 'interrupted' || (await sessions.interrupt(taskId).catch(() => ({ confirmed: false }))).confirmed);
    await send(taskId, { type: confirmed ? 'ABORT_CONFIRMED' : 'ABORT_TIMEOUT' });
  }

  async function runNormalTurn(t: TaskRecord, signal: AbortSignal): Promise<void> {
    const prior = (await store.byIndex<TurnRecord>('turns', 'taskId', t.taskId)).filter((turn) => turn.kind === 'normal').at(-1);
    // The prior turn answered the current input unless a follow-up (the user's reply after
    // waiting_user) came after it. Whether it finished or not: a restart can land between the turn's
    // end and the task's TURN_REPLIED, so "completed" alone does not mean the task moved on.
    const followUp = t.followUps?.at(-1);
    const priorIsForThisInput = prior !== undefined && (!followUp || Date.parse(followUp.at) < Date.parse(prior.startedAt));
    // The prior turn asked the user something and the task never got to wait (a restart during the
    // question's retry turn): verify that question again (idempotent by marker), never re-ask it.
    if (prior && priorIsForThisInput && isQuestion(prior)) {
      await send(t.taskId, { type: 'TURN_WAITING_USER' });
      return;
    }
    // Interrupted during verification (e.g. a restart mid reply-retry turn): the agent already
    // answered once; go back to verification instead of running the whole instruction again.
    const liveVerifier = (await store.byIndex<{ kind: string; status: string }>('actors', 'taskId', t.taskId)).some((a) => a.kind === 'verifier' && a.status === 'active');
    if (liveVerifier) {
      await send(t.taskId, { type: 'TURN_REPLIED', publish: false });
      return;
    }
    if (prior && priorIsForThisInput && options.replyExists) {
      // Unknown (Gitea did not answer) counts as "maybe answered": verification decides, and it
      // never writes on an unknown result — a second answer is the outcome users hate most.
      const answered = await options.replyExists(t, prior).catch(() => true);
      if (answered) {
        log('answer of an interrupted turn found; verifying it instead of running the turn again', { taskId: t.taskId, turnKey: prior.turnKey });
        // Its changes are still in the worktree: publish them first.
        await send(t.taskId, replied);
        return;
      }
    }
    const cwd = await workspacePathOf(t);
    // After an app-server restart or a retry, the thread must be resumed with its MCP config again.
    await sessions.ensureThread(t, cwd);
    const outcome = await sessions.runTurn(await task(t.taskId), { kind: 'normal', cwd, signal, ...fenceOf(t.taskId) });
    if (taskStateHas((await task(t.taskId)).state, 'stopping')) return finishAbort(t.taskId, outcome);
    switch (outcome.kind) {
      case 'replied':
      case 'no_comment':
        // A turn without a comment call is a missing reply: verification decides (retry, then REST).
        await send(t.taskId, replied);
        return;
      case 'waiting_user':
        // The question must be on Gitea before the task waits on it, like an answer: the
        // machine verifies it first (verifying_reply, asking) and waits only once it is confirmed.
        await send(t.taskId, { type: 'TURN_WAITING_USER' });
        return;
      case 'failed':
        await failStep(t.taskId, 'TURN_FAILED', outcome.errorCode, outcome.retryable);
        return;
      case 'interrupted':
        await failStep(t.taskId, 'TURN_FAILED', 'turn_interrupted', true);
        return;
    }
  }

  /** A turn that ended asking the user something (session-manager.ts records its question). */
  function isQuestion(turn: TurnRecord): boolean {
    return typeof turn.question === 'string';
  }

  /**
   * Resolves with null as soon as a stop moves the task out of `state` (the verifier may go on
   * reading Gitea, but it posts nothing for a stopped task: post-fallback.ts). A lost lease or a
   * stopping scheduler (the task still in `state`) waits for the verdict.
   */
  function stoppedOutOf(taskId: string, state: string, signal: AbortSignal): Promise<null> {
    return new Promise<null>((resolve) => {
      // The listener stays synchronous: the task is read, and the read's answer settles the race
      // (a read that fails leaves it to the verdict).
      const onStop = () => {
        void task(taskId).then(
          (t) => {
            if (t.state !== state) resolve(null);
          },
          () => undefined,
        );
      };
      if (signal.aborted) onStop();
      else signal.addEventListener('abort', onStop, { once: true });
    });
  }

  async function verify(t: TaskRecord, lease: HeldLease, signal: AbortSignal): Promise<void> {
    const turn = await latestTurn(t.taskId);
    if (!turn) {
      await send(t.taskId, { type: 'REPLY_FAILED', errorCode: 'turn_record_missing' });
      return;
    }
    // A question (the machine's `asking`) is re-posted by its own retry prompt, and its retry
    // turn ends asking again; an answer's by the answer's.
    const question = await askingTurnOf(t.taskId);
    // A stop during verification does not wait for the verifier's deadlines: the task is stopped
    // now. The verifier may go on reading Gitea, but it posts nothing for a stopped task
    // (post-fallback.ts), and its verdict then finds the task moved on. A lost lease or a stopping
    // scheduler (the task still verifying) waits for the verdict, as before.
    const stopped = stoppedOutOf(t.taskId, t.state, signal);
    const retryPrompt = question
      ? questionRetryPromptOf(question)
      : verification.replyRetryPrompt(turn.finalMessage, turn.marker);
    const verdict = verification.verify({
      task: t,
      turn,
      ...fenceOf(t.taskId),
      runReplyRetryTurn: async () => {
        // §5.4.3: one reply_retry turn, through retry_wait → running on the same lease.
        if (!(await send(t.taskId, { type: 'REPLY_MISSING', retryAt: now() }))) return { ok: false };
        if (!(await send(t.taskId, { type: 'RETRY_DUE', leaseId: lease.leaseId }))) return { ok: false };
        const cwd = await workspacePathOf(t);
        let ok = false;
        try {
          await sessions.ensureThread(await task(t.taskId), cwd);
          const outcome = await sessions.runTurn(await task(t.taskId), {
            kind: 'reply_retry',
            cwd,
            signal,
            replyRetryPrompt: retryPrompt,
            ...fenceOf(t.taskId),
          });
          ok = outcome.kind === 'replied' || (question !== null && outcome.kind === 'waiting_user');
        } catch (err) {
          log('reply retry turn failed', { taskId: t.taskId, error: (err as Error).message });
        }
        // Whatever the retry turn did, the next step is to look on Gitea again (then REST fallback).
        await send(t.taskId, { type: 'TURN_REPLIED', publish: false });
        return { ok };
      },
    });
    verdict.catch(() => undefined);
    const result = await Promise.race([verdict, stopped]);
    if (result === null) return;
    if (result.result === 'confirmed') await send(t.taskId, { type: 'REPLY_CONFIRMED' });
    else if (result.result === 'confirmed_via_fallback')
      await send(t.taskId, { type: 'REPLY_CONFIRMED_VIA_FALLBACK', mcpFailureReason: result.mcpFailureReason ?? 'mcp_reply_missing' });
    else await send(t.taskId, { type: 'REPLY_FAILED', errorCode: result.errorCode ?? 'reply_unconfirmed' });
  }

  async function publish(t: TaskRecord, signal: AbortSignal): Promise<void> {
    if (!publisher) {
      await send(t.taskId, { type: 'PUBLISHED' });
      return;
    }
    const result = await publisher.publish(t.taskId, { signal, ...fenceOf(t.taskId) });
    if (result.ok) await send(t.taskId, { type: 'PUBLISHED' });
    else await send(t.taskId, { type: 'PUBLISH_FAILED', errorCode: result.errorCode });
  }

  /** The turn whose question is being verified when the task machine says it is asking, else null. */
  async function askingTurnOf(taskId: string): Promise<TurnRecord | null> {
    const context = (await runtime.stateOf(taskActorId(taskId)))?.context as TaskContext | undefined;
    if (context?.asking !== true) return null;
    const asked = (await store.byIndex<TurnRecord>('turns', 'taskId', taskId)).filter((turn) => turn.kind === 'normal').at(-1);
    return asked ?? null;
  }

  function questionRetryPromptOf(asked: TurnRecord): string {
    const question = typeof asked.question === 'string' && asked.question.trim() !== '' ? asked.question : (asked.finalMessage ?? '');
    return verification.questionRetryPrompt
      ? verification.questionRetryPrompt(question, asked.marker)
      : verification.replyRetryPrompt(question, asked.marker);
  }

  async function latestTurn(taskId: string): Promise<TurnRecord | undefined> {
    const turns = await store.byIndex<TurnRecord>('turns', 'taskId', taskId);
    return turns.at(-1);
  }

  return {
    fenceOf: (taskId) => fenceOf(taskId).fence,
    abort(taskId: string) {
      aborts.get(taskId)?.abort();
      void sessions.interrupt(taskId).catch(() => undefined);
    },
    async run(taskId: string, lease: HeldLease, signal: AbortSignal): Promise<void> {
      const controller = new AbortController();
      aborts.set(taskId, controller);
      leases.set(taskId, lease);
      const onAbort = () => controller.abort(signal.reason);
      // An 'abort' listener never fires for a signal that is already aborted (the lease was lost or
      // the scheduler stopped before this run began): such a run must not start any step.
      if (signal.aborted) controller.abort(signal.reason);
      else signal.addEventListener('abort', onAbort);
      try {
        for (let step = 0; step < 20; step++) {
          const t = await task(taskId);
          if (!ACTIVE.has(t.state)) return;
          // A stop aborts the step in flight (controller) and then lets the abort finish here; a lost
          // lease or a stopping scheduler (signal) ends the run at once.
          if (signal.aborted || (controller.signal.aborted && !taskStateHas(t.state, 'stopping'))) return;
          log('executor step', { taskId, state: t.state });
          if (t.state === 'preparing') await prepare(t, controller.signal);
          else if (t.state === 'running') await runNormalTurn(t, controller.signal);
          else if (t.state === 'publishing') await publish(t, controller.signal);
          else if (t.state === 'verifying_reply') await verify(t, lease, controller.signal);
          else if (t.state === 'aborting') await finishAbort(taskId);
        }
        throw new Error(`task ${taskId} did not settle`);
      } catch (err) {
        log('executor error', { taskId, error: (err as Error).message });
        // The lease is gone: whatever this run would record now is not its to record (the scheduler
        // hears of it and moves the task on, or another worker already has).
        if (isLeaseRefusal(err)) throw err;
        // What a failed step means in the task's state is the machine's to say; a stopping task takes no
        // such news: its work (stopping the rest) is ended here.
        const taken = await send(taskId, { type: 'STEP_FAILED', errorCode: 'executor_error', retryable: true, retryAt: retryAtOf('executor_error') }, { optional: true });
        const state = (await store.get<TaskRecord>('tasks', taskId))?.state;
        if (!taken && taskStateHas(state, 'stopping')) await finishAbort(taskId);
      } finally {
        signal.removeEventListener('abort', onAbort);
        aborts.delete(taskId);
        leases.delete(taskId);
      }
    },
  };
}
