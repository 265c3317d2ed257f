// Keeps the service's one `codex app-server` process alive, driving the `app_server` actor
// (machines/app-server.ts) so every step of its life is durable and audited:
// START → spawn → SPAWNED → start-up chain → INITIALIZED (probe failures arrive as
// CAPABILITY_DOWNGRADE, never fatal). When the process dies, every task with a turn in it is handed
// to `onTurnsLost` (the executor moves them to retry_wait), then EXITED → SCHEDULE_RESTART (backoff
// base·2^(n-1), capped) and a timer from `restartAt` sends RESTART_DUE. `stop()` closes stdin, then
// SIGTERM (CodexAppServerConnection.close).
import { CodexAppServerConnection, CodexRpcError, errorText, type CodexConnectionOptions } from '../codex/jsonrpc-connection.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import {
  APP_SERVER_MACHINE_VERSION,
  appServerMachine,
  appServerStateHas,
  appServerStateTakes,
  type AppServerContext,
  type AppServerEvent,
  type AppServerState,
} from '../../machines/app-server.js';
import type { ActorKind } from '../runtime/actor-runtime.js';
import { silentLogger, type SessionLogger } from './session-logger.js';

export const APP_SERVER_KIND = 'app_server';
/** How long a background step whose store write failed waits before it is tried again. */
const BACKGROUND_RETRY_MS = 2_000;

export function appServerKind(): ActorKind<typeof appServerMachine> {
  return { kind: APP_SERVER_KIND, machine: appServerMachine, machineVersion: APP_SERVER_MACHINE_VERSION };
}

export function appServerActorId(serviceId: string): string {
  return `app-server:${serviceId}`;
}

export type TurnsLostReason = 'app_server_exited';

export interface AppServerSupervisorOptions {
  runtime: ActorRuntime;
  /** How to start the process (command, env, CODEX_HOME via extraEnv, …). */
  connection?: CodexConnectionOptions;
  serviceId?: string;
  /** Restart backoff: `baseMs · 2^(consecutiveFailures-1)`, at most `maxMs` (defaults 500 ms, 30 s). */
  backoff?: { baseMs?: number; maxMs?: number };
  /** How long `connection()` waits for a ready server by default (60 s). */
  readyTimeoutMs?: number;
  onTurnsLost?: (taskIds: string[], reason: TurnsLostReason) => void;
  logger?: SessionLogger;
  now?: () => number;
}

export interface AppServerSupervisor {
  readonly actorId: string;
  /** Brings the server up (or back after a service restart); resolves once ready. */
  start(): Promise<CodexAppServerConnection>;
  /** The ready connection; waits through a restart (rejects `app_server_unavailable` after the timeout). */
  connection(opts?: { timeoutMs?: number }): Promise<CodexAppServerConnection>;
  /** The live connection, if any (ready or not). */
  current(): CodexAppServerConnection | null;
  /** Increments with every process started: a thread loaded in generation g is not loaded in g+1. */
  readonly generation: number;
  /** Registers a turn running in the current process; the returned function unregisters it. */
  beginTurn(taskId: string): () => void;
  /** Called once a new process is ready (after start or a restart). */
  onReady(listener: (conn: CodexAppServerConnection, generation: number) => void): () => void;
  state(): Promise<{ state: AppServerState; context: AppServerContext } | undefined>;
  /**
   * Ends the current process at once (SIGKILL) and resolves when it is gone; the supervisor then
   * restarts it as after any exit. For a turn whose stop Codex never confirmed: its commands live in
   * that process's PID namespace (agent-containment.ts), so they end with it, and only then
   * may its task give up the repository lease. Other turns in the process are handed to `onTurnsLost`.
   */
  terminate(reason: string): Promise<void>;
  stop(): Promise<void>;
}

type Deferred<T> = { promise: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void };
function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

