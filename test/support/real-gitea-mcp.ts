/**
 * The official gitea-mcp binary every agent turn in the tests runs (scripts/install-gitea-mcp.mjs
 * builds it at the revision pinned in src/config/gitea-mcp-pin.json; pretest and .ci/run install it).
 * There is no fallback: a test that needs it and does not find it fails with the command to run.
 * The stand-in (./gitea-mcp-standin/) stays only for faults the real binary cannot be made to show.
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { giteaMcpInstallPaths, isGiteaMcpInstalled } from '../../scripts/install-gitea-mcp.mjs';
import { giteaMcpSourceHint } from '../../src/demo/gitea-mcp-command.js';

/** Where scripts/install-gitea-mcp.mjs puts the real binary (outside the clone, per version). */
export const REAL_GITEA_MCP_PATH = giteaMcpInstallPaths().binary;

/** The title tag of every test that runs the real gitea-mcp (scripts/vitest-summary.mjs counts them). */
export const REAL_GITEA_MCP_TAG = '[real gitea-mcp]';

/** The absolute path of the installed real gitea-mcp; throws, saying how to install it, when missing. */
export function realGiteaMcpCommand(binary: string = REAL_GITEA_MCP_PATH): string {
  const installed = binary === REAL_GITEA_MCP_PATH ? isGiteaMcpInstalled() && existsSync(binary) : existsSync(binary);
  if (!installed) {
    throw new Error(
      `gitea-mcp is not installed at ${binary}; run \`npm run install-gitea-mcp\` (${giteaMcpSourceHint()})`,
    );
  }
  return binary;
}

/**
 * Writes an executable `gitea-mcp` wrapper at `file` that execs the real binary with the arguments
 * it is given (the service/Codex launch it as `gitea-mcp -t stdio -host <url>`, the token in env),
 * exporting `env` first. The wrapper keeps CCWEB_GITEA_MCP_COMMAND a single path, as production's.
 */
export function writeRealGiteaMcpWrapper(file: string, env: Record<string, string> = {}, binary?: string): string {
  const real = realGiteaMcpCommand(binary);
  mkdirSync(dirname(file), { recursive: true });
  const assignments = Object.entries(env).map(([k, v]) => `${k}='${v}'`).join(' ');
  writeFileSync(file, `#!/bin/sh\n${assignments ? `export ${assignments}\n` : ''}exec '${real}' "$@"\n`);
  chmodSync(file, 0o755);
  return file;
}
