// The gate's side towards Codex: the MCP methods it serves over newline-delimited JSON-RPC, with
// no SDK (gate-server.ts says why). It frames and answers; every decision on a tool call is
// gate-policy.ts's, and every call is written to the thread's calls file.
//
// Served: `initialize`, `ping`, `tools/list` (the child's tools narrowed by the policy), `tools/call`.
// Any other request is answered "Method not found" (what the SDK's Server answered too); notifications
// are dropped except `notifications/cancelled`, which withholds the answer to a call (the call itself
// has been recorded and may still finish, as before). Nothing Codex sends reaches the child as it
// came: a forwarded call is rebuilt from its name and the policy's arguments.
//
// What Codex 0.169 sends (logged in the red-team e2e run): `initialize` (protocol 2025-06-18,
// capabilities elicitation and experimental `codex/auth-change`), `notifications/initialized`,
// `tools/list` with `_meta.progressToken`, and `tools/call` with `_meta` (its call id and turn metadata),
// which is not forwarded, as before. The gate asks nothing of Codex, so those capabilities go unused.
import { appendGateCall, appendOwnComment, readGateTask, readOwnComments, type GateCallLine } from './gate-files.js';
import { allowedSummary, createdCommentId, decideCall, forwardedArguments, narrowTools, type GateScope, type McpTool } from './gate-policy.js';
import { classify, idFromHead, rpcError, rpcResult, RPC, type Frame, type RpcId } from './jsonrpc-lines.js';

export const GATE_SERVER_NAME = 'ccweb-gitea-gate';

/** A line from Codex longer than this is refused: a tool call's arguments (a comment body) fit many times over. */
export const CODEX_LINE_MAX_BYTES = 8 * 1024 * 1024;

/**
 * The protocol versions the MCP SDK (1.x, `SUPPORTED_PROTOCOL_VERSIONS` in its types.js) accepted,
 * newest first: a client asking for one of them gets it, any other gets the newest.
 */
export const SUPPORTED_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];

export interface ToolResult {
  content: unknown[];
  isError?: boolean;
  [k: string]: unknown;
}

