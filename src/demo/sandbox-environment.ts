/**
 * Everything the service needs around it on the Gitea double, on 127.0.0.1: the double (./gitea-double/
 * sandbox.ts), the scripted agent the real Codex app-server talks to (through CODEX_HOME/config.toml),
 * the official gitea-mcp (./gitea-mcp-command.ts, no stand-in; launched as the service launches it,
 * `gitea-mcp -t stdio -host <url>` with the token in its environment), and the service's configuration
 * as CCWEB_* variables.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { requireGiteaMcp } from './gitea-mcp-command.js';
import type { ScriptedModel } from './scripted-model.js';
import { startScriptedAgent } from './scripted-agent.js';
import { startGiteaSandbox, type GiteaSandbox } from './gitea-double/sandbox.js';

export interface SandboxEnvironment {
  root: string;
  gitea: GiteaSandbox;
  model: ScriptedModel;
  codexHome: string;
  webhookSecret: string;
  adminToken: string;
  /** CCWEB_* configuration plus CODEX_HOME, for `npm start` or `loadConfig({env})`. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/**
 * `port`: the service's (CCWEB_PORT in `env`); `giteaPort`, `modelPort`: the double's and the
 * scripted model's. Each defaults to a free port; all listen on 127.0.0.1. `giteaMcpCommand`: default
 * the installed binary (requireGiteaMcp).
 */
export async function startSandboxEnvironment(
  root: string,
  options: { port?: number; giteaPort?: number; modelPort?: number; giteaMcpCommand?: string } = {},
): Promise<SandboxEnvironment> {
  mkdirSync(root, { recursive: true });
  // First, before anything listens: a missing binary is a set-up error, said with the command to run.
  const mcpCommand = options.giteaMcpCommand ?? requireGiteaMcp();
  const gitea = await startGiteaSandbox({ root, ...(options.giteaPort !== undefined ? { port: options.giteaPort } : {}) });
  let agent: Awaited<ReturnType<typeof startScriptedAgent>>;
  try {
    agent = await startScriptedAgent(root, options.modelPort !== undefined ? { port: options.modelPort } : {});
  } catch (err) {
    await gitea.close();
    throw err;
  }
  const webhookSecret = randomBytes(16).toString('hex');
  const adminToken = randomBytes(16).toString('hex');
  const env: Record<string, string> = {
    CCWEB_HOST: '127.0.0.1',
    CCWEB_PORT: String(options.port ?? 0),
    CCWEB_DATA_DIR: join(root, 'data'),
    CCWEB_WEBHOOK_SECRET: webhookSecret,
    CCWEB_GITEA_URL: gitea.url,
    CCWEB_GITEA_TOKEN: gitea.botToken,
    CCWEB_ADMIN_TOKEN: adminToken,
    CCWEB_GITEA_MCP_COMMAND: mcpCommand,
    CCWEB_LOG_LEVEL: 'warn',
    CODEX_HOME: agent.codexHome,
  };
  return {
    root,
    gitea,
    model: agent.model,
    codexHome: agent.codexHome,
    webhookSecret,
    adminToken,
    env,
    async close() {
      await agent.model.close();
      await gitea.close();
    },
  };
}
