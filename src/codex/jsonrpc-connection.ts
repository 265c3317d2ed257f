// One long-lived `codex app-server` process spoken to over stdio: JSON-RPC framed as JSON Lines,
// without a `jsonrpc` field (checked against the real binary, codex 0.171).
//
// Start-up chain: spawn → `initialize {clientInfo, capabilities:{experimentalApi:true}}` →
// `initialized` → best-effort probes (`experimentalFeature/enablement/set {goals:true}`,
// `collaborationMode/list`; a failure is ONE `capability_downgrade` event, never fatal) →
// `config/read` (default model, unless `CCWEB_CODEX_MODEL`/`model` is given).
//
// The process environment is the service environment minus secrets: the Gitea token reaches the
// gitea MCP server only through the per-thread `config.mcp_servers.gitea.env` (spec §1.6, §9.2).
// HOME, TMPDIR and PATH are the agent's own and its commands run without a login shell or the
// operator's profile (agent-environment.ts).
import { EventEmitter } from 'node:events';
import { createInterface } from 'node:readline';
import { execa, type ResultPromise } from 'execa';
import { AGENT_SHELL_CONFIG_ARGS, agentProcessEnv, defaultAgentPath, prepareAgentHome, type AgentHome } from './agent-environment.js';
import { appServerEnv } from './app-server-env.js';
import { resolveBundledCodex } from './codex-binary.js';
import { collaborationModesOf, configModelOf, effectiveModel, parseLine, routingKeys } from './jsonrpc-messages.js';
import {
  CodexRpcError,
  errorText,
  type CapabilityName,
  type ClientRequestMethod,
  type ClientRequestParams,
  type CodexConnectionEvent,
  type CodexConnectionEventType,
  type CodexConnectionOptions,
  type CodexNotification,
  type RequestId,
  type ThreadHandler,
} from './jsonrpc-types.js';
import { PendingRequests } from './pending-requests.js';
import { SERVER_NOTIFICATION_METHODS } from './protocol/methods.js';
import type { DynamicToolCallParams } from './protocol/ts/v2/DynamicToolCallParams.js';
import type { DynamicToolCallResponse } from './protocol/ts/v2/DynamicToolCallResponse.js';
import { answerServerRequest, DYNAMIC_TOOLS_UNSUPPORTED, dynamicToolFailure } from './server-requests.js';
import { ThreadRouter, turnFilter } from './thread-router.js';

export { appServerEnv, SECRET_ENV_VARS } from './app-server-env.js';
// Importers keep reading the connection's types from here, as before the split.
export * from './jsonrpc-types.js';

const KNOWN_NOTIFICATIONS = new Set<string>(SERVER_NOTIFICATION_METHODS);

export class CodexAppServerConnection {
  readonly options: Readonly<CodexConnectionOptions>;
  private proc: ResultPromise | null = null;
  private readonly emitter = new EventEmitter();
  private readonly pending = new PendingRequests();
  private nextId = 1;
  private notificationSeq = 0;
  private closing = false;
  private exitInfo: { code: number | null; signal: string | null } | null = null;
  private exitPromise: Promise<{ code: number | null; signal: string | null }> | null = null;
  private agentHome: AgentHome | null = null;
  private readonly downgraded = new Set<CapabilityName>();
  private readonly threads: ThreadRouter;

  /** `initialize` result. */
  initializeResult: { userAgent?: string; codexHome?: string; [k: string]: unknown } | null = null;
  /** Model from `config/read`. */
  configModel: string | null = null;
  /** Effective model: option → `CCWEB_CODEX_MODEL` → `config/read`. */
  model: string | null = null;
  /** Collaboration modes listed by the server, `null` if the probe failed. */
  collaborationModes: Array<{ name: string; mode: string | null }> | null = null;
  /** Whether `experimentalFeature/enablement/set {goals:true}` succeeded. */
  goalsEnabled = false;

  constructor(options: CodexConnectionOptions = {}) {
    this.options = options;
    this.threads = new ThreadRouter(options.maxBufferedPerThread ?? 2000);
    this.emitter.setMaxListeners(0);
  }

