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
import type { DynamicToolCallParams } from './protocol/ts/v2/DynamicToolCallParams.js';
import type { DynamicToolCallResponse } from './protocol/ts/v2/DynamicToolCallResponse.js';
import { EventEmitter } from 'node:events';
import { createInterface } from 'node:readline';
import { execa, type ResultPromise } from 'execa';
import type { ClientRequest } from './protocol/ts/ClientRequest.js';
import type { ServerNotification } from './protocol/ts/ServerNotification.js';
import type { ToolRequestUserInputQuestion } from './protocol/ts/v2/ToolRequestUserInputQuestion.js';
import { SERVER_NOTIFICATION_METHODS } from './protocol/methods.js';
import { resolveBundledCodex } from './codex-binary.js';
import { AGENT_SHELL_CONFIG_ARGS, agentProcessEnv, defaultAgentPath, prepareAgentHome, type AgentHome } from './agent-environment.js';

/** Environment variables never passed to the app-server process. */
export const SECRET_ENV_VARS: readonly string[] = [
  'CCWEB_GITEA_TOKEN',
  'CCWEB_WEBHOOK_SECRET',
  'CCWEB_ADMIN_TOKEN',
  'GITEA_ACCESS_TOKEN',
  'GITEA_TOKEN',
];

export type RequestId = number | string;

export type ClientRequestMethod = ClientRequest['method'];
export type ClientRequestParams<M extends ClientRequestMethod> = Extract<ClientRequest, { method: M }>['params'];

export type KnownNotification = ServerNotification;
/** A notification as received (method/params), known or not. */
export interface CodexNotification {
  readonly method: string;
  readonly params: any;
  readonly emittedAtMs?: number;
  /** Extracted routing keys (`params.threadId`, `params.turnId`, or `params.thread.id` / `params.turn.id`). */
  readonly threadId: string | null;
  readonly turnId: string | null;
  /** Connection-local receive sequence number (monotonic). */
  readonly seq: number;
}

export type CapabilityName = 'goals' | 'collaborationMode/list' | 'collaborationMode' | 'config/read';

export type CodexConnectionEvent =
  | { type: 'notification'; notification: CodexNotification }
  | { type: 'unknown_notification'; notification: CodexNotification }
  | { type: 'capability_downgrade'; capability: CapabilityName; reason: string }
  | {
      type: 'user_input_requested';
      requestId: RequestId;
      threadId: string | null;
      turnId: string | null;
      itemId: string | null;
      questions: ToolRequestUserInputQuestion[];
    }
  | { type: 'server_request'; id: RequestId; method: string; outcome: 'declined' | 'answered' | 'rejected'; params: unknown }
  | { type: 'stderr'; line: string }
  | { type: 'protocol_error'; line: string; error: string }
  | { type: 'exit'; code: number | null; signal: string | null; expected: boolean };

export type CodexConnectionEventType = CodexConnectionEvent['type'];

