/**
 * Which official gitea-mcp binary the demo's service runs (the agent's Gitea tools, behind the service's
 * gate): `CCWEB_GITEA_MCP_COMMAND` when set (the service's own key; the image sets it to the binary it
 * built), else the one scripts/install-gitea-mcp.mjs built for this machine. There is no stand-in.
 */
import { existsSync } from 'node:fs';
import { GITEA_MCP_PIN, giteaMcpInstallPaths, isGiteaMcpInstalled } from '../../scripts/install-gitea-mcp.mjs';

/** The fix where `go install` cannot fetch gitea-mcp: its pinned source archive, named by CCWEB_GITEA_MCP_SOURCE. */
export function giteaMcpSourceHint(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return `CCWEB_GITEA_MCP_SOURCE=${env['CCWEB_GITEA_MCP_SOURCE'] ?? `/path/to/${GITEA_MCP_PIN.sourceArchive}`}`;
}

/** The binary to run, or null when none is installed (installing it needs Go: scripts/install-gitea-mcp.mjs). */
export function findGiteaMcp(env: Readonly<Record<string, string | undefined>> = process.env): string | null {
  const configured = env['CCWEB_GITEA_MCP_COMMAND'];
  if (configured) return configured;
  return isGiteaMcpInstalled(env as NodeJS.ProcessEnv) ? giteaMcpInstallPaths(env as NodeJS.ProcessEnv).binary : null;
}

/** The binary to run; throws, saying how to install it, when there is none. */
export function requireGiteaMcp(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const configured = env['CCWEB_GITEA_MCP_COMMAND'];
  if (configured && configured.includes('/') && !existsSync(configured)) {
    throw new Error(`CCWEB_GITEA_MCP_COMMAND=${configured}: no such file; point it at the gitea-mcp binary or unset it`);
  }
  const found = findGiteaMcp(env);
  if (found) return found;
  const where = giteaMcpInstallPaths(env as NodeJS.ProcessEnv).binary;
  throw new Error(`gitea-mcp is not installed at ${where}; run \`npm run install-gitea-mcp\` (${giteaMcpSourceHint(env)})`);
}