  /** Spawn, run the start-up chain, return the connection. */
  static async start(options: CodexConnectionOptions = {}): Promise<CodexAppServerConnection> {
    const conn = new CodexAppServerConnection(options);
    await conn.start();
    return conn;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get exited(): boolean {
    return this.exitInfo !== null;
  }

  /** Resolves when the process has exited. */
  waitForExit(): Promise<{ code: number | null; signal: string | null }> {
    if (!this.exitPromise) return Promise.resolve(this.exitInfo ?? { code: null, signal: null });
    return this.exitPromise;
  }

  /** Capabilities recorded as downgraded (each at most once). */
  get downgrades(): ReadonlySet<CapabilityName> {
    return this.downgraded;
  }

  on<T extends CodexConnectionEventType>(type: T, handler: (e: Extract<CodexConnectionEvent, { type: T }>) => void): () => void {
    this.emitter.on(type, handler);
    return () => this.emitter.off(type, handler);
  }

  /** Every event. */
  onEvent(handler: (e: CodexConnectionEvent) => void): () => void {
    this.emitter.on('*', handler);
    return () => this.emitter.off('*', handler);
  }

  private emit(e: CodexConnectionEvent): void {
    this.emitter.emit(e.type, e);
    this.emitter.emit('*', e);
  }

  /** Record a capability downgrade; emitted once per capability per connection. Returns true if new. */
  recordCapabilityDowngrade(capability: CapabilityName, reason: string): boolean {
    if (this.downgraded.has(capability)) return false;
    this.downgraded.add(capability);
    this.emit({ type: 'capability_downgrade', capability, reason });
    return true;
  }

  async start(): Promise<void> {
    if (this.proc) throw new Error('CodexAppServerConnection already started');
    const o = this.options;
    const baseEnv = o.env ?? process.env;
    const bundled = o.command ? null : resolveBundledCodex();
    const agentHome = (this.agentHome = prepareAgentHome(o.agentHome));
    const env = agentProcessEnv(
      appServerEnv(baseEnv, { ...(bundled?.env ?? {}), ...(o.extraEnv ?? {}) }, o.extraSecretEnvVars ?? []),
      { home: agentHome.home, tmp: agentHome.tmp, path: o.agentPath ?? defaultAgentPath() },
    );
    const command = o.command ?? bundled!.command;
    const args = o.args ?? ['app-server', ...AGENT_SHELL_CONFIG_ARGS];
    const launcher = o.launcher ?? [];
    const proc = execa(launcher[0] ?? command, launcher.length > 0 ? [...launcher.slice(1), command, ...args] : args, {
      cwd: o.cwd,
      env,
      extendEnv: false,
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      reject: false,
      stripFinalNewline: false,
    });
    this.proc = proc;
    proc.stdin?.on('error', () => {
      /* EPIPE after exit: handled by the exit path */
    });
    createInterface({ input: proc.stdout! }).on('line', (line) => this.onLine(line));
    createInterface({ input: proc.stderr! }).on('line', (line) => this.emit({ type: 'stderr', line }));
    this.exitPromise = proc.then(
      (r) => this.onExit(r.exitCode ?? null, r.signal ?? null),
      (err: any) => this.onExit(err?.exitCode ?? null, err?.signal ?? null),
    );

    try {
      this.initializeResult = await this.request(
        'initialize',
        {
          clientInfo: { name: o.clientInfo?.name ?? 'ccweb-gitea', title: o.clientInfo?.title ?? null, version: o.clientInfo?.version ?? '0.1.0' },
          capabilities: { experimentalApi: true, requestAttestation: false },
        },
        { timeoutMs: o.initializeTimeoutMs ?? 30_000 },
      );
      this.notify('initialized');
    } catch (err) {
      await this.close({ graceMs: 200 }).catch(() => undefined);
      throw err;
    }

    if (o.probes !== false) await this.runProbes();

    try {
      this.configModel = configModelOf(await this.request('config/read', {}, { timeoutMs: o.probeTimeoutMs ?? 10_000 }));
    } catch (err) {
      if (this.exited) throw err;
      this.recordCapabilityDowngrade('config/read', errorText(err));
    }
    this.model = effectiveModel(o.model, baseEnv.CCWEB_CODEX_MODEL, this.configModel);
  }

  private async runProbes(): Promise<void> {
    const timeoutMs = this.options.probeTimeoutMs ?? 10_000;
    try {
      await this.request('experimentalFeature/enablement/set', { enablement: { goals: true } }, { timeoutMs });
      this.goalsEnabled = true;
    } catch (err) {
      if (this.exited) throw err;
      this.recordCapabilityDowngrade('goals', errorText(err));
    }
    try {
      const { modes, hasDefault } = collaborationModesOf(await this.request('collaborationMode/list', {}, { timeoutMs }));
      this.collaborationModes = modes;
      if (!hasDefault) {
        this.recordCapabilityDowngrade('collaborationMode/list', 'no "default" collaboration mode listed');
      }
    } catch (err) {
      if (this.exited) throw err;
      this.collaborationModes = null;
      this.recordCapabilityDowngrade('collaborationMode/list', errorText(err));
    }
  }

  /** Whether `turn/start` should carry `collaborationMode` (no downgrade recorded for it). */
  get collaborationModeUsable(): boolean {
    return !this.downgraded.has('collaborationMode') && !this.downgraded.has('collaborationMode/list');
  }

  /** Send a request; resolves with `result`, rejects with `CodexRpcError`. */
  request<M extends ClientRequestMethod, R = any>(method: M, params: ClientRequestParams<M>, opts?: { timeoutMs?: number }): Promise<R>;
  request<R = any>(method: string, params: unknown, opts?: { timeoutMs?: number }): Promise<R>;
  request(method: string, params: unknown, opts: { timeoutMs?: number } = {}): Promise<any> {
    if (!this.proc) return Promise.reject(new CodexRpcError(method, 'not_started', 'connection not started'));
    if (this.exitInfo) return Promise.reject(new CodexRpcError(method, 'app_server_exited', 'app-server has exited'));
    const id = this.nextId++;
    const timeoutMs = opts.timeoutMs ?? this.options.requestTimeoutMs ?? 60_000;
    const answer = this.pending.add(id, method, timeoutMs);
    this.write({ id, method, params: params ?? {} });
    return answer;
  }

  /** Send a notification (client → server). */
  notify(method: string, params?: unknown): void {
    this.write(params === undefined ? { method } : { method, params });
  }

  private write(msg: unknown): void {
    const stdin = this.proc?.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) return;
    stdin.write(`${JSON.stringify(msg)}\n`);
  }