export class CodexRpcError extends Error {
  /** JSON-RPC error code (number), or a local code: `request_timeout`, `app_server_exited`, `not_started`. */
  readonly code: number | string;
  readonly data: unknown;
  readonly method: string;
  constructor(method: string, code: number | string, message: string, data?: unknown) {
    super(`${method}: ${message}`);
    this.name = 'CodexRpcError';
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

export interface CodexConnectionOptions {
  /** Executable (default: the native binary bundled with `@openai/codex`, see codex-binary.ts). */
  command?: string;
  /** Arguments (default `['app-server', ...AGENT_SHELL_CONFIG_ARGS]`: no login shell, core env only). */
  args?: string[];
  /** The agent's private HOME (e.g. `<dataDir>/agent-home`); default a throwaway folder removed on exit. */
  agentHome?: string;
  /** PATH of the app-server and the agent's commands; default `defaultAgentPath()`. */
  agentPath?: string;
  cwd?: string;
  /** Base environment (default `process.env`); secrets are removed from it. */
  env?: Record<string, string | undefined>;
  /** Added after secret removal (e.g. `CODEX_HOME`). Secret names are still refused. */
  extraEnv?: Record<string, string>;
  /** Additional variable names to strip. */
  extraSecretEnvVars?: string[];
  clientInfo?: { name: string; version: string; title?: string | null };
  /** Default per-request timeout (ms), 60 s. */
  requestTimeoutMs?: number;
  /** Timeout of `initialize` (ms), 30 s. */
  initializeTimeoutMs?: number;
  /** Timeout of each best-effort probe (ms), 10 s. */
  probeTimeoutMs?: number;
  /** Model override; default `env.CCWEB_CODEX_MODEL`, else the model from `config/read`. */
  model?: string;
  /** Run the goals/collaborationMode probes (default true). */
  probes?: boolean;
  /** Max notifications buffered per thread that has no subscriber yet (default 2000). */
  maxBufferedPerThread?: number;
}

type Pending = {
  method: string;
  resolve: (v: any) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | null;
};

export type ThreadHandler = (n: CodexNotification) => void;

const KNOWN_NOTIFICATIONS = new Set(SERVER_NOTIFICATION_METHODS);

/** The env for the app-server: `base` minus secrets, plus `extra`. */
export function appServerEnv(
  base: Record<string, string | undefined>,
  extra: Record<string, string> = {},
  extraSecrets: string[] = [],
): Record<string, string> {
  const secrets = new Set([...SECRET_ENV_VARS, ...extraSecrets]);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined && !secrets.has(k)) out[k] = v;
  for (const [k, v] of Object.entries(extra)) if (!secrets.has(k)) out[k] = v;
  return out;
}

function routingKeys(params: any): { threadId: string | null; turnId: string | null } {
  if (!params || typeof params !== 'object') return { threadId: null, turnId: null };
  const threadId =
    typeof params.threadId === 'string'
      ? params.threadId
      : typeof params.thread?.id === 'string'
        ? params.thread.id
        : typeof params.conversationId === 'string'
          ? params.conversationId
          : null;
  const turnId = typeof params.turnId === 'string' ? params.turnId : typeof params.turn?.id === 'string' ? params.turn.id : null;
  return { threadId, turnId };
}

export class CodexAppServerConnection {
  readonly options: Readonly<CodexConnectionOptions>;
  private proc: ResultPromise | null = null;
  private readonly emitter = new EventEmitter();
  private readonly pending = new Map<RequestId, Pending>();
  private nextId = 1;
  private notificationSeq = 0;
  private closing = false;
  private exitInfo: { code: number | null; signal: string | null } | null = null;
  private exitPromise: Promise<{ code: number | null; signal: string | null }> | null = null;
  private agentHome: AgentHome | null = null;
  private readonly downgraded = new Set<CapabilityName>();
  private readonly threadSubscribers = new Map<string, Set<ThreadHandler>>();
  private readonly threadBuffers = new Map<string, CodexNotification[]>();

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
    const proc = execa(o.command ?? bundled!.command, o.args ?? ['app-server', ...AGENT_SHELL_CONFIG_ARGS], {
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
      const cfg = await this.request('config/read', {}, { timeoutMs: o.probeTimeoutMs ?? 10_000 });
      const m = (cfg as any)?.config?.model;
      this.configModel = typeof m === 'string' && m.length > 0 ? m : null;
    } catch (err) {
      if (this.exited) throw err;
      this.recordCapabilityDowngrade('config/read', errorText(err));
    }
    const envModel = baseEnv.CCWEB_CODEX_MODEL;
    this.model = o.model ?? (envModel && envModel.length > 0 ? envModel : null) ?? this.configModel;
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
      const res: any = await this.request('collaborationMode/list', {}, { timeoutMs });
      const data: any[] = Array.isArray(res?.data) ? res.data : [];
      this.collaborationModes = data.map((d) => ({ name: String(d?.name ?? ''), mode: d?.mode ?? null }));
      if (!this.collaborationModes.some((m) => m.mode === 'default')) {
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
    return new Promise((resolve, reject) => {
      const p: Pending = { method, resolve, reject, timer: null };
      if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
        p.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new CodexRpcError(method, 'request_timeout', `no response within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.pending.set(id, p);
      this.write({ id, method, params: params ?? {} });
    });
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
    if (line.trim() === '') return;
    let msg: any;
    try {
      msg = JSON.parse(line);
    } catch (err) {
      this.emit({ type: 'protocol_error', line, error: errorText(err) });
      return;
    }
    if (!msg || typeof msg !== 'object') {
      this.emit({ type: 'protocol_error', line, error: 'not an object' });
      return;
    }
    const hasId = msg.id !== undefined && msg.id !== null;
    if (typeof msg.method === 'string' && hasId) {
      void this.onServerRequest(msg.id, msg.method, msg.params);
    } else if (typeof msg.method === 'string') {
      this.onNotification(msg.method, msg.params, msg.emittedAtMs);
    } else if (hasId && ('result' in msg || 'error' in msg)) {
      const p = this.pending.get(msg.id);
      if (!p) {
        this.emit({ type: 'protocol_error', line, error: `response to unknown id ${String(msg.id)}` });
        return;
      }
      this.pending.delete(msg.id);
      if (p.timer) clearTimeout(p.timer);
      if (msg.error) {
        p.reject(new CodexRpcError(p.method, msg.error.code ?? -32603, String(msg.error.message ?? 'error'), msg.error.data));
      } else {
        p.resolve(msg.result);
      }
    } else {
      this.emit({ type: 'protocol_error', line, error: 'unrecognised message' });
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
    if (!n.threadId) return;
    const subs = this.threadSubscribers.get(n.threadId);
    if (subs && subs.size > 0) {
      for (const h of [...subs]) safeCall(h, n);
      return;
    }
    // Nobody listens yet (e.g. notifications racing ahead of a response): buffer them.
    let buf = this.threadBuffers.get(n.threadId);
    if (!buf) {
      buf = [];
      this.threadBuffers.set(n.threadId, buf);
      if (this.threadBuffers.size > 256) {
        const oldest = this.threadBuffers.keys().next().value;
        if (oldest !== undefined) this.threadBuffers.delete(oldest);
      }
    }
    buf.push(n);
    const max = this.options.maxBufferedPerThread ?? 2000;
    if (buf.length > max) buf.splice(0, buf.length - max);
  }

  /**
   * Route every notification carrying `threadId` to `handler`. Notifications for that thread received
   * while it had no subscriber are replayed first (in order). Returns an unsubscribe function.
   */
  subscribeThread(threadId: string, handler: ThreadHandler): () => void {
    let subs = this.threadSubscribers.get(threadId);
    if (!subs) {
      subs = new Set();
      this.threadSubscribers.set(threadId, subs);
    }
    subs.add(handler);
    const buffered = this.threadBuffers.get(threadId);
    if (buffered) {
      this.threadBuffers.delete(threadId);
      for (const n of buffered) safeCall(handler, n);
    }
    return () => {
      const s = this.threadSubscribers.get(threadId);
      s?.delete(handler);
      if (s && s.size === 0) this.threadSubscribers.delete(threadId);
    };
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
    let current = turnId;
    const held: CodexNotification[] = [];
    const deliver = (n: CodexNotification) => {
      if (n.turnId === null || n.turnId === current) handler(n);
    };
    const unsubscribe = this.subscribeThread(threadId, (n) => {
      if (current === null) held.push(n);
      else deliver(n);
    });
    return {
      setTurnId: (id: string) => {
        current = id;
        for (const n of held.splice(0)) deliver(n);
      },
      unsubscribe,
    };
  }

  /** Drop buffered notifications for a thread (e.g. once its task is finished). */
  forgetThread(threadId: string): void {
    this.threadBuffers.delete(threadId);
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

  /** Server → client requests. We run `approvalPolicy: "never"`: nothing is approved. */
  private async onServerRequest(id: RequestId, method: string, params: any): Promise<void> {
    const declined = (result: unknown) => {
      this.respond(id, result);
      this.emit({ type: 'server_request', id, method, outcome: 'declined', params });
    };
    switch (method) {
      case 'item/commandExecution/requestApproval':
      case 'item/fileChange/requestApproval':
        return declined({ decision: 'decline' });
      case 'applyPatchApproval':
      case 'execCommandApproval':
        return declined({ decision: { denied: { rejection: 'ccweb-gitea: approvals are not granted (approvalPolicy never)' } } });
      case 'mcpServer/elicitation/request':
        return declined({ action: 'decline', content: null, _meta: null });
      case 'item/permissions/requestApproval':
        return declined({ permissions: {}, scope: 'turn' });
      case 'item/tool/requestUserInput': {
        const keys = routingKeys(params);
        this.emit({
          type: 'user_input_requested',
          requestId: id,
          threadId: keys.threadId,
          turnId: keys.turnId,
          itemId: typeof params?.itemId === 'string' ? params.itemId : null,
          questions: Array.isArray(params?.questions) ? params.questions : [],
        });
        this.respond(id, { answers: {} });
        this.emit({ type: 'server_request', id, method, outcome: 'answered', params });
        return;
      }
      case 'item/tool/call': {
        // A client-side ("dynamic") tool the service offered on thread/start (change delivery's
        // publish tool). The handler never throws to here: any failure is a `success: false` answer.
        const handler = this.dynamicToolHandler;
        if (!handler) {
          this.respond(id, {
            success: false,
            contentItems: [{ type: 'inputText', text: 'ccweb-gitea: dynamic tools are not supported' }],
          });
          this.emit({ type: 'server_request', id, method, outcome: 'declined', params });
          return;
        }
        let answer: DynamicToolCallResponse;
        try {
          answer = await handler(params as DynamicToolCallParams);
        } catch (err) {
          answer = { success: false, contentItems: [{ type: 'inputText', text: `ccweb-gitea: the tool failed: ${errorText(err).slice(0, 300)}` }] };
        }
        this.respond(id, answer);
        this.emit({ type: 'server_request', id, method, outcome: 'answered', params });
        return;
      }
      default:
        this.respondError(id, -32601, `method not supported by ccweb-gitea: ${method}`);
        this.emit({ type: 'server_request', id, method, outcome: 'rejected', params });
    }
  }

  private onExit(code: number | null, signal: string | null): { code: number | null; signal: string | null } {
    if (this.exitInfo) return this.exitInfo;
    this.exitInfo = { code, signal };
    this.agentHome?.dispose();
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(
        new CodexRpcError(p.method, 'app_server_exited', `app-server exited (code ${String(code)}, signal ${String(signal)})`),
      );
    }
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

function safeCall(h: ThreadHandler, n: CodexNotification): void {
  try {
    h(n);
  } catch {
    /* a subscriber's failure must not break routing */
  }
}

export function errorText(err: unknown): string {
  if (err instanceof CodexRpcError) return `${String(err.code)} ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}
