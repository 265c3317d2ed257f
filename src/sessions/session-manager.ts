// One Codex thread per issue/PR (`sessionKey`), kept by a `session` actor (machines/session.ts)
// and driven over the supervisor's app-server connection (spec §5.3, §4.3, §4.5, §8).
//
// Threads. The first task on a resource starts a thread (START_THREAD → thread/start →
// THREAD_STARTED); its id is persisted and reused by every later task. A thread is "loaded" only in
// the app-server process (generation) that started or resumed it: in any other one the session gets
// RESTARTED → resuming → thread/resume → RESUME_OK. Every thread/start and thread/resume carries the
// SAME `config.mcp_servers.gitea` (Codex does not persist it), with the token only in that server's
// env — never in the app-server's own environment.
//
// Resume policy. A resume that fails for a transport reason (process died, timeout) or an MCP reason
// stays in `resuming` and is retried by the next task. A resume that Codex rejects outright (the
// thread is gone, e.g. CODEX_HOME lost) is RESUME_FAILED → `resume_failed`; the service then approves
// a new thread automatically (NEW_THREAD_APPROVED by `system:resume_failed_policy`, reason = the error,
// audited as a session transition; the old thread id stays in previousThreadIds) unless
// `autoApproveNewThread: false`, in which case the task fails with `resume_failed` and an operator
// decides. The conversation is lost either way; answering on a fresh thread beats never answering.
//
// Turns. Serialised per thread (a second turn/start would steer the running one). Before turn/start
// the `turns` record is inserted with our own `turnKey` and marker (src/domain/marker.ts); Codex's
// turnId is stored when it arrives, with `eventSeq` per processed notification (repeats skipped).
import { agentStepOf } from './agent-step.js';
import { errorText, type CodexAppServerConnection } from '../codex/jsonrpc-connection.js';
import { CodexRpcError } from '../codex/jsonrpc-types.js';
import type { DynamicToolCallParams } from '../codex/protocol/ts/v2/DynamicToolCallParams.js';
import type { DynamicToolCallResponse } from '../codex/protocol/ts/v2/DynamicToolCallResponse.js';
import type { TurnStartParams } from '../codex/protocol/ts/v2/TurnStartParams.js';
import { runTurn as runCodexTurn, type CodexTurnOutcome } from '../codex/run-turn.js';
import { plainTurnStartParams, turnStartParams } from '../codex/thread-params.js';
import { formatMarker, turnKeyFor } from '../domain/marker.js';
import type { TaskRecord, TurnRecord } from '../domain/records.js';
import { isLeaseRefusal, type Tx } from '../store/types.js';
import { withFullTexts } from '../tasks/task-texts.js';
import { developerInstructions, instructionContextFor, plainTurnText, turnInputText } from './developer-instructions.js';
import { gateStateDir } from '../mcp-gate/gate-files.js';
import { refreshTaskGate, writeTaskGate } from './gate-task.js';
import { ingestGateCalls } from './gate-calls.js';
import { keyedLock } from './keyed-lock.js';
import { turnErrorCode } from './session-error.js';
import { redactText, silentLogger } from './session-logger.js';
import type { RunTurnOptions, SessionManager, SessionManagerOptions } from './session-manager-types.js';
import { createThreadKeeper, sessionPort } from './thread-keeper.js';
import { turnSessionReady } from './thread-plan.js';
import {
  budgetLimitOf,
  budgetTimerMs,
  failedTurn as failed,
  markerForTurn,
  repliesSinceOf,
  sessionEventForTurnEnd,
  turnOutcome,
  turnRecordStatus,
  type StopReason,
  type TurnOutcome,
} from './turn-result.js';

export type { CommentCall } from './turn-outcome.js';

/** How soon an interrupt Codex refused before its turn began is asked again. */
const INTERRUPT_RETRY_MS = 200;

export { SessionError } from './session-error.js';
export type { TurnOutcome } from './turn-result.js';
export type { RunTurnOptions, SessionManager, SessionManagerOptions } from './session-manager-types.js';

