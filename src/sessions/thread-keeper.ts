// The thread half of the session manager: find, resume or start the Codex thread of a session
// (see the header of session-manager.ts for the policy), deciding through thread-plan.ts.
import type { SessionContext, SessionEvent } from '../../machines/session.js';
import type { CodexAppServerConnection } from '../codex/jsonrpc-connection.js';
import { threadResumeParams, threadStartParams, type GiteaMcpConfig } from '../codex/thread-params.js';
import type { SessionRecord, TaskRecord } from '../domain/records.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { keyedLock } from './keyed-lock.js';
import { gateStateDir } from '../mcp-gate/gate-files.js';
import { writeTaskGate } from './gate-task.js';
import { gateLaunch } from '../mcp-gate/gate-launch.js';
import type { GateScope } from '../mcp-gate/gate-policy.js';
import { preflightMcpCommand } from './mcp-preflight.js';
import { SESSION_KIND, newSessionRecord, sessionActorId } from './session-actor.js';
import { SessionError, threadFailure as classifyThreadFailure } from './session-error.js';
import type { SessionLogger } from './session-logger.js';
import type { SessionManagerOptions } from './session-manager-types.js';
import { isDefinitiveResumeFailure, newThreadApprovedAutomatically, planThread } from './thread-plan.js';

/** The session actor as the manager sees it: its state, and events sent to it (rejections logged). */
export interface SessionPort {
  state(sessionKey: string): Promise<{ state: string; context: SessionContext } | undefined>;
  send(sessionKey: string, event: SessionEvent, by?: string): Promise<boolean>;
}

export function sessionPort(runtime: ActorRuntime, logger: SessionLogger): SessionPort {
  return {
    async state(sessionKey) {
      const s = await runtime.stateOf(sessionActorId(sessionKey));
      return s ? { state: s.state, context: s.context as SessionContext } : undefined;
    },
    async send(sessionKey, event, by = 'system:session_manager') {
      const r = await runtime.send(sessionActorId(sessionKey), event, { by });
      if (!r.ok) logger.warn({ sessionKey, event: event.type, state: r.state, reason: r.reason }, 'session event rejected');
      return r.ok;
    },
  };
}

export interface ThreadKeeperDeps {
  options: SessionManagerOptions;
  logger: SessionLogger;
  now: () => Date;
  redact: (s: string) => string;
  /** threadId → the app-server generation that has it loaded (shared with the turn side). */
  loaded: Map<string, number>;
  locks: ReturnType<typeof keyedLock>;
  sessions: SessionPort;
  /** The supervisor's current connection, with the manager's dynamic tool handler attached. */
  connect: () => Promise<CodexAppServerConnection>;
}

/**
 * The thread's `mcp_servers.gitea`: the agent never talks to gitea-mcp directly. Its MCP server is
 * the gate (src/mcp-gate/), scoped to the task's repository and issue/PR, with gitea-mcp as its child.
 */
export function gatedMcpConfig(input: {
  command: string;
  args: string[];
  giteaUrl: string;
  token: string;
  scope: GateScope;
  stateDir: string;
  startupTimeoutSec: number;
}): GiteaMcpConfig {
  const launch = gateLaunch({ childCommand: input.command, childArgs: input.args, giteaUrl: input.giteaUrl, token: input.token, scope: input.scope, stateDir: input.stateDir });
  const { GITEA_ACCESS_TOKEN: token, GITEA_HOST: _host, ...extraEnv } = launch.env;
  return { command: launch.command, args: launch.args, giteaUrl: input.giteaUrl, token: token!, startupTimeoutSec: input.startupTimeoutSec, extraEnv };
}