export function createAppServerSupervisor(options: AppServerSupervisorOptions): AppServerSupervisor {
  const runtime = options.runtime;
  const serviceId = options.serviceId ?? 'default';
  const actorId = appServerActorId(serviceId);
  const now = options.now ?? Date.now;
  const logger = options.logger ?? silentLogger;
  const baseMs = options.backoff?.baseMs ?? 500;
  const maxMs = options.backoff?.maxMs ?? 30_000;
  const activeTurns = new Set<string>();
  const readyListeners = new Set<(conn: CodexAppServerConnection, generation: number) => void>();
  let conn: CodexAppServerConnection | null = null;
  let ready = deferred<CodexAppServerConnection>();
  let isReady = false;
  let generation = 0;
  let stopping = false;
  let restartTimer: NodeJS.Timeout | null = null;
  // Actor events are sent strictly in order: an exit must never overtake the SPAWNED before it.
  let chain: Promise<unknown> = Promise.resolve();

  const send = (event: AppServerEvent): Promise<boolean> => {
    const next = chain.then(async () => {
      const r = await runtime.send(actorId, event, { by: 'system:app_server_supervisor' });
      if (!r.ok) logger.warn({ actorId, event: event.type, state: r.state, reason: r.reason }, 'app-server event rejected');
      return r.ok;
    });
    chain = next.catch(() => undefined);
    return next;
  };

  const snapshot = async () => {
    const s = await runtime.stateOf(actorId);
    return s ? { state: s.state as AppServerState, context: s.context as AppServerContext } : undefined;
  };

  /**
   * Runs a step nobody awaits (an exit, a timer, a notification). Its events are durable and the store
   * may not answer (a database away): the failure is logged, never left as an unhandled rejection, and
   * a step that can run again (`retry`) is tried again later.
   */
  function inBackground(what: string, step: () => Promise<unknown>, retry = false): void {
    step().catch((err: unknown) => {
      logger.error({ actorId, err: err instanceof Error ? err.message : String(err) }, `app-server ${what} failed${retry ? '; tried again shortly' : ''}`);
      if (retry && !stopping) setTimeout(() => inBackground(what, step, retry), BACKGROUND_RETRY_MS).unref();
    });
  }

  async function launch(): Promise<void> {
    if (stopping) return;
    generation += 1;
    const gen = generation;
    const c = new CodexAppServerConnection(options.connection ?? {});
    conn = c;
    let exitHandled = false;
    const onExit = (code: number | null, signal: string | null, reason: string) => {
      if (exitHandled) return;
      exitHandled = true;
      inBackground('exit handling', () => handleExit(c, code, signal, reason));
    };
    c.on('capability_downgrade', (e) => {
      logger.warn({ capability: e.capability, reason: e.reason.slice(0, 300) }, 'codex capability_downgrade');
      inBackground('capability downgrade', () => send({ type: 'CAPABILITY_DOWNGRADE', capability: e.capability, reason: e.reason.slice(0, 300) }));
    });
    c.on('exit', (e) => onExit(e.code, e.signal, 'exited'));
    c.on('unknown_notification', (e) => logger.info({ method: e.notification.method }, 'codex unknown notification'));
    const started = c.start();
    await send({ type: 'SPAWNED', pid: c.pid ?? null, now: now() });
    try {
      await started;
    } catch (err) {
      // One line an operator can act on: what failed, which keys to look at, what to run.
      logger.error(
        { error: errorText(err).slice(0, 300), generation: gen, keys: ['CCWEB_CODEX_COMMAND', 'CODEX_HOME'] },
        'codex app-server start-up failed [CCWEB_CODEX_COMMAND, CODEX_HOME]: retrying with backoff, /readyz reports it; run `ccweb-gitea doctor` to see why (a broken CODEX_HOME/config.toml, a codex binary that does not run here)',
      );
      await c.close({ graceMs: 200, termMs: 500 }).catch(() => undefined);
      onExit(null, null, 'initialize_failed');
      return;
    }
    if (conn !== c || c.exited) return;
    await send({ type: 'INITIALIZED', now: now(), model: c.model, userAgent: (c.initializeResult?.userAgent as string | undefined) ?? null });
    logger.info({ generation: gen, pid: c.pid, model: c.model, downgrades: [...c.downgrades] }, 'codex app-server ready');
    isReady = true;
    ready.resolve(c);
    for (const l of readyListeners) {
      try {
        l(c, gen);
      } catch {
        /* a listener's failure must not stop the server */
      }
    }
  }

  async function handleExit(c: CodexAppServerConnection, code: number | null, signal: string | null, reason: string): Promise<void> {
    if (conn !== c) return;
    conn = null;
    isReady = false;
    if (stopping) {
      await send({ type: 'EXITED', code, signal, reason: 'closed', now: now() });
      return;
    }
    ready = deferred();
    const lost = [...activeTurns];
    activeTurns.clear();
    logger.warn({ code, signal, reason, lostTasks: lost.length }, 'codex app-server exited');
    if (lost.length > 0) {
      try {
        options.onTurnsLost?.(lost, 'app_server_exited');
      } catch (err) {
        logger.error({ error: errorText(err) }, 'onTurnsLost failed');
      }
    }
    inBackground('exit', () => recordExit(code, signal, reason), true);
  }

  /** The exit made durable and the restart scheduled; again from the start if the store failed midway. */
  async function recordExit(code: number | null, signal: string | null, reason: string): Promise<void> {
    if (stopping) return;
    const s = await snapshot();
    if (!appServerStateHas(s?.state, 'exitRecorded')) await send({ type: 'EXITED', code, signal, reason, now: now() });
    if (appServerStateTakes((await snapshot())?.state, 'RESTART_DUE')) return armRestart();
    const failures = (await snapshot())?.context.consecutiveFailures ?? 1;
    const delayMs = Math.min(maxMs, baseMs * 2 ** Math.max(0, failures - 1));
    await send({ type: 'SCHEDULE_RESTART', now: now(), delayMs });
    await armRestart();
  }

  /** Re-arms the restart timer from the deadline in context (also after a service restart). */
  async function armRestart(): Promise<void> {
    const s = await snapshot();
    if (!s || !appServerStateTakes(s.state, 'RESTART_DUE') || stopping) return;
    if (restartTimer) clearTimeout(restartTimer);
    const wait = Math.max(0, (s.context.restartAt ?? now()) - now());
    restartTimer = setTimeout(() => {
      restartTimer = null;
      inBackground('restart', async () => {
        // Timers run on the monotonic loop clock and can fire a millisecond before the wall clock
        // reaches restartAt; RESTART_DUE then would be refused by the guard (and audited as an
        // illegal event). Wait for the deadline instead.
        if (now() < ((await snapshot())?.context.restartAt ?? 0)) {
          await armRestart();
          return;
        }
        if (stopping) return;
        if (await send({ type: 'RESTART_DUE', now: now() })) await launch();
        else await armRestart();
      });
    }, wait);
  }

  async function start(): Promise<CodexAppServerConnection> {
    stopping = false;
    let s = await snapshot();
    if (!s) {
      await runtime.create(APP_SERVER_KIND, actorId, { serviceId }, { by: 'system:app_server_supervisor' });
      s = await snapshot();
    }
    if (conn) return ready.promise;
    ready = deferred();
    const state = s?.state;
    if (appServerStateHas(state, 'processUp')) {
      // Left by a service that stopped without closing: that process is gone.
      await send({ type: 'EXITED', code: null, signal: null, reason: 'service_restart', now: now() });
      await send({ type: 'SCHEDULE_RESTART', now: now(), delayMs: 0 });
      await armRestart();
    } else if (appServerStateTakes(state, 'EXITED')) {
      // Closing when the service stopped: its exit is recorded, and it starts again.
      await send({ type: 'EXITED', code: null, signal: null, reason: 'service_restart', now: now() });
      if (await send({ type: 'START', now: now() })) inBackground('start', launch);
    } else if (appServerStateTakes(state, 'SCHEDULE_RESTART')) {
      await send({ type: 'SCHEDULE_RESTART', now: now(), delayMs: 0 });
      await armRestart();
    } else if (appServerStateTakes(state, 'RESTART_DUE')) {
      await armRestart();
    } else if (await send({ type: 'START', now: now() })) inBackground('start', launch);
    return ready.promise;
  }

  return {
    actorId,
    start,
    async connection(opts = {}) {
      if (isReady && conn) return conn;
      if (stopping) throw new CodexRpcError('connection', 'app_server_unavailable', 'app-server supervisor stopped');
      const timeoutMs = opts.timeoutMs ?? options.readyTimeoutMs ?? 60_000;
      let timer: NodeJS.Timeout | null = null;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new CodexRpcError('connection', 'app_server_unavailable', `app-server not ready within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        return await Promise.race([ready.promise, timeout]);
      } finally {
        if (timer) clearTimeout(timer);
      }
    },
    current: () => conn,
    get generation() {
      return generation;
    },
    beginTurn(taskId) {
      activeTurns.add(taskId);
      return () => void activeTurns.delete(taskId);
    },
    onReady(listener) {
      readyListeners.add(listener);
      return () => void readyListeners.delete(listener);
    },
    state: snapshot,
    async terminate(reason) {
      const c = conn;
      if (!c || c.exited) return;
      logger.warn({ reason, pid: c.pid }, 'codex app-server terminated');
      c.kill('SIGKILL');
      await c.waitForExit();
    },
    async stop() {
      stopping = true;
      if (restartTimer) clearTimeout(restartTimer);
      restartTimer = null;
      const c = conn;
      ready.reject(new CodexRpcError('connection', 'app_server_unavailable', 'app-server supervisor stopped'));
      const s = (await snapshot())?.state;
      if (c && !c.exited) {
        if (appServerStateHas(s, 'processUp')) await send({ type: 'STOP', now: now() });
        await c.close();
        // handleExit sends EXITED (closing → closed) once the exit event arrives.
        await c.waitForExit();
      } else if (appServerStateTakes(s, 'STOP') && !appServerStateHas(s, 'processUp')) {
        // No process to close: the machine closes at once.
        await send({ type: 'STOP', now: now() });
      }
      await chain;
    },
  };
}
