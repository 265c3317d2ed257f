// Reading the app-server's JSON Lines: what kind of message a line is, and where a notification
// belongs. Pure; the connection acts on the result.
import type { RequestId } from './jsonrpc-types.js';

export type IncomingMessage =
  | { kind: 'blank' }
  | { kind: 'protocol_error'; error: string }
  /** Server → client request (has a method and an id): must be answered. */
  | { kind: 'server_request'; id: RequestId; method: string; params: any }
  | { kind: 'notification'; method: string; params: any; emittedAtMs?: number }
  | { kind: 'response'; id: RequestId; result: unknown }
  | { kind: 'error_response'; id: RequestId; code: number | string; message: string; data: unknown };

/** Classifies one line (the protocol has no `jsonrpc` field: method+id = request, method = notification, id+result|error = response). */
export function parseLine(line: string): IncomingMessage {
  if (line.trim() === '') return { kind: 'blank' };
  let msg: any;
  try {
    msg = JSON.parse(line);
  } catch (err) {
    return { kind: 'protocol_error', error: err instanceof Error ? err.message : String(err) };
  }
  if (!msg || typeof msg !== 'object') return { kind: 'protocol_error', error: 'not an object' };
  const hasId = msg.id !== undefined && msg.id !== null;
  if (typeof msg.method === 'string' && hasId) return { kind: 'server_request', id: msg.id, method: msg.method, params: msg.params };
  if (typeof msg.method === 'string') {
    return { kind: 'notification', method: msg.method, params: msg.params, ...(msg.emittedAtMs !== undefined ? { emittedAtMs: msg.emittedAtMs } : {}) };
  }
  if (hasId && ('result' in msg || 'error' in msg)) {
    if (msg.error) return { kind: 'error_response', id: msg.id, code: msg.error.code ?? -32603, message: String(msg.error.message ?? 'error'), data: msg.error.data };
    return { kind: 'response', id: msg.id, result: msg.result };
  }
  return { kind: 'protocol_error', error: 'unrecognised message' };
}

/** The thread and turn a message is about: `threadId`/`turnId`, else `thread.id`/`turn.id` (or the legacy `conversationId`). */
export function routingKeys(params: any): { threadId: string | null; turnId: string | null } {
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

/** Effective model: the option, else `CCWEB_CODEX_MODEL` (if not empty), else Codex's own `config/read`. */
export function effectiveModel(option: string | undefined, envModel: string | undefined, configModel: string | null): string | null {
  return option ?? (envModel && envModel.length > 0 ? envModel : null) ?? configModel;
}

/** The model in a `config/read` answer, or null. */
export function configModelOf(cfg: unknown): string | null {
  const m = (cfg as any)?.config?.model;
  return typeof m === 'string' && m.length > 0 ? m : null;
}

/** The collaboration modes of a `collaborationMode/list` answer, and whether the one we use (`default`) is among them. */
export function collaborationModesOf(res: unknown): { modes: Array<{ name: string; mode: string | null }>; hasDefault: boolean } {
  const data: any[] = Array.isArray((res as any)?.data) ? (res as any).data : [];
  const modes = data.map((d) => ({ name: String(d?.name ?? ''), mode: d?.mode ?? null }));
  return { modes, hasDefault: modes.some((m) => m.mode === 'default') };
}
