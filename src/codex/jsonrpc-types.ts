// The vocabulary of the app-server connection (jsonrpc-connection.ts): notifications, events and
// the error every failed request rejects with.
import type { ClientRequest } from './protocol/ts/ClientRequest.js';
import type { ServerNotification } from './protocol/ts/ServerNotification.js';
import type { ToolRequestUserInputQuestion } from './protocol/ts/v2/ToolRequestUserInputQuestion.js';

export interface CodexConnectionOptions {
  /** Executable (default: the native binary bundled with `@openai/codex`, see codex-binary.ts). */
  command?: string;
  /** Arguments (default `['app-server', ...AGENT_SHELL_CONFIG_ARGS]`: no login shell, core env only). */
  args?: string[];
  /**
   * Runs the command under these argv words (the agent containment of src/isolation/agent-containment.ts:
   * `setpriv … unshare … --`), so what the app-server starts dies with it and with the service.
   */
  launcher?: readonly string[];
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

export type ThreadHandler = (n: CodexNotification) => void;

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

/**
 * Codex refused the turn's input for its size: -32602 "Input exceeds the maximum length of 1048576
 * characters." with `data.input_error_code: "input_too_large"` (measured, codex 0.171). Sending it
 * again, or in another shape, cannot help.
 */
export function isInputTooLarge(err: unknown): boolean {
  return err instanceof CodexRpcError && (err.data as { input_error_code?: unknown } | null | undefined)?.input_error_code === 'input_too_large';
}

export function errorText(err: unknown): string {
  if (err instanceof CodexRpcError) return `${String(err.code)} ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}
