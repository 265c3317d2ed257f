// The command Codex runs as the thread's gitea MCP server: the gate (main.ts) under the same Node as
// the service, with the real gitea-mcp named as its child. From a build (dist/) the compiled gate
// runs as is; from a checkout, through tsx's loader (as `npm start` runs the service).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
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
  const js = fileURLToPath(new URL('./main.js', import.meta.url));
  if (existsSync(js)) return [js];
  const ts = fileURLToPath(new URL('./main.ts', import.meta.url));
  // Resolved to a file URL: the gate's cwd is the workspace, where `tsx` would not resolve.
  const tsx = createRequire(import.meta.url).resolve('tsx');
  return ['--import', new URL(`file://${tsx}`).href, ts];
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