interface ActiveTurn {
  taskId: string;
  threadId: string;
  turnKey: string;
  conn: CodexAppServerConnection;
  turnId: string | null;
  turnIdKnown: Promise<string | null>;
  setTurnId: (id: string | null) => void;
  stopReason: StopReason | null;
  stopRequested: Promise<void>;
  requestStop: () => void;
  done: Promise<void>;
}

export function createSessionManager(options: SessionManagerOptions): SessionManager {
  const { store, runtime, supervisor } = options;
  const logger = options.logger ?? silentLogger;
  const now = options.now ?? (() => new Date());
  const abortTimeoutMs = options.abortTimeoutMs ?? 10_000;
  const secrets = [options.giteaToken];
  const redact = (s: string) => redactText(s, secrets);
  const loaded = new Map<string, number>(); // threadId → generation that has it loaded
  const locks = keyedLock();
  const active = new Map<string, ActiveTurn>();

  /** Routes the agent's dynamic tool calls to the task whose turn runs on that thread. */
  async function onDynamicTool(params: DynamicToolCallParams): Promise<DynamicToolCallResponse> {
    const turn = [...active.values()].find((a) => a.threadId === params.threadId);
    if (!turn || !options.dynamicTools) {
      return { success: false, contentItems: [{ type: 'inputText', text: 'ccweb-gitea: no task is running on this thread' }] };
    }
    logger.info({ taskId: turn.taskId, tool: params.tool, threadId: params.threadId }, 'dynamic tool call');
    return options.dynamicTools.call(turn.taskId, params.tool, params.arguments);
  }

  function useConnection(conn: CodexAppServerConnection): CodexAppServerConnection {
    if (options.dynamicTools) conn.setDynamicToolHandler(onDynamicTool);
    return conn;
  }
  const sessions = sessionPort(runtime, logger);
  const connect = async () => useConnection(await supervisor.connection());
  const { ensureThread } = createThreadKeeper({ options, logger, now, redact, loaded, locks, sessions, connect });


  /**
   * Writes one step of a turn's record (reads the current record inside the transaction); resolves
   * to false when there is no such record (nothing written).
   */
  function updateTurn(turnKey: string, patch: Partial<TurnRecord>, extra?: (tx: Tx) => Promise<void>): Promise<boolean> {
    return store.transact(async (tx) => {
      const rec = await tx.get<TurnRecord>('turns', turnKey);
      if (!rec) return false;
      // eventSeq only moves forward: a late write of an older count must not undo a newer one.
      const eventSeq = Math.max(rec.eventSeq, patch.eventSeq ?? 0);
      await tx.put<TurnRecord>('turns', turnKey, { ...rec, ...patch, eventSeq });
      await extra?.(tx);
      return true;
    });
  }

  async function runTurn(task: TaskRecord, opts: RunTurnOptions): Promise<TurnOutcome> {
    return locks.run(`turn:${task.sessionKey}`, () => runTurnLocked(task, opts));
  }

  async function runTurnLocked(task: TaskRecord, opts: RunTurnOptions): Promise<TurnOutcome> {
    const turns = await store.byIndex<TurnRecord>('turns', 'taskId', task.taskId);
    const n = turns.length + 1;
    const turnKey = turnKeyFor(task.taskId, n);
    if (opts.signal?.aborted) return failed(turnKey, null, 'aborted_before_start', false);
    let conn: CodexAppServerConnection;
    try {
      conn = await connect();
    } catch {
      return failed(turnKey, null, 'app_server_unavailable', true);
    }
    const s = await sessions.state(task.sessionKey);
    const threadId = s?.context.threadId ?? null;
    if (!turnSessionReady(s && { state: s.state, threadId, loadedIn: threadId ? loaded.get(threadId) : undefined, generation: supervisor.generation }) || !threadId) {
      return failed(turnKey, null, 'session_not_ready', true);
    }
    const model = options.model ?? conn.model;
    if (!model) return failed(turnKey, null, 'codex_model_unknown', false);
    // A task that already used up a budget gets no new turn (its receipt names the limit).
    const gate = (await options.usage?.beforeTurn(task)) ?? { maxMs: null };
    if (gate.refuse) {
      logger.info({ taskId: task.taskId, turnKey, errorCode: gate.refuse }, 'turn not started: task budget used up');
      return failed(turnKey, null, gate.refuse, false);
    }

    const marker = markerForTurn(opts.kind, turns, () => formatMarker({ taskId: task.taskId, turnKey, resourceKey: task.resourceKey }));
    // Long comment texts are stored once, outside the task record (src/tasks/task-texts.ts).
    const whole = await withFullTexts(store, task);
    const instructions = [developerInstructions(instructionContextFor(whole, options.giteaUrl, marker, options.botLogin)), options.dynamicTools?.instructions]
      .filter((x): x is string => typeof x === 'string' && x.length > 0)
      .join('\n\n');
    const previousTurnStart = repliesSinceOf(turns);
    const input = turnInputText(whole, {
      kind: opts.kind,
      marker,
      ...(previousTurnStart ? { repliesSince: previousTurnStart } : {}),
      ...(opts.replyRetryPrompt ? { replyRetryPrompt: opts.replyRetryPrompt } : {}),
    });
    const startedAt = now().toISOString();
    const gateDir = gateStateDir(options.mcpGate.dataDir, task.sessionKey);
    await writeTaskGate(options.mcpGate, task);
    // Intent first (§9.3): the turn record and its marker exist before Codex is asked.
    await store.transact(async (tx) => {
      await opts.fence?.(tx);
      const rec: TurnRecord = {
        turnKey,
        turnId: null,
        taskId: task.taskId,
        threadId,
        kind: opts.kind,
        status: 'started',
        eventSeq: 0,
        marker,
        finalMessage: null,
        commentCall: null,
        startedAt,
        completedAt: null,
      };
      await tx.insert<TurnRecord>('turns', turnKey, rec);
      const t = await tx.get<TaskRecord>('tasks', task.taskId);
      if (t) await tx.put<TaskRecord>('tasks', task.taskId, { ...t, threadId, turnId: null });
      await tx.appendAudit({ action: 'codex.turn_start', actor: 'system:session_manager', taskId: task.taskId, metadata: { turnKey, threadId, kind: opts.kind } });
    });

    let setTurnId!: (id: string | null) => void;
    const turnIdKnown = new Promise<string | null>((r) => (setTurnId = r));
    let requestStop!: () => void;
    const stopRequested = new Promise<void>((r) => (requestStop = r));
    let finish!: () => void;
    const done = new Promise<void>((r) => (finish = r));
    const a: ActiveTurn = { taskId: task.taskId, threadId, turnKey, conn, turnId: null, turnIdKnown, setTurnId, stopReason: null, stopRequested, requestStop, done };
    active.set(task.taskId, a);
    const untrack = supervisor.beginTurn(task.taskId);
    const timer = setTimeout(() => void stopTurn(a, 'timeout'), options.turnTimeoutMs);
    const budgetMs = budgetTimerMs(gate.maxMs, options.turnTimeoutMs);
    const budgetTimer = budgetMs !== null ? setTimeout(() => void stopTurn(a, 'limit:budget_task_wall_time'), budgetMs) : null;
    const onAbort = () => void stopTurn(a, 'interrupt');
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    // Writes of this turn, strictly in order (turnId before eventSeq updates before completion).
    let writes: Promise<unknown> = Promise.resolve();
    const queue = (fn: () => Promise<unknown>) => {
      writes = writes.then(fn).catch((err) => logger.error({ turnKey, error: errorText(err) }, 'turn write failed'));
    };
    let sessionTurnStarted = false;

    // cwd on the turn too: the task's workspace wins over whatever the thread was started with.
    const params: TurnStartParams = {
      ...turnStartParams({ threadId, text: input, model, reasoningEffort: options.reasoningEffort ?? null, developerInstructions: instructions }),
      cwd: opts.cwd,
    };
    const plainParams: TurnStartParams = {
      ...plainTurnStartParams({ threadId, text: plainTurnText(instructions, input), model, reasoningEffort: options.reasoningEffort ?? null }),
      cwd: opts.cwd,
    };
    let out: CodexTurnOutcome | null = null;
    let error: unknown = null;
    let gaveUp = false;
    try {
      const running = runCodexTurn(conn, {
        threadId,
        params,
        plainParams,
        onTurnId: (turnId) => {
          a.turnId = turnId;
          setTurnId(turnId);
          queue(() =>
            updateTurn(turnKey, { turnId }, async (tx) => {
              await opts.fence?.(tx);
              const t = await tx.get<TaskRecord>('tasks', task.taskId);
              if (t) await tx.put<TaskRecord>('tasks', task.taskId, { ...t, turnId });
            }),
          );
          queue(async () => {
            sessionTurnStarted = await sessions.send(task.sessionKey, { type: 'TURN_STARTED', turnId, taskId: task.taskId });
          });
        },
        onProcessed: (_n, eventSeq) => queue(() => updateTurn(turnKey, { eventSeq })),
        onNotification: (n) => {
          const step = options.onStep ? agentStepOf(n) : null;
          if (step) options.onStep!(task.taskId, step);
          const crossed = options.usage?.observe(task, turnKey, n, gate) ?? null;
          if (crossed && a.stopReason === null) {
            logger.warn({ taskId: task.taskId, turnKey, errorCode: crossed }, 'task budget crossed: interrupting the turn');
            void stopTurn(a, `limit:${crossed}`);
          }
        },
      });
      // A stop that Codex never confirms must not hold the task forever.
      const giveUp = stopRequested.then(() => new Promise<'gave_up'>((r) => setTimeout(() => r('gave_up'), abortTimeoutMs + 1_000).unref()));
      const r = await Promise.race([running, giveUp]);
      if (r === 'gave_up') {
        running.catch(() => undefined);
        gaveUp = true;
      } else out = r;
    } catch (err) {
      error = err;
    } finally {
      setTurnId(null);
      clearTimeout(timer);
      if (budgetTimer) clearTimeout(budgetTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      untrack();
    }
    // Codex never confirmed the stop: the turn may still be running commands. They end with the
    // app-server's process (its PID namespace) before this turn returns — and so before its task can
    // give up the repository lease to a next task on the same workspace.
    if (gaveUp) await supervisor.terminate('turn_stop_unconfirmed').catch((err) => logger.error({ taskId: task.taskId, turnKey, error: errorText(err) }, 'could not end the app-server of an unconfirmed stop'));

    const turnId = a.turnId;
    const outcome = turnOutcome({
      turnKey,
      turnId,
      error: error ? { code: turnErrorCode(error) } : null,
      stopReason: a.stopReason,
      out,
      resourceNumber: task.resource.number,
      classifyFailure: (e) => options.usage?.classifyFailure(e) ?? null,
    });
    if (error && outcome.kind === 'failed') {
      logger.warn({ taskId: task.taskId, turnKey, errorCode: outcome.errorCode, reason: redact(errorText(error)).slice(0, 300) }, 'codex turn failed');
    } else if (out?.status === 'failed' && outcome.kind === 'failed' && outcome.retryable) {
      logger.warn({ taskId: task.taskId, turnKey, turnId: out.turnId, error: redact(JSON.stringify(out.error ?? null)).slice(0, 300) }, 'codex turn ended failed');
    }
    const status = turnRecordStatus(outcome, a.stopReason, out);
    const sessionEvent = sessionEventForTurnEnd(outcome, turnId);
    queue(async () => {
      const usageInfo = { model, wallMs: now().getTime() - Date.parse(startedAt), stoppedBy: budgetLimitOf(a.stopReason) };
      const written = await updateTurn(
        turnKey,
        {
          status,
          completedAt: now().toISOString(),
          // The agent can read its own environment (yolo): never store — or later post through the
          // REST fallback — a token it echoed.
          finalMessage: out?.finalMessage == null ? null : redact(out.finalMessage),
          ...(outcome.kind === 'waiting_user' ? { question: redact(outcome.question) } : {}),
          commentCall: outcome.kind === 'replied' || outcome.kind === 'waiting_user' ? outcome.commentCall : null,
        },
        async (tx) => {
          // The turn's end and its usage are the worker's to record only while its lease holds.
          await opts.fence?.(tx);
          await options.usage?.recordTurn(tx, task, turnKey, usageInfo);
          await tx.appendAudit({
            action: 'codex.turn_completed',
            actor: 'system:session_manager',
            taskId: task.taskId,
            turnId,
            errorCode: outcome.kind === 'failed' ? outcome.errorCode : null,
            metadata: { turnKey, outcome: outcome.kind, usedPlainFallback: out?.usedPlainFallback ?? false, durationMs: out?.durationMs ?? null },
          });
        },
      ).catch((err: unknown) => {
        if (!isLeaseRefusal(err)) throw err;
        // Another worker runs the task now (or will): nothing of this turn's end is kept, its usage included.
        logger.warn({ taskId: task.taskId, turnKey }, 'turn end not recorded: the lease is gone');
        options.usage?.turnDropped(turnKey);
        return false;
      });
      // Outside the transaction, which may run more than once: the turn's meter is let go once.
      if (written) options.usage?.turnRecorded(task, turnKey, usageInfo);
    });
    queue(async () => {
      if (sessionEvent && sessionTurnStarted) await sessions.send(task.sessionKey, sessionEvent);
    });
    await writes;
    // What the agent did through Gitea during the turn, from the gate's calls file (never fatal).
    await ingestGateCalls(store, gateDir, { ...(options.mcpGate.onCall ? { onCall: options.mcpGate.onCall } : {}) }).catch((err) =>
      logger.error({ taskId: task.taskId, turnKey, error: errorText(err) }, 'could not audit the gate calls'),
    );
    active.delete(task.taskId);
    finish();
    logger.info({ taskId: task.taskId, turnKey, turnId, outcome: outcome.kind }, 'codex turn finished');
    return outcome;
  }

  async function stopTurn(a: ActiveTurn, reason: NonNullable<ActiveTurn['stopReason']>): Promise<void> {
    if (a.stopReason === null) a.stopReason = reason;
    a.requestStop();
    const turnId = await a.turnIdKnown;
    if (!turnId) return;
    const deadline = Date.now() + abortTimeoutMs;
    let ended = false;
    void a.done.then(() => (ended = true));
    for (;;) {
      try {
        await a.conn.request('turn/interrupt', { threadId: a.threadId, turnId }, { timeoutMs: Math.max(1, deadline - Date.now()) });
        return;
      } catch (err) {
        // -32600 "no active turn": the turn finished meanwhile — or it has not begun: Codex answers
        // turn/start before the turn is under way, and under load an interrupt in between was refused
        // while the turn ran on until the stop was given up. So it is asked again while the turn has
        // not ended. Anything else is reported by the outcome.
        const notBegun = err instanceof CodexRpcError && err.code === -32600 && !ended && Date.now() + INTERRUPT_RETRY_MS < deadline;
        if (!notBegun) {
          logger.warn({ taskId: a.taskId, turnId, error: errorText(err).slice(0, 200) }, 'turn/interrupt failed');
          return;
        }
        await new Promise((r) => setTimeout(r, INTERRUPT_RETRY_MS));
        if (ended) return;
      }
    }
  }

  return {
    ensureThread,
    runTurn,
    async interrupt(taskId) {
      const a = active.get(taskId);
      if (!a) return { confirmed: true };
      void stopTurn(a, 'interrupt');
      let timer: NodeJS.Timeout | null = null;
      const confirmed = await Promise.race([
        a.done.then(() => true),
        new Promise<boolean>((r) => {
          timer = setTimeout(() => r(false), abortTimeoutMs);
        }),
      ]);
      if (timer) clearTimeout(timer);
      return { confirmed };
    },
    activeTaskIds: () => [...active.keys()],
    refreshGate: (task) => refreshTaskGate(options.mcpGate, task),
  };
}
