// MCP preflight (spec §8, three rows): before `thread/start` the configured gitea-mcp command must
// resolve to an executable, and Codex's `thread/start` failures with `required: true` are mapped to
// stable error codes. Each of them fails the task (no retry: the command must be fixed first).
//   command missing             → mcp_command_missing   (checked here, before Codex is asked)
//   process exits at once       → mcp_start_failed      (Codex: "handshaking … connection closed")
//   initialize never answered   → mcp_initialize_failed (Codex: timed out after startup_timeout_sec)
import { accessSync, constants, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CodexRpcError } from '../codex/jsonrpc-connection.js';
import { gateLaunch } from '../mcp-gate/gate-launch.js';
import { redactText } from './session-logger.js';

export type McpErrorCode = 'mcp_command_missing' | 'mcp_start_failed' | 'mcp_initialize_failed';

export type McpPreflightResult = { ok: true; path: string } | { ok: false; errorCode: 'mcp_command_missing'; reason: string };

function isExecutableFile(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The absolute path `command` runs as (a path is checked as is; a bare name is looked up on PATH). */
export function resolveExecutable(command: string, pathEnv: string | undefined = process.env.PATH, cwd = process.cwd()): string | null {
  if (command.length === 0) return null;
  if (command.includes('/')) {
    const p = isAbsolute(command) ? command : resolve(cwd, command);
    return isExecutableFile(p) ? p : null;
  }
  for (const dir of (pathEnv ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, command);
    if (isExecutableFile(p)) return p;
  }
  return null;
}

export function preflightMcpCommand(command: string, opts: { pathEnv?: string } = {}): McpPreflightResult {
  const path = resolveExecutable(command, opts.pathEnv ?? process.env.PATH);
  if (path) return { ok: true, path };
  return { ok: false, errorCode: 'mcp_command_missing', reason: `gitea-mcp command not found or not executable: ${command}` };
}

/**
 * Maps a `thread/start`/`thread/resume` failure to an MCP error code, or null when it is not about
 * the MCP server (Codex answers -32603 "required MCP servers failed to initialize: gitea: <why>").
 */
export function classifyMcpStartError(err: unknown): McpErrorCode | null {
  if (!(err instanceof CodexRpcError) || err.code !== -32603) return null;
  const m = err.message;
  if (!/MCP server/i.test(m)) return null;
  if (/No such file|not found|ENOENT|os error 2\b/i.test(m)) return 'mcp_command_missing';
  if (/timed out|timeout|deadline/i.test(m)) return 'mcp_initialize_failed';
  return 'mcp_start_failed';
}

export type McpProbeResult =
  | { ok: true; tools: string[]; hasCommentTool: boolean; serverName: string | null; serverVersion: string | null }
  | { ok: false; errorCode: McpErrorCode; reason: string };

/** The answer tool: the old `create_issue_comment`, or `issue_write` offering `add_comment`. */
function isCommentTool(t: { name: string; inputSchema?: { properties?: Record<string, unknown> } }): boolean {
  if (t.name === 'create_issue_comment') return true;
  if (t.name !== 'issue_write') return false;
  const methods = (t.inputSchema?.properties?.['method'] as { enum?: unknown } | undefined)?.enum;
  return !Array.isArray(methods) || methods.includes('add_comment');
}

/**
 * The thread's MCP server as the agent gets it: the gate (src/mcp-gate/) with the configured
 * gitea-mcp as its child, for doctor and /readyz. Its version is gitea-mcp's; its comment tool is
 * the gate's narrowed `issue_write`. The probe's gate folder (gitea-mcp's HOME) is thrown away.
 */
export async function probeGatedMcp(
  input: { command: string; args: string[]; giteaUrl: string; token: string },
  opts: { timeoutMs?: number; pathEnv?: string } = {},
): Promise<McpProbeResult> {
  const pre = preflightMcpCommand(input.command, { pathEnv: opts.pathEnv });
  if (!pre.ok) return pre;
  const stateDir = mkdtempSync(join(tmpdir(), 'ccweb-gate-probe-'));
  try {
    const launch = gateLaunch({
      childCommand: pre.path,
      childArgs: input.args,
      giteaUrl: input.giteaUrl,
      token: input.token,
      scope: { owner: 'ccweb-probe', repo: 'probe', number: 1 },
      stateDir,
    });
    return await probeMcp(launch.command, launch.args, { ...launch.env, CCWEB_GATE_CHILD_TIMEOUT_MS: String(Math.max(1_000, (opts.timeoutMs ?? 10_000) - 2_000)) }, opts);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/**
 * An explicit probe for the doctor command: start the server over stdio with the MCP SDK client,
 * complete `initialize`, list the tools. The env (holding the token) goes to the child only; the
 * token never appears in the returned reason.
 */
export async function probeMcp(
  command: string,
  args: string[],
  env: Record<string, string>,
  opts: { timeoutMs?: number; pathEnv?: string } = {},
): Promise<McpProbeResult> {
  const pre = preflightMcpCommand(command, { pathEnv: opts.pathEnv });
  if (!pre.ok) return pre;
  const secrets = Object.entries(env).filter(([k]) => /TOKEN|SECRET/.test(k)).map(([, v]) => v);
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const transport = new StdioClientTransport({
    command: pre.path,
    args,
    env: { PATH: opts.pathEnv ?? process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stderr: 'pipe',
  });
  // The server's last words (the gate says why its gitea-mcp failed) go into the reason.
  let stderrTail = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-400);
  });
  let exited = false;
  transport.onclose = () => {
    exited = true;
  };
  const client = new Client({ name: 'ccweb-gitea-doctor', version: '0.1.0' });
  let timer: NodeJS.Timeout | null = null;
  try {
    await Promise.race([
      client.connect(transport),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no initialize answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    return {
      ok: true,
      tools: names,
      hasCommentTool: tools.some(isCommentTool),
      serverName: client.getServerVersion()?.name ?? null,
      serverVersion: client.getServerVersion()?.version ?? null,
    };
  } catch (err) {
    const said = stderrTail.trim().split('\n').at(-1) ?? '';
    const reason = redactText(`${err instanceof Error ? err.message : String(err)}${said ? ` (${said})` : ''}`, secrets).slice(0, 400);
    return { ok: false, errorCode: exited ? 'mcp_start_failed' : 'mcp_initialize_failed', reason };
  } finally {
    if (timer) clearTimeout(timer);
    await client.close().catch(() => undefined);
  }
}
