// The gate's process: the stdio MCP server Codex starts for a thread (`mcp_servers.gitea`), which
// runs the real gitea-mcp as its child and passes through only what gate-policy.ts allows. It runs
// outside the agent's sandbox, like any MCP server of Codex; the token reaches the child only.
//
// Start-up: the child is started and initialised first, so a gitea-mcp that fails or hangs at start
// fails the gate's own `initialize` (Codex reports an MCP start failure for the thread, as before).
// Every tools/call is decided, forwarded or refused, and written to the thread's calls file
// (gate-relay.ts). Node builtins only: the MCP SDK, zod and ajv take 1–17 s to load under
// load before the gate can answer; the relay frames JSON-RPC lines itself (jsonrpc-lines.ts).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ChildPeer } from './child-peer.js';
import { CODEX_LINE_MAX_BYTES, createRelay, GATE_SERVER_NAME, SUPPORTED_PROTOCOL_VERSIONS } from './gate-relay.js';
import type { GateScope, McpTool } from './gate-policy.js';
import { LineSplitter } from './jsonrpc-lines.js';

export { GATE_SERVER_NAME };

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

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The child's handshake, as the SDK's Client did it: initialize, its version checked, then every page of tools/list. */
async function startChild(child: ChildPeer): Promise<{ tools: McpTool[]; version: string | undefined }> {
  const init = await child.request('initialize', { protocolVersion: SUPPORTED_PROTOCOL_VERSIONS[0], capabilities: {}, clientInfo: { name: GATE_SERVER_NAME, version: '1' } });
  if (!isObject(init) || typeof init.protocolVersion !== 'string' || !SUPPORTED_PROTOCOL_VERSIONS.includes(init.protocolVersion)) {
    throw new Error(`gitea-mcp's protocol version is not supported: ${isObject(init) ? String(init.protocolVersion) : 'no initialize result'}`);
  }
  child.notify('notifications/initialized');
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await child.request('tools/list', cursor ? { cursor } : {});
    if (!isObject(page) || !Array.isArray(page.tools)) throw new Error('gitea-mcp answered tools/list without a tools list');
    for (const t of page.tools) {
      if (!isObject(t) || typeof t.name !== 'string' || !isObject(t.inputSchema)) throw new Error('gitea-mcp listed a tool without a name or an inputSchema');
      tools.push(t as McpTool);
    }
    cursor = typeof page.nextCursor === 'string' ? page.nextCursor : undefined;
  } while (cursor);
  const info = init.serverInfo;
  return { tools, version: isObject(info) && typeof info.version === 'string' ? info.version : undefined };
}

/** Runs the gate until Codex closes its stdin (or the child ends). */
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
  const child = new ChildPeer(cfg.child.command, cfg.child.args, childEnv);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gitea-mcp (${cfg.child.command}) did not answer initialize and tools/list within ${cfg.childStartTimeoutMs} ms`)), cfg.childStartTimeoutMs);
  });
  let started: Awaited<ReturnType<typeof startChild>>;
  try {
    // Codex's `initialize` is read only after this: a child that fails or hangs fails the gate's start.
    started = await Promise.race([startChild(child), timeout]);
  } catch (err) {
    // Never leave the child behind (it would also hold the stderr Codex reads).
    await child.close().catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(timer);
  }

  const relay = createRelay({
    scope,
    stateDir,
    childTools: started.tools,
    childVersion: started.version,
    callChild: (name, args) => child.request('tools/call', { name, arguments: args }),
    send: (line) => void process.stdout.write(`${line}\n`),
  });
  const lines = new LineSplitter(CODEX_LINE_MAX_BYTES);
  const stdinEnded = new Promise<void>((resolve) => {
    process.stdin.on('data', (chunk: Buffer) => {
      for (const frame of lines.push(chunk)) relay.receive(frame);
    });
    process.stdin.on('end', resolve);
    process.stdin.on('close', resolve);
    // Codex gone while an answer is written (EPIPE): end as on the end of its input, not by a crash.
    process.stdout.on('error', () => resolve());
  });
  // The child gone (crashed, killed): the thread's tools are gone too; Codex sees the server end.
  await Promise.race([stdinEnded, child.closed]);
  await child.close().catch(() => undefined);
}