  private onLine(line: string): void {
    const msg = parseLine(line);
    switch (msg.kind) {
      case 'blank':
        return;
      case 'protocol_error':
        return this.emit({ type: 'protocol_error', line, error: msg.error });
      case 'server_request':
        return void this.onServerRequest(msg.id, msg.method, msg.params);
      case 'notification':
        return this.onNotification(msg.method, msg.params, msg.emittedAtMs);
      default: {
        const outcome = msg.kind === 'response' ? ({ ok: true, result: msg.result } as const) : ({ ok: false, ...msg } as const);
        if (!this.pending.settle(msg.id, outcome)) this.emit({ type: 'protocol_error', line, error: `response to unknown id ${String(msg.id)}` });
      }
    }
  }

  private onNotification(method: string, params: any, emittedAtMs?: number): void {
    const keys = routingKeys(params);
    const n: CodexNotification = {
      method,
      params: params ?? {},
      ...(emittedAtMs !== undefined ? { emittedAtMs } : {}),
      threadId: keys.threadId,
      turnId: keys.turnId,
      seq: ++this.notificationSeq,
    };
    if (!KNOWN_NOTIFICATIONS.has(method)) this.emit({ type: 'unknown_notification', notification: n });
    this.emit({ type: 'notification', notification: n });
    this.threads.route(n);
  }

  /**
   * Route every notification carrying `threadId` to `handler`. Notifications for that thread received
   * while it had no subscriber are replayed first (in order). Returns an unsubscribe function.
   */
  subscribeThread(threadId: string, handler: ThreadHandler): () => void {
    return this.threads.subscribe(threadId, handler);
  }