export interface RelayDeps {
  scope: GateScope;
  stateDir: string;
  childTools: readonly McpTool[];
  childVersion: string | undefined;
  /** Forwards one call to the child; rejects with the reason it failed. */
  callChild(name: string, args: Record<string, unknown>): Promise<unknown>;
  /** Writes one line (without its newline) to Codex. */
  send(line: string): void;
  /** Defaults to the process id: call ids in the calls file are `<pid>-<n>`. */
  callIdPrefix?: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function refusal(text: string): ToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/** The child's answer to tools/call, if it has the shape of one (the SDK's CallToolResultSchema, loosely). */
export function toolResultFrom(raw: unknown): ToolResult {
  if (!isObject(raw)) throw new Error('gitea-mcp answered tools/call with something that is not a result object');
  if (raw.content !== undefined && !Array.isArray(raw.content)) throw new Error('gitea-mcp answered tools/call with a content that is not a list');
  if (raw.isError !== undefined && typeof raw.isError !== 'boolean') throw new Error('gitea-mcp answered tools/call with an isError that is not a boolean');
  return { ...raw, content: (raw.content as unknown[] | undefined) ?? [] };
}

function resultText(result: ToolResult): string {
  return result.content.map((c) => (isObject(c) && c.type === 'text' ? String(c.text) : `[${isObject(c) ? String(c.type) : typeof c}]`)).join(' ');
}

export interface Relay {
  receive(frame: Frame): void;
  /** Resolves once every call received so far has been answered (tests). */
  settled(): Promise<void>;
}

export function createRelay(deps: RelayDeps): Relay {
  const { scope, stateDir } = deps;
  const memory = new Map<string, Set<number>>(); // taskId → comments created through this process
  const inFlight = new Map<string, Promise<void>>(); // JSON of the id → its call
  const cancelled = new Set<string>();
  const prefix = deps.callIdPrefix ?? String(process.pid);
  let calls = 0;

  const view = () => {
    const task = readGateTask(stateDir);
    const own = new Set(readOwnComments(stateDir, task.taskId));
    for (const id of (task.taskId && memory.get(task.taskId)) || []) own.add(id);
    return { taskId: task.taskId, extra: task.extra, ownComments: own, ...(task.writesUntil !== undefined ? { writesUntil: task.writesUntil } : {}), now: Date.now() };
  };
  const record = (line: Omit<GateCallLine, 'at'>): boolean => {
    try {
      appendGateCall(stateDir, { at: new Date().toISOString(), ...line });
      return true;
    } catch (err) {
      process.stderr.write(`ccweb-gitea gate: could not write the call log: ${String(err)}\n`);
      return false;
    }
  };

  async function callTool(tool: string, rawArgs: unknown): Promise<ToolResult> {
    const v = view();
    const decision = decideCall(tool, rawArgs, scope, v);
    if (!decision.allow) {
      record({ taskId: v.taskId, tool: tool.slice(0, 80), method: decision.method, place: decision.place, outcome: 'refused', reason: decision.reason });
      return refusal(`ccweb-gitea refused ${tool.slice(0, 80)}${decision.method ? ` ${decision.method}` : ''}: ${decision.reason}. ${allowedSummary(scope, v)}`);
    }
    // Nothing reaches Gitea unrecorded: the intent is written first, and a call whose intent cannot be
    // written (a full disk) is refused.
    const callId = `${prefix}-${++calls}`;
    if (!record({ taskId: v.taskId, tool, method: decision.method, place: decision.place, outcome: 'started', callId })) {
      return refusal(`ccweb-gitea refused ${tool}: the service cannot record calls right now, so none is forwarded; try again later`);
    }
    const t0 = Date.now();
    try {
      const result = toolResultFrom(await deps.callChild(tool, forwardedArguments(rawArgs, scope, decision.rule)));
      const failed = result.isError === true;
      let createdCommentIdValue: number | null = null;
      if (!failed && ((tool === 'issue_write' && decision.method === 'add_comment') || tool === 'create_issue_comment')) {
        createdCommentIdValue = createdCommentId(result);
        if (createdCommentIdValue !== null && v.taskId !== null) {
          const set = memory.get(v.taskId) ?? new Set<number>();
          set.add(createdCommentIdValue);
          memory.set(v.taskId, set);
          try {
            appendOwnComment(stateDir, v.taskId, createdCommentIdValue);
          } catch {
            // kept in memory for this process
          }
        }
      }
      record({
        taskId: v.taskId,
        tool,
        method: decision.method,
        place: decision.place,
        outcome: failed ? 'failed' : 'forwarded',
        callId,
        ...(failed ? { reason: resultText(result).slice(0, 300) } : {}),
        ...(createdCommentIdValue !== null ? { createdCommentId: createdCommentIdValue } : {}),
        durationMs: Date.now() - t0,
      });
      return result;
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      record({ taskId: v.taskId, tool, method: decision.method, place: decision.place, outcome: 'failed', callId, reason: reason.slice(0, 300), durationMs: Date.now() - t0 });
      return refusal(`gitea-mcp failed: ${reason.slice(0, 300)}`);
    }
  }

  function answer(id: RpcId, method: string, params: unknown): void {
    const send = (line: string) => {
      if (!cancelled.delete(JSON.stringify(id))) deps.send(line);
    };
    if (params !== undefined && !isObject(params)) return send(rpcError(id, RPC.invalidParams, `Invalid params: ${method} takes an object`));
    const p = (params ?? {}) as Record<string, unknown>;
    switch (method) {
      case 'initialize': {
        const asked = p.protocolVersion;
        const protocolVersion = typeof asked === 'string' && SUPPORTED_PROTOCOL_VERSIONS.includes(asked) ? asked : SUPPORTED_PROTOCOL_VERSIONS[0];
        return send(rpcResult(id, { protocolVersion, capabilities: { tools: {} }, serverInfo: { name: GATE_SERVER_NAME, version: deps.childVersion ?? 'unknown' } }));
      }
      case 'ping':
        return send(rpcResult(id, {}));
      case 'tools/list':
        return send(rpcResult(id, { tools: narrowTools(deps.childTools, scope, view()) }));
      case 'tools/call': {
        // `arguments` absent or null (a tool without parameters) is none; anything but an object is refused.
        if (typeof p.name !== 'string' || (p.arguments !== undefined && p.arguments !== null && !isObject(p.arguments))) {
          return send(rpcError(id, RPC.invalidParams, 'Invalid params: tools/call takes {"name": string, "arguments": object}'));
        }
        const key = JSON.stringify(id);
        const done = callTool(p.name, p.arguments)
          .then((result) => send(rpcResult(id, result)))
          .catch((err: unknown) => send(rpcError(id, RPC.internalError, `Internal error: ${err instanceof Error ? err.message : String(err)}`)))
          .finally(() => inFlight.delete(key));
        inFlight.set(key, done);
        return;
      }
      default:
        return send(rpcError(id, RPC.methodNotFound, `Method not found: ${method.slice(0, 80)}`));
    }
  }

  return {
    receive(frame) {
      if (frame.kind === 'oversized') {
        deps.send(rpcError(idFromHead(frame.head), RPC.invalidRequest, `Invalid Request: a message longer than ${CODEX_LINE_MAX_BYTES} bytes is not read`));
        return;
      }
      const msg = classify(frame.text);
      switch (msg.kind) {
        case 'invalid':
          deps.send(rpcError(msg.id, msg.code, msg.message));
          return;
        case 'request':
          // Two calls under one id could not be told apart in their answers: the second is refused.
          if (inFlight.has(JSON.stringify(msg.id))) {
            deps.send(rpcError(msg.id, RPC.invalidRequest, 'Invalid Request: a request with this id is still running'));
            return;
          }
          answer(msg.id, msg.method, msg.params);
          return;
        case 'notification':
          if (msg.method === 'notifications/cancelled' && isObject(msg.params)) {
            const key = JSON.stringify(msg.params.requestId);
            if (inFlight.has(key)) cancelled.add(key);
          }
          return;
        case 'response':
          return; // the gate asks Codex nothing
      }
    },
    async settled() {
      while (inFlight.size > 0) await Promise.all([...inFlight.values()]);
    },
  };
}

