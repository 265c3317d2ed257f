import { fromPromise, type AnyActorLogic } from 'xstate';
import { hostingEffect } from '../runtime/actor-system.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { isLeaseRefusal } from '../store/types.js';
import { leaseFence, type LeaseFence } from '../leases/lease-fence.js';
import type { RepositoryRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import { sameRepoKey } from '../domain/repository-identity.js';
import type { HeldLease, TaskExecutor } from '../scheduler/types.js';
import { TASK_KIND, taskActorId } from '../tasks/task-actor.js';
import { taskStateHas, type TaskContext, type TaskEffect, type TaskEffectInput, type TaskEvent, type taskMachine } from '../../machines/task-lifecycle.js';
import type { ExecutorOptions, TurnOutcome } from './ports.js';
import { TaskDrives, type Drive } from './task-drives.js';

export type { ExecutorOptions, PublishPort, SessionPort, TurnOutcome, VerificationPort, VerificationResult, WorkspacePort } from './ports.js';

/** Errors whose `errorCode` means the task cannot succeed by retrying (§8 MCP rows: fail, one receipt). */
const FATAL_PREPARE_CODES = new Set(['mcp_command_missing', 'mcp_start_failed', 'mcp_initialize_failed']);

/** One run of a state's step: its task, the drive (lease) it runs under, and what stops it. */
interface Step {
  taskId: string;
  drive: Drive;
  /** The check each of its writes passes: the drive's lease is still the current one. */
  fence: LeaseFence;
  /** Aborted when the state is left (a stop, or the step's own outcome), the lease is lost or the scheduler stops. */
  signal: AbortSignal;
  /** Aborted when the state is left. */
  left: AbortSignal;
}

/** What a state's effect does once per drive: `previous`, the step this node ran before it for the task. */
type StepWork = (t: TaskRecord, step: Step, previous: Promise<void> | undefined) => Promise<void>;

/** The step a task's effect runs or ran last on this node, and the state it was for. */
interface RunningStep {
  state: TaskEffectInput['state'];
  done: Promise<void>;
}

/** What the verifier's `retryTurn` asks the next `runTurn` effect for, through the runner the task's verification offered: the one reply-retry turn (§5.4.3). */
interface RetryTurnRequest {
  prompt: string;
  /** The turn re-posts a question: ending asking again also counts as done. */
  question: boolean;
  settle(result: { ok: boolean }): void;
}

/**
 * The task's work, as the effects its states invoke (machines/task-lifecycle.ts TASK_EFFECTS), given
 * to the task machine with `provide()` here: preparing → the workspace and the Codex thread; running →
 * the turn; publishing → the change; verifying_reply → the reply verifier, which it offers how to run
 * its one retry turn (a `running` again, asked for with REPLY_MISSING and RETRY_DUE; the verifier's
 * own retryTurn effect asks); aborting → stopping the turn. Each
 * reports its outcome as a task event; which state comes next, and so which effect, is the machine's.
 *
 * `run` is the scheduler's worker: it makes this node the one that drives the task under its lease
 * (src/executor/task-drives.ts) until the task no longer holds it.
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
  const drives = new TaskDrives();
  /** The turn each driven task ran last under its lease, for the stop that may have interrupted it. */
  const lastTurns = new Map<string, Promise<TurnOutcome>>();
  /** The step each driven task's effect runs or ran last: a stop lets it end before the task is stopped. */
  const steps = new Map<string, RunningStep>();
  const retryTurns = new Map<string, RetryTurnRequest>();

  const task = async (taskId: string): Promise<TaskRecord> => {
    const t = await store.get<TaskRecord>('tasks', taskId);
    if (!t) throw new Error(`task ${taskId} not found`);
    return t;
  };

  /**
   * A step's event for its task, checked against the lease the step was started under (the drive's,
   * even once lost: an outcome of work whose lease ended is refused, never kept).
   */
  async function send(step: Step, event: TaskEvent, how: { optional?: boolean } = {}): Promise<boolean> {
    const taskId = step.taskId;
    const result = await runtime.send(taskActorId(taskId), event, { by: 'system:executor', guard: step.fence, ...how });
    if (!result.ok && how.optional !== true) log('task event rejected', { taskId, event: event.type, state: result.state });
    return result.ok;
  }

  /** When a failed step's retry is due: what knows better (a provider's rate-limit reset), else after the retry delay. */
  function retryAtOf(errorCode: string): number {
    return options.retryAtFor?.(errorCode) ?? now() + retryDelayMs;
  }

  /** A failed step: retry_wait (re-prepare after the retry delay) while a retry is left, else failed — the machine decides. */
  function failStep(step: Step, type: 'PREPARE_FAILED' | 'TURN_FAILED', errorCode: string, retryable: boolean): Promise<boolean> {
    return send(step, { type, errorCode, retryable, retryAt: retryAtOf(errorCode), resumeAt: 'preparing' });
  }

  async function prepare(t: TaskRecord, step: Step): Promise<void> {
    const { signal, left } = step;
    const repo = await store.get<RepositoryRecord>('repositories', t.repoKey);
    if (!repo) {
      await send(step, { type: 'FAIL', errorCode: 'repository_unknown' });
      return;
    }
    const current = await followRepository(repo);
    const ws = await workspace.prepare(t, repo, signal, current ?? undefined);
    // Stopped: the stop's own effect ends the task once this step has ended.
    if (left.aborted) return;
    if (!ws.ok) {
      await recordGitError(t.taskId, ws.code, ws.message);
      if (ws.code === 'workspace_dirty') await send(step, { type: 'WORKSPACE_BLOCKED', errorCode: ws.code });
      else await failStep(step, 'PREPARE_FAILED', ws.code, ws.retryable);
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
      if (FATAL_PREPARE_CODES.has(code)) await send(step, { type: 'FAIL', errorCode: code });
      else await failStep(step, 'PREPARE_FAILED', code, true);
      return;
    }
    await send(step, { type: 'WORKSPACE_READY' });
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
  async function finishAbort(step: Step, turn?: TurnOutcome): Promise<void> {
    const taskId = step.taskId;
    const gaveUp = turn?.kind === 'failed' && turn.errorCode === 'abort_timeout';
    const confirmed = !gaveUp && (turn?.kind === 'interrupted' || (await sessions.interrupt(taskId).catch(() => ({ confirmed: false }))).confirmed);
    await send(step, { type: confirmed ? 'ABORT_CONFIRMED' : 'ABORT_TIMEOUT' });
  }

  /**
   * The stop of a task (aborting): the step in flight was told to stop (its state was left); once it
   * has ended (a turn interrupted, a clone killed, a push not started), the stop is finished.
   */
  async function stopWork(t: TaskRecord, step: Step, previous: Promise<void> | undefined): Promise<void> {
    await previous?.catch(() => undefined);
    const turn = lastTurns.get(t.taskId);
    lastTurns.delete(t.taskId);
    await finishAbort(step, turn ? await turn.catch(() => undefined) : undefined);
  }

  /** Runs a turn, kept as the task's last one for a stop that interrupts it. */
  function turn(t: TaskRecord, run: Promise<TurnOutcome>): Promise<TurnOutcome> {
    lastTurns.set(t.taskId, run);
    return run;
  }

  async function runTurn(t: TaskRecord, step: Step): Promise<void> {
    const { signal, left } = step;
    const retry = retryTurns.get(t.taskId);
    if (retry) {
      retryTurns.delete(t.taskId);
      return runReplyRetryTurn(t, retry, step);
    }
    const prior = (await store.byIndex<TurnRecord>('turns', 'taskId', t.taskId)).filter((turn) => turn.kind === 'normal').at(-1);
    // The prior turn answered the current input unless a follow-up (the user's reply after
    // waiting_user) came after it. Whether it finished or not: a restart can land between the turn's
    // end and the task's TURN_REPLIED, so "completed" alone does not mean the task moved on.
    const followUp = t.followUps?.at(-1);
    const priorIsForThisInput = prior !== undefined && (!followUp || Date.parse(followUp.at) < Date.parse(prior.startedAt));
    // The prior turn asked the user something and the task never got to wait (a restart during the
    // question's retry turn): verify that question again (idempotent by marker), never re-ask it.
    if (prior && priorIsForThisInput && isQuestion(prior)) {
      await send(step, { type: 'TURN_WAITING_USER' });
      return;
    }
    // Interrupted during verification (e.g. a restart mid reply-retry turn): the agent already
    // answered once; go back to verification instead of running the whole instruction again.
    const liveVerifier = (await store.byIndex<{ kind: string; status: string }>('actors', 'taskId', t.taskId)).some((a) => a.kind === 'verifier' && a.status === 'active');
    if (liveVerifier) {
      await send(step, { type: 'TURN_REPLIED', publish: false });
      return;
    }
    if (prior && priorIsForThisInput && options.replyExists) {
      // Unknown (Gitea did not answer) counts as "maybe answered": verification decides, and it
      // never writes on an unknown result — a second answer is the outcome users hate most.
      const answered = await options.replyExists(t, prior).catch(() => true);
      if (answered) {
        log('answer of an interrupted turn found; verifying it instead of running the turn again', { taskId: t.taskId, turnKey: prior.turnKey });
        // Its changes are still in the worktree: publish them first.
        await send(step, replied);
        return;
      }
    }
    const cwd = await workspacePathOf(t);
    // After an app-server restart or a retry, the thread must be resumed with its MCP config again.
    await sessions.ensureThread(t, cwd);
    const outcome = await turn(t, sessions.runTurn(await task(t.taskId), { kind: 'normal', cwd, signal, fence: step.fence }));
    // Stopped: the stop's effect takes the outcome. (A lost lease still reports it: the fence decides.)
    if (left.aborted) return;
    lastTurns.delete(t.taskId);
    switch (outcome.kind) {
      case 'replied':
      case 'no_comment':
        // A turn without a comment call is a missing reply: verification decides (retry, then REST).
        await send(step, replied);
        return;
      case 'waiting_user':
        // The question must be on Gitea before the task waits on it, like an answer: the
        // machine verifies it first (verifying_reply, asking) and waits only once it is confirmed.
        await send(step, { type: 'TURN_WAITING_USER' });
        return;
      case 'failed':
        await failStep(step, 'TURN_FAILED', outcome.errorCode, outcome.retryable);
        return;
      case 'interrupted':
        await failStep(step, 'TURN_FAILED', 'turn_interrupted', true);
        return;
    }
  }

  /** The one reply_retry turn the verifier asked for; whatever it did, the task goes back to verification. */
  async function runReplyRetryTurn(t: TaskRecord, request: RetryTurnRequest, step: Step): Promise<void> {
    const { signal, left } = step;
    let ok = false;
    try {
      const cwd = await workspacePathOf(t);
      await sessions.ensureThread(await task(t.taskId), cwd);
      const outcome = await turn(t, sessions.runTurn(await task(t.taskId), { kind: 'reply_retry', cwd, signal, replyRetryPrompt: request.prompt, fence: step.fence }));
      ok = outcome.kind === 'replied' || (request.question && outcome.kind === 'waiting_user');
    } catch (err) {
      log('reply retry turn failed', { taskId: t.taskId, error: (err as Error).message });
    }
    try {
      // Whatever the retry turn did, the next step is to look on Gitea again (then REST fallback).
      if (!left.aborted) await send(step, { type: 'TURN_REPLIED', publish: false });
    } finally {
      request.settle({ ok });
    }
  }

  /** A turn that ended asking the user something (session-manager.ts records its question). */
  function isQuestion(turn: TurnRecord): boolean {
    return typeof turn.question === 'string';
  }

  async function verify(t: TaskRecord, step: Step): Promise<void> {
    const { signal, drive } = step;
    const turn = await latestTurn(t.taskId);
    if (!turn) {
      await send(step, { type: 'REPLY_FAILED', errorCode: 'turn_record_missing' });
      return;
    }
    // A question (the machine's `asking`) is re-posted by its own retry prompt, and its retry
    // turn ends asking again; an answer's by the answer's.
    const question = await askingTurnOf(t.taskId);
    const prompt = question ? questionRetryPromptOf(question) : verification.replyRetryPrompt(turn.finalMessage, turn.marker);
    // A stop (the state left) or a lost lease does not wait for the verifier's deadlines. The verifier
    // may go on reading Gitea, but it posts nothing for a stopped task (post-fallback.ts), and its
    // verdict is taken by whoever verifies the task next (it follows the same verifier).
    const stopped = new Promise<null>((resolve) => (signal.aborted ? resolve(null) : signal.addEventListener('abort', () => resolve(null), { once: true })));
    const verdict = verification.verify({
      task: t,
      turn,
      fence: step.fence,
      runReplyRetryTurn: () => requestRetryTurn(t.taskId, drive, { prompt, question: question !== null }),
    });
    verdict.catch(() => undefined);
    const result = await Promise.race([verdict, stopped]);
    if (result === null) return;
    if (result.result === 'confirmed') await send(step, { type: 'REPLY_CONFIRMED' });
    else if (result.result === 'confirmed_via_fallback')
      await send(step, { type: 'REPLY_CONFIRMED_VIA_FALLBACK', mcpFailureReason: result.mcpFailureReason ?? 'mcp_reply_missing' });
    else await send(step, { type: 'REPLY_FAILED', errorCode: result.errorCode ?? 'reply_unconfirmed' });
  }

  /**
   * §5.4.3: the verifier found no reply and asks for its one reply_retry turn: the task goes through
   * retry_wait → running on the same lease, in one transaction (never seen between them, so the lease
   * is not let go there), and its `runTurn` effect runs the retry turn. Resolves with how that turn went.
   */
  async function requestRetryTurn(taskId: string, drive: Drive, turn: { prompt: string; question: boolean }): Promise<{ ok: boolean }> {
    const done = new Promise<{ ok: boolean }>((settle) => retryTurns.set(taskId, { ...turn, settle }));
    const by = 'system:executor';
    try {
      const moved = await runtime.transact(async ({ tx, send: sendInTx }) => {
        await leaseFence(drive.lease)(tx);
        const missing: TaskEvent = { type: 'REPLY_MISSING', retryAt: now() };
        if (!(await sendInTx(taskActorId(taskId), missing, { by })).ok) return false;
        const retryDue: TaskEvent = { type: 'RETRY_DUE', leaseId: drive.lease.leaseId };
        const due = await sendInTx(taskActorId(taskId), retryDue, { by });
        if (!due.ok) throw new Error(`task ${taskId} refused RETRY_DUE in ${String(due.state)}`);
        return true;
      });
      if (!moved) {
        retryTurns.delete(taskId);
        return { ok: false };
      }
    } catch (error) {
      retryTurns.delete(taskId);
      throw error;
    }
    // Hosted here in `running` (the transaction's commit replaced a live copy; none was live: now): its effect runs the turn.
    await runtime.refresh(taskActorId(taskId));
    return done;
  }

  async function publish(t: TaskRecord, step: Step): Promise<void> {
    const { signal } = step;
    if (!publisher) {
      await send(step, { type: 'PUBLISHED' });
      return;
    }
    const result = await publisher.publish(t.taskId, { signal, fence: step.fence });
    if (result.ok) await send(step, { type: 'PUBLISHED' });
    else await send(step, { type: 'PUBLISH_FAILED', errorCode: result.errorCode });
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

  /**
   * A step that failed without an outcome of its own (it threw): what that means in the task's state is
   * the machine's to say (STEP_FAILED). A write the lease no longer allowed ends the worker instead (the
   * scheduler hears of the lost lease). A stopping task takes no such news: its stop is finished here.
   */
  async function stepThrew(step: Step, err: unknown): Promise<void> {
    log('executor error', { taskId: step.taskId, error: (err as Error).message });
    if (isLeaseRefusal(err)) return step.drive.fail(err);
    if (step.drive.signal.aborted) return;
    try {
      const taken = await send(step, { type: 'STEP_FAILED', errorCode: 'executor_error', retryable: true, retryAt: retryAtOf('executor_error') }, { optional: true });
      if (!taken && taskStateHas((await store.get<TaskRecord>('tasks', step.taskId))?.state, 'stopping')) await finishAbort(step);
    } catch (error) {
      step.drive.fail(error);
    }
  }

  /**
   * One run of a state's step under one drive: once the transition that started the effect is durable
   * (so the stored task is read at that state or later), after the step of the same state that a copy
   * hosted here before still runs (never two at once), and only if the stored task is still in the
   * state (a copy another node moved on does nothing). It never rejects.
   */
  async function runStep(input: TaskEffectInput, step: Step, work: StepWork, previous: RunningStep | undefined): Promise<void> {
    try {
      await runtime.committed(taskActorId(input.taskId));
      if (previous?.state === input.state) await previous.done;
      if (step.signal.aborted) return;
      const t = await task(input.taskId);
      if (t.state === input.state) await work(t, step, previous?.done);
    } catch (err) {
      await stepThrew(step, err);
    }
  }

  /**
   * The effect a state invokes. It waits until this node drives the task and then runs its step; a drive
   * that ends while the state stays (a lease lost in publishing or verifying, which resume on their own)
   * runs it again under the next one. It returns only once its state is left: an effect that completed
   * would change the task's snapshot (its child gone) without a transition.
   */
  function effect(work: StepWork) {
    return fromPromise<void, TaskEffectInput>(async ({ input, signal: left }) => {
      const { taskId } = input;
      for (let drive = await drives.when(taskId, left); drive !== null; drive = await nextDrive(taskId, drive, left)) {
        const step: Step = { taskId, drive, fence: leaseFence(drive.lease), signal: AbortSignal.any([left, drive.signal]), left };
        const previous = steps.get(taskId);
        const done = runStep(input, step, work, previous);
        steps.set(taskId, { state: input.state, done });
        await done;
      }
    });
  }

  /** After a step: null once its state is left; the next drive if this one ends first. */
  async function nextDrive(taskId: string, drive: Drive, left: AbortSignal): Promise<Drive | null> {
    await new Promise<void>((resolve) => {
      if (left.aborted || drive.signal.aborted) return resolve();
      const done = () => {
        left.removeEventListener('abort', done);
        drive.signal.removeEventListener('abort', done);
        resolve();
      };
      left.addEventListener('abort', done, { once: true });
      drive.signal.addEventListener('abort', done, { once: true });
    });
    return left.aborted ? null : drives.when(taskId, left);
  }

  const effects: Record<TaskEffect, AnyActorLogic> = {
    prepareWorkspace: effect(prepare),
    runTurn: effect(runTurn),
    publishChanges: effect(publish),
    // The task's reply verifier is spawned under its verification (ActorKind.hostedUnder).
    verifyReply: hostingEffect(effect(verify)),
    stopWork: effect(stopWork),
  };
  runtime.provide(TASK_KIND, (machine) => (machine as typeof taskMachine).provide({ actors: effects }));

  return {
    fenceOf(taskId) {
      const drive = drives.get(taskId);
      return drive ? leaseFence(drive.lease) : undefined;
    },
    abort(taskId: string) {
      // The stop is in the store (another node's, or this one's): the task hosted from it here leaves
      // its state, which stops that state's effect, and starts the stop's.
      void runtime.refresh(taskActorId(taskId)).catch(() => undefined);
      void sessions.interrupt(taskId).catch(() => undefined);
    },
    /**
     * Drives the task under `lease` until it no longer holds a lease (its machine decides each step), the
     * lease is lost or the scheduler stops (`signal`: once the step in flight has stopped), or a write the
     * lease no longer allowed ends it (rejects with that error).
     */
    async run(taskId: string, lease: HeldLease, signal: AbortSignal): Promise<void> {
      // An 'abort' listener never fires for a signal that is already aborted (the lease was lost or
      // the scheduler stopped before this run began): such a run must not start any step.
      if (signal.aborted) return;
      let settle!: () => void;
      let fail!: (error: unknown) => void;
      const ended = new Promise<void>((resolve, reject) => {
        settle = resolve;
        fail = reject;
      });
      const stop = drives.start(taskId, { lease, signal, fail });
      const check = () => {
        task(taskId).then((t) => !taskStateHas(t.state, 'holdsLease') && settle(), fail);
      };
      const unsubscribe = runtime.onTransition((change) => change.actorId === taskActorId(taskId) && check());
      // The step in flight is told to stop by the same signal; the worker ends once it has.
      const onAbort = () => void (steps.get(taskId)?.done ?? Promise.resolve()).then(settle, settle);
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        // Hosted here from what is stored: its state's effect starts, and finds this drive.
        await runtime.refresh(taskActorId(taskId));
        check();
        await ended;
      } finally {
        signal.removeEventListener('abort', onAbort);
        unsubscribe();
        stop();
        lastTurns.delete(taskId);
        steps.delete(taskId);
        // A retry turn asked for and never started here: its verifier hears that it did not run.
        retryTurns.get(taskId)?.settle({ ok: false });
        retryTurns.delete(taskId);
      }
    },
  };
}