export function createThreadKeeper(deps: ThreadKeeperDeps): { ensureThread(task: TaskRecord, cwd: string): Promise<{ threadId: string; resumed: boolean }> } {
  const { options, logger, now, redact, loaded, locks, sessions, connect } = deps;
  const { store, runtime, supervisor } = options;
  const threadRequestTimeoutMs = (options.mcpStartupTimeoutSec + 30) * 1_000;
  const mcpConfigFor = (task: TaskRecord): GiteaMcpConfig =>
    gatedMcpConfig({
      command: options.mcpCommand,
      args: options.mcpArgs ?? ['-t', 'stdio', '-host', options.giteaUrl],
      giteaUrl: options.giteaUrl,
      token: options.mcpGate.token ?? options.giteaToken,
      scope: { owner: task.owner, repo: task.repo, number: task.resource.number },
      stateDir: gateStateDir(options.mcpGate.dataDir, task.sessionKey),
      startupTimeoutSec: options.mcpStartupTimeoutSec,
    });

  async function ensureActor(task: TaskRecord): Promise<void> {
    const actorId = sessionActorId(task.sessionKey);
    if (await runtime.stateOf(actorId)) return;
    const created = await store.transact(async (tx) => {
      const at = now().toISOString();
      const existing = await tx.get<SessionRecord>('sessions', task.sessionKey);
      if (!existing) await tx.insert<SessionRecord>('sessions', task.sessionKey, newSessionRecord(task, options.hostRef ?? 'gitea-main', at));
      return runtime.createInTx(tx, SESSION_KIND, actorId, { sessionKey: task.sessionKey }, { by: 'system:session_manager' });
    });
    created.start();
  }

  /**
   * The thread is in this node's CODEX_HOME now. Read and written under the row's lock, so no newer
   * state of the session is written back over. A transaction holding the row leaves it unrecorded, and one
   * that read the row before may write it back without it: it only steers a preference, and the next
   * start or resume records it again.
   */
  async function recordThreadNode(sessionKey: string): Promise<void> {
    const nodeId = options.nodeId;
    if (nodeId === undefined) return;
    await store
      .transact(async (tx) => {
        const rec = (await tx.lock<SessionRecord>('sessions', [sessionKey], 'skip')).get(sessionKey);
        if (rec && rec.threadNode !== nodeId) await tx.put<SessionRecord>('sessions', sessionKey, { ...rec, threadNode: nodeId });
      })
      .catch((err: unknown) => logger.warn({ sessionKey, err: String(err) }, 'the node holding the thread was not recorded'));
  }

  const threadFailure = (err: unknown, fallback: string) => classifyThreadFailure(err, fallback, redact);

  // Sent on start AND resume: Codex keeps neither the profile nor the MCP config of a thread.
  const sandboxFor = (cwd: string) => (options.agentSandbox ? { sandbox: options.agentSandbox.forThread(cwd) } : {});

  async function startThread(task: TaskRecord, conn: CodexAppServerConnection, gen: number, cwd: string) {
    let res: any;
    try {
      res = await conn.request(
        'thread/start',
        threadStartParams({ cwd, giteaMcp: mcpConfigFor(task), ...sandboxFor(cwd), ...(options.dynamicTools ? { dynamicTools: options.dynamicTools.specs } : {}) }),
        { timeoutMs: threadRequestTimeoutMs },
      );
    } catch (err) {
      const failure = threadFailure(err, 'thread_start_failed');
      await sessions.send(task.sessionKey, { type: 'THREAD_START_FAILED', errorCode: failure.errorCode });
      logger.warn({ sessionKey: task.sessionKey, taskId: task.taskId, errorCode: failure.errorCode, reason: failure.message }, 'thread/start failed');
      throw failure;
    }
    const threadId = String(res?.thread?.id ?? '');
    if (!threadId) throw new SessionError('thread_start_failed', true, 'thread/start returned no thread id');
    loaded.set(threadId, gen);
    await sessions.send(task.sessionKey, { type: 'THREAD_STARTED', threadId });
    await recordThreadNode(task.sessionKey);
    logger.info({ sessionKey: task.sessionKey, taskId: task.taskId, threadId }, 'codex thread started');
    return { threadId, resumed: false };
  }

  async function approveNewThread(task: TaskRecord, conn: CodexAppServerConnection, gen: number, cwd: string, reason: string) {
    if (!newThreadApprovedAutomatically(options)) {
      throw new SessionError('resume_failed', false, `thread resume failed; a new thread needs approval: ${reason}`);
    }
    const by = 'system:resume_failed_policy';
    await sessions.send(task.sessionKey, { type: 'NEW_THREAD_APPROVED', reason: reason.slice(0, 300), by }, by);
    return startThread(task, conn, gen, cwd);
  }

  async function resumeThread(task: TaskRecord, conn: CodexAppServerConnection, gen: number, cwd: string, threadId: string) {
    try {
      await conn.request('thread/resume', threadResumeParams({ threadId, cwd, giteaMcp: mcpConfigFor(task), ...sandboxFor(cwd) }), { timeoutMs: threadRequestTimeoutMs });
    } catch (err) {
      const failure = threadFailure(err, 'thread_resume_failed');
      logger.warn({ sessionKey: task.sessionKey, taskId: task.taskId, threadId, errorCode: failure.errorCode, reason: failure.message }, 'thread/resume failed');
      // Transport and MCP failures say nothing about the thread: stay in `resuming`, retry later.
      if (!isDefinitiveResumeFailure(failure.errorCode)) throw failure;
      await sessions.send(task.sessionKey, { type: 'RESUME_FAILED', errorCode: 'thread_resume_failed' });
      return approveNewThread(task, conn, gen, cwd, `thread_resume_failed: ${failure.message}`);
    }
    loaded.set(threadId, gen);
    await sessions.send(task.sessionKey, { type: 'RESUME_OK' });
    await recordThreadNode(task.sessionKey);
    logger.info({ sessionKey: task.sessionKey, taskId: task.taskId, threadId }, 'codex thread resumed');
    return { threadId, resumed: true };
  }

  async function ensureThread(task: TaskRecord, cwd: string): Promise<{ threadId: string; resumed: boolean }> {
    return locks.run(`thread:${task.sessionKey}`, async () => {
      // The gate lists its tools when Codex starts it: it must know the task (and its groups) first.
      await writeTaskGate(options.mcpGate, task);
      const pre = preflightMcpCommand(options.mcpCommand);
      if (!pre.ok) {
        logger.error({ taskId: task.taskId, errorCode: pre.errorCode, command: options.mcpCommand }, 'gitea-mcp preflight failed');
        throw new SessionError(pre.errorCode, false, pre.reason);
      }
      let conn: CodexAppServerConnection;
      try {
        conn = await connect();
      } catch (err) {
        throw threadFailure(err, 'app_server_unavailable');
      }
      const gen = supervisor.generation;
      await ensureActor(task);
      const planFor = async (restarted: boolean) => {
        const { state, context } = (await sessions.state(task.sessionKey))!;
        return planThread({ state, threadId: context.threadId, lastErrorCode: context.lastErrorCode, loadedIn: context.threadId ? loaded.get(context.threadId) : undefined, generation: gen, restarted });
      };
      let plan = await planFor(false);
      if (plan.kind === 'restart') {
        await sessions.send(task.sessionKey, { type: 'RESTARTED' });
        plan = await planFor(true);
      }
      switch (plan.kind) {
        case 'reuse':
          return { threadId: plan.threadId, resumed: true };
        case 'resume':
          return resumeThread(task, conn, gen, cwd, plan.threadId);
        case 'approve_new':
          return approveNewThread(task, conn, gen, cwd, plan.reason);
        case 'start':
          if (plan.announce) await sessions.send(task.sessionKey, { type: 'START_THREAD' });
          return startThread(task, conn, gen, cwd);
        case 'closed':
          throw new SessionError('session_closed', false, 'the session of this resource is closed');
        default:
          throw new SessionError('session_not_ready', true, `session in ${(await sessions.state(task.sessionKey))!.state}`);
      }
    });
  }

  return { ensureThread };
}
