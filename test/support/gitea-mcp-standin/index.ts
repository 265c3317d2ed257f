/**
 * Where the gitea-mcp stand-in lives and how to launch it (as Codex would: a stdio child process).
 * The server itself is plain ESM (server.mjs) so that `node server.mjs` starts without a TS loader.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { giteaMcpInstallPaths } from '../../../scripts/install-gitea-mcp.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** Absolute path of the stand-in's entry point. */
export const GITEA_MCP_STANDIN_PATH = join(here, 'server.mjs');

/** Where scripts/install-gitea-mcp.mjs puts the real binary (pretest and .ci/run install it). */
export const REAL_GITEA_MCP_PATH = giteaMcpInstallPaths().binary;

export type StandinMode = 'exit-immediately' | 'hang-initialize';

export interface GiteaMcpLaunchOptions {
  /** Gitea root URL (no /api/v1). */
  host: string;
  token: string;
  mode?: StandinMode;
  toolset?: 'both' | 'old' | 'new';
  /** File to append one JSON line per tool call. */
  callLog?: string;
  /** Prefer the real gitea-mcp binary when .tools/bin/gitea-mcp exists. Default false. */
  preferReal?: boolean;
}

export interface McpServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
  real: boolean;
}

/**
 * A launch description in the shape of an MCP server config (`mcp_servers.gitea` for Codex:
 * command/args/env). The token is passed through env, which works with every gitea-mcp version.
 */
export function giteaMcpLaunch(opts: GiteaMcpLaunchOptions): McpServerLaunch {
  const env: Record<string, string> = { GITEA_HOST: opts.host, GITEA_ACCESS_TOKEN: opts.token };
  if (opts.preferReal && !opts.mode && existsSync(REAL_GITEA_MCP_PATH)) {
    return { command: REAL_GITEA_MCP_PATH, args: ['-t', 'stdio', '-host', opts.host], env, real: true };
  }
  if (opts.mode) env.STANDIN_MODE = opts.mode;
  if (opts.toolset) env.STANDIN_TOOLSET = opts.toolset;
  if (opts.callLog) env.STANDIN_CALL_LOG = opts.callLog;
  return { command: process.execPath, args: [GITEA_MCP_STANDIN_PATH, '-t', 'stdio', '-host', opts.host], env, real: false };
}
