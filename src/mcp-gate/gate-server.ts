// The gate's process: the stdio MCP server Codex starts for a thread (`mcp_servers.gitea`), which
// runs the real gitea-mcp as its child and passes through only what gate-policy.ts allows. It runs
// outside the agent's sandbox, like any MCP server of Codex; the token reaches the child only.
//
// Start-up: the child is started and initialised first, so a gitea-mcp that fails or hangs at start
// fails the gate's own `initialize` (Codex reports an MCP start failure for the thread, as before).
// Every tools/call is decided, forwarded or refused, and written to the thread's calls file.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { appendGateCall, appendOwnComment, readGateTask, readOwnComments, type GateCallLine } from './gate-files.js';
import { allowedSummary, createdCommentId, decideCall, forwardedArguments, narrowTools, type GateScope, type McpTool } from './gate-policy.js';

export const GATE_SERVER_NAME = 'ccweb-gitea-gate';

export interface GateEnv {
  scope: GateScope;
  stateDir: string;
  child: { command: string; args: string[] };
  giteaHost: string;
  token: string;
  /** How long the child may take to answer `initialize` and `tools/list`. */
  childStartTimeoutMs: number;
}

/** Reads the gate's configuration from its environment; throws naming the missing variable. */
export function gateEnvFrom(env: NodeJS.ProcessEnv): GateEnv {
  const need = (k: string) => {
    const v = env[k];
    if (!v) throw new Error(`${k} is not set (the service sets it in the thread's mcp_servers.gitea env)`);
    return v;
  };
  const scope = JSON.parse(need('CCWEB_GATE_SCOPE')) as GateScope;
  if (typeof scope.owner !== 'string' || typeof scope.repo !== 'string' || !Number.isSafeInteger(scope.number)) throw new Error('CCWEB_GATE_SCOPE must be {"owner","repo","number"}');
  const child = JSON.parse(need('CCWEB_GATE_CHILD')) as GateEnv['child'];
  if (typeof child.command !== 'string' || !Array.isArray(child.args)) throw new Error('CCWEB_GATE_CHILD must be {"command","args"}');
  return {
    scope,
    stateDir: need('CCWEB_GATE_STATE_DIR'),
    child,
    giteaHost: need('GITEA_HOST'),
    token: need('GITEA_ACCESS_TOKEN'),
    childStartTimeoutMs: Number(env.CCWEB_GATE_CHILD_TIMEOUT_MS ?? 20_000),
  };
}

function refusal(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/** Runs the gate until Codex closes its stdin. */
export async function runGate(cfg: GateEnv): Promise<void> {
  const { scope, stateDir } = cfg;
  // The child sees the Gitea host and token and the few variables a Go binary needs; nothing else
  // of the gate's environment (the gate's own settings included).
  // HOME is the thread's gate folder: gitea-mcp writes `$HOME/.gitea-mcp/gitea-mcp.log` (Gitea's error
  // texts), which must not land in the agent's home, where the agent's commands could read it.
  const home = join(stateDir, 'home');
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const childEnv: Record<string, string> = { GITEA_HOST: cfg.giteaHost, GITEA_ACCESS_TOKEN: cfg.token, HOME: home };
  for (const k of ['PATH', 'TMPDIR', 'SSL_CERT_FILE', 'SSL_CERT_DIR']) if (process.env[k]) childEnv[k] = process.env[k]!;
  const transport = new StdioClientTransport({ command: cfg.child.command, args: cfg.child.args, env: childEnv, stderr: 'inherit' });
  const child = new Client({ name: GATE_SERVER_NAME, version: '1' }, { capabilities: {} });
  const started = (async () => {
    await child.connect(transport);
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    do {
      const page = await child.listTools(cursor ? { cursor } : {});
      tools.push(...(page.tools as McpTool[]));
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  })();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gitea-mcp (${cfg.child.command}) did not answer initialize and tools/list within ${cfg.childStartTimeoutMs} ms`)), cfg.childStartTimeoutMs);
  });
  let childTools: McpTool[];
  try {
    childTools = await Promise.race([started, timeout]);
  } catch (err) {
    // Never leave the child behind (it would also hold the stderr Codex reads).
    await transport.close().catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const childInfo = child.getServerVersion();

  const server = new Server({ name: GATE_SERVER_NAME, version: childInfo?.version ?? 'unknown' }, { capabilities: { tools: {} } });
  const memory = new Map<string, Set<number>>(); // taskId → comments created through this process
  const view = () => {
    const task = readGateTask(stateDir);
    const own = new Set(readOwnComments(stateDir, task.taskId));
    for (const id of (task.taskId && memory.get(task.taskId)) || []) own.add(id);
    return { taskId: task.taskId, extra: task.extra, ownComments: own };
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
  let calls = 0;

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: narrowTools(childTools, scope, view()) as never }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const v = view();
    const tool = req.params.name;
    const decision = decideCall(tool, req.params.arguments, scope, v);
    if (!decision.allow) {
      record({ taskId: v.taskId, tool: tool.slice(0, 80), method: decision.method, place: decision.place, outcome: 'refused', reason: decision.reason });
      return refusal(`ccweb-gitea refused ${tool}${decision.method ? ` ${decision.method}` : ''}: ${decision.reason}. ${allowedSummary(scope, v)}`);
    }
    // Nothing reaches Gitea unrecorded: the intent is written first, and a call whose intent cannot be
    // written (a full disk) is refused.
    const callId = `${process.pid}-${++calls}`;
    if (!record({ taskId: v.taskId, tool, method: decision.method, place: decision.place, outcome: 'started', callId })) {
      return refusal(`ccweb-gitea refused ${tool}: the service cannot record calls right now, so none is forwarded; try again later`);
    }
    const t0 = Date.now();
    try {
      const result = (await child.callTool({ name: tool, arguments: forwardedArguments(req.params.arguments, scope, decision.rule) })) as CallToolResult;
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
  });

  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
    // The child gone (crashed, killed): the thread's tools are gone too; Codex sees the server end.
    child.onclose = () => resolve();
  });
  await server.connect(new StdioServerTransport());
  process.stdin.on('end', () => void server.close());
  await closed;
  await child.close().catch(() => undefined);
}

function resultText(result: CallToolResult): string {
  return (result.content ?? []).map((c) => (c.type === 'text' ? c.text : `[${c.type}]`)).join(' ');
}