  /**
   * Route notifications of one turn. `turnId` may be unknown yet (`turn/start` in flight): call the
   * returned `setTurnId` once known; until then notifications are held, then the matching ones are
   * delivered in order. Thread-level notifications without a turnId (e.g. `thread/status/changed`)
   * are delivered too.
   */
  onThreadTurn(
    threadId: string,
    turnId: string | null,
    handler: ThreadHandler,
  ): { setTurnId(id: string): void; unsubscribe(): void } {
    const filter = turnFilter(turnId, handler);
    return { setTurnId: filter.setTurnId, unsubscribe: this.subscribeThread(threadId, filter.handle) };
  }

  /** Drop buffered notifications for a thread (e.g. once its task is finished). */
  forgetThread(threadId: string): void {
    this.threads.forget(threadId);
  }

  private respond(id: RequestId, result: unknown): void {
    this.write({ id, result });
  }

  private respondError(id: RequestId, code: number, message: string): void {
    this.write({ id, error: { code, message } });
  }

  private dynamicToolHandler: ((params: DynamicToolCallParams) => Promise<DynamicToolCallResponse>) | null = null;

  /** Who answers `item/tool/call` for the dynamic tools offered on thread/start (null: decline them). */
  setDynamicToolHandler(handler: ((params: DynamicToolCallParams) => Promise<DynamicToolCallResponse>) | null): void {
    this.dynamicToolHandler = handler;
  }

  /** Server → client requests, answered as server-requests.ts decides. */
  private async onServerRequest(id: RequestId, method: string, params: any): Promise<void> {
    const answer = answerServerRequest(method, params);
    switch (answer.kind) {
      case 'declined':
        this.respond(id, answer.result);
        this.emit({ type: 'server_request', id, method, outcome: 'declined', params });
        return;
      case 'user_input': {
        const { threadId, turnId, itemId, questions } = answer;
        this.emit({ type: 'user_input_requested', requestId: id, threadId, turnId, itemId, questions });
        this.respond(id, answer.result);
        this.emit({ type: 'server_request', id, method, outcome: 'answered', params });
        return;
      }
      case 'dynamic_tool': {
        // A client-side ("dynamic") tool the service offered on thread/start (change delivery's
        // publish tool). The handler never throws to here: any failure is a `success: false` answer.
        const handler = this.dynamicToolHandler;
        if (!handler) {
          this.respond(id, DYNAMIC_TOOLS_UNSUPPORTED);
          this.emit({ type: 'server_request', id, method, outcome: 'declined', params });
          return;
        }
        let result: DynamicToolCallResponse;
        try {
          result = await handler(params as DynamicToolCallParams);
        } catch (err) {
          result = dynamicToolFailure(errorText(err));
        }
        this.respond(id, result);
        this.emit({ type: 'server_request', id, method, outcome: 'answered', params });
        return;
      }
      default:
        this.respondError(id, answer.code, answer.message);
        this.emit({ type: 'server_request', id, method, outcome: 'rejected', params });
    }
  }

  private onExit(code: number | null, signal: string | null): { code: number | null; signal: string | null } {
    if (this.exitInfo) return this.exitInfo;
    this.exitInfo = { code, signal };
    this.agentHome?.dispose();
    this.pending.rejectAll((method) => new CodexRpcError(method, 'app_server_exited', `app-server exited (code ${String(code)}, signal ${String(signal)})`));
    this.emit({ type: 'exit', code, signal, expected: this.closing });
    return this.exitInfo;
  }

  /** Graceful stop: close stdin, wait; then SIGTERM; then SIGKILL. */
  async close(opts: { graceMs?: number; termMs?: number } = {}): Promise<{ code: number | null; signal: string | null }> {
    const proc = this.proc;
    if (!proc || !this.exitPromise) return { code: null, signal: null };
    if (this.exitInfo) return this.exitInfo;
    this.closing = true;
    const exit = this.exitPromise;
    const within = (ms: number) =>
      Promise.race([exit.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
    proc.stdin?.end();
    if (await within(opts.graceMs ?? 3_000)) return exit;
    proc.kill('SIGTERM');
    if (await within(opts.termMs ?? 3_000)) return exit;
    proc.kill('SIGKILL');
    return exit;
  }

  /** Send a signal to the process (tests: simulate a crash). */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.proc?.kill(signal);
  }
}
