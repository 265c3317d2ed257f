/**
 * What the service needs around it on a real Gitea (the build of scripts/install-gitea.mjs, once per
 * machine), on 127.0.0.1: the seeded Gitea (./real-gitea/seed.ts), the scripted agent the real Codex
 * app-server talks to, the official gitea-mcp (./gitea-mcp-command.ts), a repository webhook pointing
 * at where the service will listen, and the service's CCWEB_* configuration. The service port is fixed
 * up front so the webhook keeps pointing at it across restarts.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { requireGiteaMcp } from './gitea-mcp-command.js';
import { freePort } from './real-gitea/gitea-process.js';
import { SERVICE_BOT_PERMISSION, startSeededGitea, type SeededGitea, type SeedOptions } from './real-gitea/seed.js';
import type { ScriptedModel } from './scripted-model.js';
import { startScriptedAgent } from './scripted-agent.js';

export interface RealGiteaEnvironment {
  root: string;
  gitea: SeededGitea;
  model: ScriptedModel;
  codexHome: string;
  webhookSecret: string;
  adminToken: string;
  /** Where the service listens (fixed for this environment). */
  serviceUrl: string;
  webhookUrl: string;
  /** The repository webhook on acme/widget pointing at `webhookUrl`. */
  hookId: number;
  /** CCWEB_* configuration plus CODEX_HOME. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export interface RealGiteaEnvironmentOptions extends Pick<SeedOptions, 'botScopes' | 'forkPullRequest'> {
  /** The service's port (default a free one), Gitea's and the scripted model's (default free ones). */
  port?: number;
  giteaPort?: number;
  modelPort?: number;
  /** Default the installed binary (requireGiteaMcp). */
  giteaMcpCommand?: string;
  /** The webhook's events (Gitea API names). Default Issue Comment and Pull Request Comment. */
  hookEvents?: string[];
}

export async function startRealGiteaEnvironment(root: string, options: RealGiteaEnvironmentOptions = {}): Promise<RealGiteaEnvironment> {
  mkdirSync(root, { recursive: true });
  // Before Gitea starts: a missing binary is a set-up error, said with the command to run.
  const mcpCommand = options.giteaMcpCommand ?? requireGiteaMcp();
  // Admin: the service asks Gitea for every commenter's permission, which Gitea answers only to admins.
  const gitea = await startSeededGitea({
    root: join(root, 'gitea'),
    botPermission: SERVICE_BOT_PERMISSION,
    ...(options.giteaPort !== undefined && options.giteaPort !== 0 ? { port: options.giteaPort } : {}),
    ...(options.botScopes ? { botScopes: options.botScopes } : {}),
    ...(options.forkPullRequest !== undefined ? { forkPullRequest: options.forkPullRequest } : {}),
  });
  let model: ScriptedModel | undefined;
  try {
    const agent = await startScriptedAgent(root, options.modelPort !== undefined ? { port: options.modelPort } : {});
    model = agent.model;
    const webhookSecret = randomBytes(16).toString('hex');
    const adminToken = randomBytes(16).toString('hex');
    const port = options.port || (await freePort());
    const serviceUrl = `http://127.0.0.1:${port}`;
    const webhookUrl = `${serviceUrl}/api/gitea/webhook`;
    const hookId = await gitea.addWebhook(webhookUrl, webhookSecret, options.hookEvents ? { events: options.hookEvents } : {});
    const env: Record<string, string> = {
      CCWEB_HOST: '127.0.0.1',
      CCWEB_PORT: String(port),
      CCWEB_DATA_DIR: join(root, 'data'),
      CCWEB_WEBHOOK_SECRET: webhookSecret,
      CCWEB_GITEA_URL: gitea.url,
      CCWEB_GITEA_TOKEN: gitea.users.bot.token,
      CCWEB_ADMIN_TOKEN: adminToken,
      CCWEB_GITEA_MCP_COMMAND: mcpCommand,
      CCWEB_LOG_LEVEL: 'warn',
      CODEX_HOME: agent.codexHome,
    };
    const m = model;
    return {
      root,
      gitea,
      model: m,
      codexHome: agent.codexHome,
      webhookSecret,
      adminToken,
      serviceUrl,
      webhookUrl,
      hookId,
      env,
      async close() {
        await m.close();
        await gitea.close();
      },
    };
  } catch (e) {
    await model?.close();
    await gitea.close();
    throw e;
  }
}
