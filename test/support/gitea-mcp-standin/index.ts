/**
 * The gitea-mcp stand-in (server.mjs), kept ONLY for start-up faults the real official binary
 * (test/support/real-gitea-mcp.ts, which every agent turn in the tests runs) cannot be made to show:
 *
 * - `exit-immediately`: the MCP server process exits before the handshake. The real gitea-mcp with
 *   `-t stdio` starts without reaching Gitea and has no flag, environment or bad input that makes it
 *   exit at start (a wrong host or token only fails later, per tool call).
 * - `hang-initialize`: it reads stdin but never answers `initialize`. The real binary answers
 *   `initialize` in ~20 ms whatever Gitea does, so a handshake timeout cannot be produced with it.
 *
 * "A success answer for a comment that was never stored" needs no stand-in: the real binary over the
 * REST double with `faults.loseCreatedComments()` produces exactly that (Gitea answers 201, stores
 * nothing). The stand-in's tool implementations (old and new names) remain for its own test
 * (test/integration/gitea-mcp-standin.test.ts) and are not what any agent turn uses.
 * The server itself is plain ESM (server.mjs) so that `node server.mjs` starts without a TS loader.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export { REAL_GITEA_MCP_PATH } from '../real-gitea-mcp.js';

const here = dirname(fileURLToPath(import.meta.url));

/** Absolute path of the stand-in's entry point. */
export const GITEA_MCP_STANDIN_PATH = join(here, 'server.mjs');

export type StandinMode = 'exit-immediately' | 'hang-initialize';

export interface GiteaMcpLaunchOptions {
  /** Gitea root URL (no /api/v1). */
  host: string;
  token: string;
  mode?: StandinMode;
  toolset?: 'both' | 'old' | 'new';
  /** File to append one JSON line per tool call. */
  callLog?: string;
}

export interface McpServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * A launch description of the stand-in in the shape of an MCP server config (`mcp_servers.gitea`
 * for Codex: command/args/env). The token is passed through env, which works with every gitea-mcp
 * version. For the real binary use test/support/real-gitea-mcp.ts.
 */
export function giteaMcpLaunch(opts: GiteaMcpLaunchOptions): McpServerLaunch {
  const env: Record<string, string> = { GITEA_HOST: opts.host, GITEA_ACCESS_TOKEN: opts.token };
  if (opts.mode) env.STANDIN_MODE = opts.mode;
  if (opts.toolset) env.STANDIN_TOOLSET = opts.toolset;
  if (opts.callLog) env.STANDIN_CALL_LOG = opts.callLog;
  return { command: process.execPath, args: [GITEA_MCP_STANDIN_PATH, '-t', 'stdio', '-host', opts.host], env };
}

/** Executable `gitea-mcp` commands showing the two start-up faults (see the header for why). */
export interface StandinFaultCommands {
  /** Exits 1 before the handshake (STANDIN_MODE=exit-immediately). */
  exit: string;
  /** Never answers `initialize` (STANDIN_MODE=hang-initialize). */
  hang: string;
}

/** Writes `gitea-mcp-exit` and `gitea-mcp-hang` wrappers in `dir` (accepting gitea-mcp's arguments). */
export function writeStandinFaultCommands(dir: string): StandinFaultCommands {
  mkdirSync(dir, { recursive: true });
  const write = (name: string, mode: StandinMode) => {
    const file = join(dir, name);
    writeFileSync(file, `#!/bin/sh\nexport STANDIN_MODE='${mode}'\nexec '${process.execPath}' '${GITEA_MCP_STANDIN_PATH}' "$@"\n`);
    chmodSync(file, 0o755);
    return file;
  };
  return { exit: write('gitea-mcp-exit', 'exit-immediately'), hang: write('gitea-mcp-hang', 'hang-initialize') };
}
