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
import type { TurnStartParams } from '../codex/protocol/ts/v2/TurnStartParams.js';
import type { DynamicToolSpec } from '../codex/protocol/ts/v2/DynamicToolSpec.js';
import type { DynamicToolCallParams } from '../codex/protocol/ts/v2/DynamicToolCallParams.js';
import type { DynamicToolCallResponse } from '../codex/protocol/ts/v2/DynamicToolCallResponse.js';
import { CodexRpcError, errorText, type CodexAppServerConnection } from '../codex/jsonrpc-connection.js';
import { runTurn as runCodexTurn, type TurnOutcome as CodexTurnOutcome } from '../codex/run-turn.js';
import type { AgentSandbox } from '../isolation/agent-sandbox.js';
import { plainTurnStartParams, threadResumeParams, threadStartParams, turnStartParams, type GiteaMcpConfig } from '../codex/thread-params.js';
import { formatMarker, turnKeyFor } from '../domain/marker.js';
import type { SessionRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import type { SessionContext, SessionEvent } from '../../machines/session.js';
import type { AppServerSupervisor } from './app-server-supervisor.js';
import { withFullTexts } from '../tasks/task-texts.js';
import { developerInstructions, instructionContextFor, plainTurnText, turnInputText } from './developer-instructions.js';
import { classifyMcpStartError, preflightMcpCommand } from './mcp-preflight.js';
import { SESSION_KIND, newSessionRecord, sessionActorId } from './session-actor.js';
import { redactText, silentLogger, type SessionLogger } from './session-logger.js';
import { findCommentCall, requestedQuestionsText, waitingUserQuestion, type CommentCall } from './turn-outcome.js';
import type { TurnUsageHooks } from '../usage/usage-accounting.js';

export type { CommentCall } from './turn-outcome.js';

export type TurnOutcome =
  | { kind: 'replied'; turnKey: string; turnId: string; finalMessage: string | null; commentCall: CommentCall }
  | { kind: 'no_comment'; turnKey: string; turnId: string; finalMessage: string | null }
  | { kind: 'waiting_user'; turnKey: string; turnId: string; question: string; commentCall: CommentCall | null }
  | { kind: 'failed'; turnKey: string; turnId: string | null; errorCode: string; retryable: boolean }
  | { kind: 'interrupted'; turnKey: string; turnId: string };

/** Why ensureThread failed: `errorCode` is what the executor puts in FAIL / PREPARE_FAILED. */
export class SessionError extends Error {
  constructor(
    readonly errorCode: string,
    readonly retryable: boolean,
    message: string,
  ) {
    super(message);
    this.name = 'SessionError';
  }
}

export interface SessionManagerOptions {
  store: Store;
  runtime: ActorRuntime;
  supervisor: AppServerSupervisor;
  giteaUrl: string;
  /** The bot token: only ever placed in `config.mcp_servers.gitea.env` of thread/start|resume. */
  giteaToken: string;
  mcpCommand: string;
  /** Default `['-t','stdio','-host', giteaUrl]`. */
  mcpArgs?: string[];
  mcpStartupTimeoutSec: number;
  /** Default: the connection's model (CCWEB_CODEX_MODEL, else Codex's config/read). */
  model?: string;
  reasoningEffort?: string | null;
  turnTimeoutMs: number;
  /** How long an interrupt waits for `turn/completed interrupted` (default 10 s). */
  abortTimeoutMs?: number;
  botLogin?: string | null;
  /** `sessions.mcp.hostRef` (default `gitea-main`). */
  hostRef?: string;
  /** Approve a new thread automatically after a definitive resume failure (default true). */
  autoApproveNewThread?: boolean;
  /** Where the agent's commands run (src/isolation/); absent: Codex's `danger-full-access`. */
  agentSandbox?: Pick<AgentSandbox, 'forThread'>;
  logger?: SessionLogger;
  now?: () => Date;
  /**
   * Client-side tools offered to the agent on thread/start (change delivery's publish tool). Codex
   * asks for them with `item/tool/call`; `call` runs for the task whose turn is active on that thread.
   */
  dynamicTools?: {
    specs: DynamicToolSpec[];
    /** Appended to the developer instructions: when and how to use the tools. */
    instructions?: string;
    call(taskId: string, tool: string, args: unknown): Promise<DynamicToolCallResponse>;
  };
  /** Usage accounting and per-task budgets (src/usage/): none when absent. */
  usage?: TurnUsageHooks;
}

export interface RunTurnOptions {
  kind: 'normal' | 'reply_retry';
  cwd: string;
  signal?: AbortSignal;
  replyRetryPrompt?: string;
}

export interface SessionManager {
  ensureThread(task: TaskRecord, cwd: string): Promise<{ threadId: string; resumed: boolean }>;
  runTurn(task: TaskRecord, opts: RunTurnOptions): Promise<TurnOutcome>;
  /** Interrupts the task's turn; `confirmed` once it completed, false after `abortTimeoutMs`. No turn → confirmed. */
  interrupt(taskId: string): Promise<{ confirmed: boolean }>;
  /** Tasks with a turn running now. */
  activeTaskIds(): string[];
}

interface ActiveTurn {
  taskId: string;
  threadId: string;
  turnKey: string;
  conn: CodexAppServerConnection;
  turnId: string | null;
  turnIdKnown: Promise<string | null>;
  setTurnId: (id: string | null) => void;
  /** `limit:<code>`: a per-task budget (src/usage/) ran out. */
  stopReason: 'interrupt' | 'timeout' | `limit:${string}` | null;
  stopRequested: Promise<void>;
  requestStop: () => void;
  done: Promise<void>;
}

const RESTING = new Set(['idle', 'waiting_user', 'turn_in_flight']);

export function createSessionManager(options: SessionManagerOptions): SessionManager {
  const { store, runtime, supervisor } = options;
  const logger = options.logger ?? silentLogger;
  const now = options.now ?? (() => new Date());
  const abortTimeoutMs = options.abortTimeoutMs ?? 10_000;
  const secrets = [options.giteaToken];
  const redact = (s: string) => redactText(s, secrets);
  const loaded = new Map<string, number>(); // threadId → generation that has it loaded
  const locks = new Map<string, Promise<unknown>>();
  const active = new Map<string, ActiveTurn>();
  const threadRequestTimeoutMs = (options.mcpStartupTimeoutSec + 30) * 1_000;

  const mcpConfig: GiteaMcpConfig = {
    command: options.mcpCommand,
    giteaUrl: options.giteaUrl,
    token: options.giteaToken,
    startupTimeoutSec: options.mcpStartupTimeoutSec,
    ...(options.mcpArgs ? { args: options.mcpArgs } : {}),
  };

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

  function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = locks.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    locks.set(key, tail);
    void tail.then(() => {
      if (locks.get(key) === tail) locks.delete(key);
    });
    return run;
  }

  function sessionState(sessionKey: string): { state: string; context: SessionContext } | undefined {
    const s = runtime.stateOf(sessionActorId(sessionKey));
    return s ? { state: s.state, context: s.context as SessionContext } : undefined;
  }

  async function sendSession(sessionKey: string, event: SessionEvent, by = 'system:session_manager'): Promise<boolean> {
    const r = await runtime.send(sessionActorId(sessionKey), event, { by });
    if (!r.ok) logger.warn({ sessionKey, event: event.type, state: r.state, reason: r.reason }, 'session event rejected');
    return r.ok;
  }

  async function ensureActor(task: TaskRecord): Promise<void> {
    const actorId = sessionActorId(task.sessionKey);
    if (runtime.stateOf(actorId)) return;
    const created = await store.transact((tx) => {
      const at = now().toISOString();
      const existing = tx.get<SessionRecord>('sessions', task.sessionKey);
      if (!existing) tx.insert('sessions', task.sessionKey, newSessionRecord(task, options.hostRef ?? 'gitea-main', at));
      return runtime.createInTx(tx, SESSION_KIND, actorId, { sessionKey: task.sessionKey }, { by: 'system:session_manager' });
    });
    created.start();
  }

  /** Maps a thread/start|resume failure to an error code (transport, MCP, or the request itself). */
  function threadFailure(err: unknown, fallback: string): SessionError {
    const reason = redact(errorText(err)).slice(0, 500);
    const mcp = classifyMcpStartError(err);
    if (mcp) return new SessionError(mcp, false, reason);
    if (err instanceof CodexRpcError && err.code === 'app_server_exited') return new SessionError('app_server_exited', true, reason);
    if (err instanceof CodexRpcError && (err.code === 'request_timeout' || err.code === 'app_server_unavailable')) {
      return new SessionError('app_server_timeout', true, reason);
    }
    return new SessionError(fallback, true, reason);
  }

  // Sent on start AND resume: Codex keeps neither the profile nor the MCP config of a thread.
  const sandboxFor = (cwd: string) => (options.agentSandbox ? { sandbox: options.agentSandbox.forThread(cwd) } : {});

  async function startThread(task: TaskRecord, conn: CodexAppServerConnection, gen: number, cwd: string) {
    let res: any;
    try {
      res = await conn.request(
        'thread/start',
        threadStartParams({ cwd, giteaMcp: mcpConfig, ...sandboxFor(cwd), ...(options.dynamicTools ? { dynamicTools: options.dynamicTools.specs } : {}) }),
        { timeoutMs: threadRequestTimeoutMs },
      );
    } catch (err) {
      const failure = threadFailure(err, 'thread_start_failed');
      await sendSession(task.sessionKey, { type: 'THREAD_START_FAILED', errorCode: failure.errorCode });
      logger.warn({ sessionKey: task.sessionKey, taskId: task.taskId, errorCode: failure.errorCode, reason: failure.message }, 'thread/start failed');
      throw failure;
    }
    const threadId = String(res?.thread?.id ?? '');
    if (!threadId) throw new SessionError('thread_start_failed', true, 'thread/start returned no thread id');
    loaded.set(threadId, gen);
    await sendSession(task.sessionKey, { type: 'THREAD_STARTED', threadId });
    logger.info({ sessionKey: task.sessionKey, taskId: task.taskId, threadId }, 'codex thread started');
    return { threadId, resumed: false };
  }

  async function approveNewThread(task: TaskRecord, conn: CodexAppServerConnection, gen: number, cwd: string, reason: string) {
    if (options.autoApproveNewThread === false) {
      throw new SessionError('resume_failed', false, `thread resume failed; a new thread needs approval: ${reason}`);
    }
    const by = 'system:resume_failed_policy';
    await sendSession(task.sessionKey, { type: 'NEW_THREAD_APPROVED', reason: reason.slice(0, 300), by }, by);
    return startThread(task, conn, gen, cwd);
  }

  async function resumeThread(task: TaskRecord, conn: CodexAppServerConnection, gen: number, cwd: string, threadId: string) {
    try {
      await conn.request('thread/resume', threadResumeParams({ threadId, cwd, giteaMcp: mcpConfig, ...sandboxFor(cwd) }), { timeoutMs: threadRequestTimeoutMs });
    } catch (err) {
      const failure = threadFailure(err, 'thread_resume_failed');
      logger.warn({ sessionKey: task.sessionKey, taskId: task.taskId, threadId, errorCode: failure.errorCode, reason: failure.message }, 'thread/resume failed');
      // Transport and MCP failures say nothing about the thread: stay in `resuming`, retry later.
      if (failure.errorCode !== 'thread_resume_failed') throw failure;
      await sendSession(task.sessionKey, { type: 'RESUME_FAILED', errorCode: 'thread_resume_failed' });
      return approveNewThread(task, conn, gen, cwd, `thread_resume_failed: ${failure.message}`);
    }
    loaded.set(threadId, gen);
    await sendSession(task.sessionKey, { type: 'RESUME_OK' });
    logger.info({ sessionKey: task.sessionKey, taskId: task.taskId, threadId }, 'codex thread resumed');
    return { threadId, resumed: true };
  }

  async function ensureThread(task: TaskRecord, cwd: string): Promise<{ threadId: string; resumed: boolean }> {
    return withLock(`thread:${task.sessionKey}`, async () => {
      const pre = preflightMcpCommand(options.mcpCommand);
      if (!pre.ok) {
        logger.error({ taskId: task.taskId, errorCode: pre.errorCode, command: options.mcpCommand }, 'gitea-mcp preflight failed');
        throw new SessionError(pre.errorCode, false, pre.reason);
      }
      let conn: CodexAppServerConnection;
      try {
        conn = useConnection(await supervisor.connection());
      } catch (err) {
        throw threadFailure(err, 'app_server_unavailable');
      }
      const gen = supervisor.generation;
      await ensureActor(task);
      let s = sessionState(task.sessionKey)!;
      if (s.state === 'closed') throw new SessionError('session_closed', false, 'the session of this resource is closed');
      if (RESTING.has(s.state) && s.context.threadId) {
        if (loaded.get(s.context.threadId) === gen) return { threadId: s.context.threadId, resumed: true };
        // Loaded by an app-server process that is gone (or by a previous service run).
        await sendSession(task.sessionKey, { type: 'RESTARTED' });
        s = sessionState(task.sessionKey)!;
      }
      switch (s.state) {
        case 'resuming':
          return resumeThread(task, conn, gen, cwd, s.context.threadId!);
        case 'resume_failed':
          return approveNewThread(task, conn, gen, cwd, `resume_failed (${s.context.lastErrorCode ?? 'unknown'})`);
        case 'no_thread':
          await sendSession(task.sessionKey, { type: 'START_THREAD' });
          return startThread(task, conn, gen, cwd);
        case 'thread_starting':
          return startThread(task, conn, gen, cwd);
        default:
          throw new SessionError('session_not_ready', true, `session in ${s.state}`);
      }
    });
  }

  /** Writes one step of a turn's record (reads the current record inside the transaction). */
  function updateTurn(turnKey: string, patch: Partial<TurnRecord>, extra?: (tx: Parameters<Parameters<Store['transact']>[0]>[0]) => void) {
    return store.transact((tx) => {
      const rec = tx.get<TurnRecord>('turns', turnKey);
      if (!rec) return;
      // eventSeq only moves forward: a late write of an older count must not undo a newer one.
      const eventSeq = Math.max(rec.eventSeq, patch.eventSeq ?? 0);
      tx.put('turns', turnKey, { ...rec, ...patch, eventSeq });
      extra?.(tx);
    });
  }

  function failed(turnKey: string, turnId: string | null, errorCode: string, retryable: boolean): TurnOutcome {
    return { kind: 'failed', turnKey, turnId, errorCode, retryable };
  }

  async function runTurn(task: TaskRecord, opts: RunTurnOptions): Promise<TurnOutcome> {
    return withLock(`turn:${task.sessionKey}`, () => runTurnLocked(task, opts));
  }

  async function runTurnLocked(task: TaskRecord, opts: RunTurnOptions): Promise<TurnOutcome> {
    const n = store.byIndex<TurnRecord>('turns', 'taskId', task.taskId).length + 1;
    const turnKey = turnKeyFor(task.taskId, n);
    if (opts.signal?.aborted) return failed(turnKey, null, 'aborted_before_start', false);
    let conn: CodexAppServerConnection;
    try {
      conn = useConnection(await supervisor.connection());
    } catch {
      return failed(turnKey, null, 'app_server_unavailable', true);
    }
    const s = sessionState(task.sessionKey);
    const threadId = s?.context.threadId ?? null;
    if (!s || !threadId || (s.state !== 'idle' && s.state !== 'waiting_user') || loaded.get(threadId) !== supervisor.generation) {
      return failed(turnKey, null, 'session_not_ready', true);
    }
    const model = options.model ?? conn.model;
    if (!model) return failed(turnKey, null, 'codex_model_unknown', false);
    // A task that already used up a budget gets no new turn (its receipt names the limit).
    const gate = options.usage?.beforeTurn(task) ?? { maxMs: null };
    if (gate.refuse) {
      logger.info({ taskId: task.taskId, turnKey, errorCode: gate.refuse }, 'turn not started: task budget used up');
      return failed(turnKey, null, gate.refuse, false);
    }

    // A reply-retry turn re-posts the answer of the turn being verified: it must carry THAT turn's
    // marker, or verification (which looks for the original marker) misses it and the REST fallback
    // posts a second answer.
    const original = opts.kind === 'reply_retry'
      ? store.byIndex<TurnRecord>('turns', 'taskId', task.taskId).filter((t) => t.kind === 'normal').at(-1)
      : undefined;
    const marker = original?.marker ?? formatMarker({ taskId: task.taskId, turnKey, resourceKey: task.resourceKey });
    // Long comment texts are stored once, outside the task record (src/tasks/task-texts.ts).
    const whole = withFullTexts(store, task);
    const instructions = [developerInstructions(instructionContextFor(whole, options.giteaUrl, marker, options.botLogin)), options.dynamicTools?.instructions]
      .filter((x): x is string => typeof x === 'string' && x.length > 0)
      .join('\n\n');
    // Replies count from the last turn that finished (the one that asked): a retry of an interrupted
    // turn gets the same replies again.
    const previousTurnStart = store
      .byIndex<TurnRecord>('turns', 'taskId', task.taskId)
      .filter((t) => t.kind === 'normal' && t.status === 'completed')
      .at(-1)?.startedAt;
    const input = turnInputText(whole, {
      kind: opts.kind,
      marker,
      ...(previousTurnStart ? { repliesSince: previousTurnStart } : {}),
      ...(opts.replyRetryPrompt ? { replyRetryPrompt: opts.replyRetryPrompt } : {}),
    });
    const startedAt = now().toISOString();
    // Intent first (§9.3): the turn record and its marker exist before Codex is asked.
    await store.transact((tx) => {
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
      tx.insert('turns', turnKey, rec);
      const t = tx.get<TaskRecord>('tasks', task.taskId);
      if (t) tx.put('tasks', task.taskId, { ...t, threadId, turnId: null });
      tx.appendAudit({ action: 'codex.turn_start', actor: 'system:session_manager', taskId: task.taskId, metadata: { turnKey, threadId, kind: opts.kind } });
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
    const budgetTimer =
      gate.maxMs !== null && gate.maxMs < options.turnTimeoutMs ? setTimeout(() => void stopTurn(a, 'limit:budget_task_wall_time'), gate.maxMs) : null;
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
    try {
      const running = runCodexTurn(conn, {
        threadId,
        params,
        plainParams,
        onTurnId: (turnId) => {
          a.turnId = turnId;
          setTurnId(turnId);
          queue(() =>
            updateTurn(turnKey, { turnId }, (tx) => {
              const t = tx.get<TaskRecord>('tasks', task.taskId);
              if (t) tx.put('tasks', task.taskId, { ...t, turnId });
            }),
          );
          queue(async () => {
            sessionTurnStarted = await sendSession(task.sessionKey, { type: 'TURN_STARTED', turnId, taskId: task.taskId });
          });
        },
        onProcessed: (_n, eventSeq) => queue(() => updateTurn(turnKey, { eventSeq })),
        onNotification: (n) => {
          const crossed = options.usage?.observe(task, turnKey, n) ?? null;
          if (crossed && a.stopReason === null) {
            logger.warn({ taskId: task.taskId, turnKey, errorCode: crossed }, 'task budget crossed: interrupting the turn');
            void stopTurn(a, `limit:${crossed}`);
          }
        },
      });
      // A stop that Codex never confirms must not hold the task forever.
      const giveUp = stopRequested.then(() => new Promise<'gave_up'>((r) => setTimeout(() => r('gave_up'), abortTimeoutMs + 1_000).unref()));
      const r = await Promise.race([running, giveUp]);
      if (r === 'gave_up') running.catch(() => undefined);
      else out = r;
    } catch (err) {
      error = err;
    } finally {
      setTurnId(null);
      clearTimeout(timer);
      if (budgetTimer) clearTimeout(budgetTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      untrack();
    }

    const turnId = a.turnId;
    let outcome: TurnOutcome;
    if (error) {
      const code =
        error instanceof CodexRpcError && error.code === 'app_server_exited'
          ? 'app_server_exited'
          : error instanceof CodexRpcError && error.code === 'request_timeout'
            ? 'app_server_timeout'
            : 'turn_start_failed';
      logger.warn({ taskId: task.taskId, turnKey, errorCode: code, reason: redact(errorText(error)).slice(0, 300) }, 'codex turn failed');
      outcome = failed(turnKey, turnId, code, true);
    } else if (a.stopReason?.startsWith('limit:')) {
      // Interrupted (or given up on) because a budget ran out: the task ends naming the limit.
      outcome = failed(turnKey, turnId, a.stopReason.slice('limit:'.length), false);
    } else if (a.stopReason === 'timeout') {
      outcome = failed(turnKey, turnId, 'turn_timeout', false);
    } else if (!out) {
      outcome = failed(turnKey, turnId, 'abort_timeout', false);
    } else if (out.status === 'interrupted') {
      outcome = { kind: 'interrupted', turnKey, turnId: out.turnId };
    } else if (out.status === 'failed') {
      logger.warn({ taskId: task.taskId, turnKey, turnId: out.turnId, error: redact(JSON.stringify(out.error ?? null)).slice(0, 300) }, 'codex turn ended failed');
      outcome = failed(turnKey, out.turnId, options.usage?.classifyFailure(out.error) ?? 'turn_failed', true);
    } else {
      const commentCall = findCommentCall(out.items, task.resource.number);
      const question = waitingUserQuestion(out.finalMessage) ?? requestedQuestionsText(out.userInputRequested);
      if (question !== null) outcome = { kind: 'waiting_user', turnKey, turnId: out.turnId, question, commentCall };
      else if (commentCall) outcome = { kind: 'replied', turnKey, turnId: out.turnId, finalMessage: out.finalMessage, commentCall };
      else outcome = { kind: 'no_comment', turnKey, turnId: out.turnId, finalMessage: out.finalMessage };
    }

    // A turn a budget stopped was interrupted (turn/interrupt), whatever the task makes of it.
    const budgetStopped = a.stopReason?.startsWith('limit:') === true && out?.status === 'interrupted';
    const status: TurnRecord['status'] =
      outcome.kind === 'interrupted' || budgetStopped ? 'interrupted' : outcome.kind === 'failed' ? 'failed' : 'completed';
    const sessionEvent: SessionEvent | null =
      turnId === null
        ? null
        : outcome.kind === 'waiting_user'
          ? { type: 'TURN_WAITING_USER', turnId }
          : outcome.kind === 'failed'
            ? { type: 'TURN_FAILED', turnId, errorCode: outcome.errorCode }
            : { type: 'TURN_COMPLETED', turnId };
    queue(() =>
      updateTurn(
        turnKey,
        {
          status,
          completedAt: now().toISOString(),
          // The agent can read its own environment (yolo): never store — or later post through the
          // REST fallback — a token it echoed.
          finalMessage: out?.finalMessage == null ? null : redact(out.finalMessage),
          commentCall: outcome.kind === 'replied' || outcome.kind === 'waiting_user' ? outcome.commentCall : null,
        },
        (tx) => {
          options.usage?.recordTurn(tx, task, turnKey, {
            model,
            wallMs: now().getTime() - Date.parse(startedAt),
            stoppedBy: a.stopReason?.startsWith('limit:') ? a.stopReason.slice('limit:'.length) : null,
          });
          tx.appendAudit({
            action: 'codex.turn_completed',
            actor: 'system:session_manager',
            taskId: task.taskId,
            turnId,
            errorCode: outcome.kind === 'failed' ? outcome.errorCode : null,
            metadata: { turnKey, outcome: outcome.kind, usedPlainFallback: out?.usedPlainFallback ?? false, durationMs: out?.durationMs ?? null },
          });
        },
      ),
    );
    queue(async () => {
      if (sessionEvent && sessionTurnStarted) await sendSession(task.sessionKey, sessionEvent);
    });
    await writes;
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
    try {
      await a.conn.request('turn/interrupt', { threadId: a.threadId, turnId }, { timeoutMs: abortTimeoutMs });
    } catch (err) {
      // -32600 "no active turn": it finished meanwhile; anything else is reported by the outcome.
      logger.warn({ taskId: a.taskId, turnId, error: errorText(err).slice(0, 200) }, 'turn/interrupt failed');
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
  };
}
