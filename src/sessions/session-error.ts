import { CodexRpcError, errorText, isInputTooLarge } from '../codex/jsonrpc-connection.js';
import { classifyMcpStartError } from './mcp-preflight.js';

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

/**
 * Maps a thread/start|resume failure to an error code: MCP start failures (not retryable: the
 * configuration must change), transport failures (retryable), else `fallback` — the request itself
 * was refused. `redact` removes secrets from the message.
 */
export function threadFailure(err: unknown, fallback: string, redact: (s: string) => string): SessionError {
  const reason = redact(errorText(err)).slice(0, 500);
  const mcp = classifyMcpStartError(err);
  if (mcp) return new SessionError(mcp, false, reason);
  if (err instanceof CodexRpcError && err.code === 'app_server_exited') return new SessionError('app_server_exited', true, reason);
  if (err instanceof CodexRpcError && (err.code === 'request_timeout' || err.code === 'app_server_unavailable')) {
    return new SessionError('app_server_timeout', true, reason);
  }
  return new SessionError(fallback, true, reason);
}

/** Turn errors that a retry cannot cure: the task fails at once, saying why. */
export const FINAL_TURN_ERRORS: ReadonlySet<string> = new Set(['input_too_large']);

/** The error code of a turn that threw (turn/start refused, or the transport went away). */
export function turnErrorCode(err: unknown): string {
  // Intake refuses a comment too long for the agent; several replies together can still be.
  if (isInputTooLarge(err)) return 'input_too_large';
  if (err instanceof CodexRpcError && err.code === 'app_server_exited') return 'app_server_exited';
  if (err instanceof CodexRpcError && err.code === 'request_timeout') return 'app_server_timeout';
  return 'turn_start_failed';
}
