// The gate's framing: MCP's stdio transport is JSON-RPC 2.0, one message per line. This module is the
// pure half: cutting a byte stream into lines (bounded, so a peer cannot make the gate buffer without
// end), and sorting one line into request, notification, response or invalid. It stands in for the
// MCP SDK's transports and zod schemas, whose loading would be most of a thread's start
// (docs/bench-task.md); what a message may do is still decided by gate-policy.ts alone.
//
// Conservative by design: the gate is the agent's only way to Gitea, so anything it cannot read as
// exactly one JSON-RPC 2.0 object (an unparsable line, a batch, a wrong `jsonrpc`, an id that is
// neither a string nor an integer) becomes `invalid` with the id kept where one could be read, and is
// answered with an error, never passed on.

export type RpcId = string | number;

/** JSON-RPC 2.0's error codes the gate answers with. */
export const RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const;

export type RpcMessage =
  | { kind: 'request'; id: RpcId; method: string; params: unknown }
  | { kind: 'notification'; method: string; params: unknown }
  | { kind: 'response'; id: RpcId; result?: unknown; error?: { code: number; message: string } }
  | { kind: 'invalid'; id: RpcId | null; code: number; message: string };

export type Frame = { kind: 'line'; text: string } | { kind: 'oversized'; head: string; bytes: number };

const HEAD_BYTES = 512;

/**
 * Cuts a stream into lines. A line longer than `maxBytes` is not kept: its first bytes are handed over
 * as `oversized` (so its id can be answered), the rest is skipped up to the next newline.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  /** While skipping an oversized line: its head, and how many bytes it had so far. */
  private skipping: { head: string; bytes: number } | null = null;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): Frame[] {
    const frames: Frame[] = [];
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl === -1 ? chunk.length : nl;
      this.take(chunk.subarray(start, end));
      if (nl === -1) break;
      const frame = this.finish();
      if (frame) frames.push(frame);
      start = nl + 1;
    }
    return frames;
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.skipping) {
      this.skipping.bytes += piece.length;
      return;
    }
    if (this.size + piece.length > this.maxBytes) {
      const all = Buffer.concat([...this.parts, piece]);
      this.skipping = { head: all.subarray(0, HEAD_BYTES).toString('utf8'), bytes: all.length };
      this.parts = [];
      this.size = 0;
      return;
    }
    // Copied: the chunk's memory may be reused by the stream.
    this.parts.push(Buffer.from(piece));
    this.size += piece.length;
  }

  private finish(): Frame | null {
    if (this.skipping) {
      const { head, bytes } = this.skipping;
      this.skipping = null;
      return { kind: 'oversized', head, bytes };
    }
    // A newline (0x0a) never occurs inside a multi-byte UTF-8 sequence, so each line decodes alone.
    let text = Buffer.concat(this.parts).toString('utf8');
    this.parts = [];
    this.size = 0;
    if (text.endsWith('\r')) text = text.slice(0, -1);
    return text.trim() === '' ? null : { kind: 'line', text };
  }
}

function isId(v: unknown): v is RpcId {
  return typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Sorts one line. Never throws. */
export function classify(text: string): RpcMessage {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return { kind: 'invalid', id: null, code: RPC.parseError, message: 'Parse error: the line is not JSON' };
  }
  if (Array.isArray(msg)) return { kind: 'invalid', id: null, code: RPC.invalidRequest, message: 'Invalid Request: batches are not accepted; send one message per line' };
  if (!isObject(msg)) return { kind: 'invalid', id: null, code: RPC.invalidRequest, message: 'Invalid Request: a message is a JSON object' };
  const hasId = Object.hasOwn(msg, 'id');
  const id = hasId && isId(msg.id) ? msg.id : null;
  if (msg.jsonrpc !== '2.0') return { kind: 'invalid', id, code: RPC.invalidRequest, message: 'Invalid Request: jsonrpc must be "2.0"' };
  if (hasId && id === null) return { kind: 'invalid', id: null, code: RPC.invalidRequest, message: 'Invalid Request: id must be a string or an integer' };
  if (Object.hasOwn(msg, 'params') && !isObject(msg.params) && !Array.isArray(msg.params)) {
    return { kind: 'invalid', id, code: RPC.invalidRequest, message: 'Invalid Request: params must be an object' };
  }
  if (typeof msg.method === 'string') {
    return id === null ? { kind: 'notification', method: msg.method, params: msg.params } : { kind: 'request', id, method: msg.method, params: msg.params };
  }
  if (Object.hasOwn(msg, 'method')) return { kind: 'invalid', id, code: RPC.invalidRequest, message: 'Invalid Request: method must be a string' };
  if (id !== null && Object.hasOwn(msg, 'result') !== Object.hasOwn(msg, 'error')) {
    if (Object.hasOwn(msg, 'result')) return { kind: 'response', id, result: msg.result };
    const e = msg.error;
    if (isObject(e) && typeof e.code === 'number' && typeof e.message === 'string') return { kind: 'response', id, error: { code: e.code, message: e.message } };
  }
  return { kind: 'invalid', id, code: RPC.invalidRequest, message: 'Invalid Request: neither a request, a notification nor a response' };
}

/**
 * The id of a line too long to parse, read from its first bytes (`{"jsonrpc":"2.0","id":7,…` as both
 * Codex and gitea-mcp write it), so the peer gets an answer instead of waiting for its timeout.
 */
export function idFromHead(head: string): RpcId | null {
  const m = /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")\s*[,}]/.exec(head);
  if (!m) return null;
  const raw = m[1]!;
  try {
    const id: unknown = JSON.parse(raw);
    return isId(id) ? id : null;
  } catch {
    return null;
  }
}

export function rpcResult(id: RpcId, result: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result });
}

export function rpcError(id: RpcId | null, code: number, message: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } });
}

export function rpcRequest(id: RpcId, method: string, params?: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
}

export function rpcNotification(method: string, params?: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', method, ...(params === undefined ? {} : { params }) });
}
