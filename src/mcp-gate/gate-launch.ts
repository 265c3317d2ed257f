// The command Codex runs as the thread's gitea MCP server: the gate (entry.mjs → main) under the same
// Node as the service, with the real gitea-mcp named as its child.
import { fileURLToPath } from 'node:url';
import type { GateScope } from './gate-policy.js';

export interface GateLaunchInput {
  /** The real gitea-mcp (CCWEB_GITEA_MCP_COMMAND) and its args. */
  childCommand: string;
  childArgs: string[];
  giteaUrl: string;
  /** The token the child uses: CCWEB_GITEA_MCP_TOKEN, else the bot's. */
  token: string;
  scope: GateScope;
  stateDir: string;
}

export interface GateLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

function gateEntryArgs(): string[] {
  return [fileURLToPath(new URL('./entry.mjs', import.meta.url))];
}

export function gateLaunch(input: GateLaunchInput): GateLaunch {
  return {
    command: process.execPath,
    args: gateEntryArgs(),
    env: {
      GITEA_HOST: input.giteaUrl,
      GITEA_ACCESS_TOKEN: input.token,
      CCWEB_GATE_SCOPE: JSON.stringify(input.scope),
      CCWEB_GATE_STATE_DIR: input.stateDir,
      CCWEB_GATE_CHILD: JSON.stringify({ command: input.childCommand, args: input.childArgs }),
    },
  };
}
