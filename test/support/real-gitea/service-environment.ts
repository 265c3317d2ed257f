/**
 * What the service needs around it, with a real Gitea instead of the sandbox's stand-in: the seeded
 * real Gitea, the scripted model the real Codex app-server talks to, a `gitea-mcp` command (a wrapper
 * execing the REAL official binary, test/support/real-gitea-mcp.ts, pointed at the real Gitea with
 * the bot's token; no fallback), and the service's CCWEB_* configuration. The service port is fixed for the whole
 * environment so the Gitea webhook keeps pointing at it across restarts.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeRealGiteaMcpWrapper } from '../real-gitea-mcp.js';
import { scriptedAgent } from '../sandbox/scripted-agent.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel } from '../scripted-model/index.js';
import { freePort } from './gitea-process.js';
import { SERVICE_BOT_PERMISSION, startSeededGitea, type SeededGitea } from './seed.js';

export interface RealServiceEnvironment {
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
  /** Always the real gitea-mcp. */
  mcp: 'real';
  close(): Promise<void>;
}

export async function startRealServiceEnvironment(root: string): Promise<RealServiceEnvironment> {
  mkdirSync(root, { recursive: true });
  // Before Gitea starts: a missing binary is a set-up error, said with the command to run.
  const mcpCommand = writeRealGiteaMcpWrapper(join(root, 'bin', 'gitea-mcp'));
  // Admin: the service asks Gitea for every commenter's permission, which Gitea answers only to admins.
  const gitea = await startSeededGitea({ root: join(root, 'gitea'), botPermission: SERVICE_BOT_PERMISSION });
  let model: ScriptedModel | undefined;
  try {
    model = await startScriptedModel();
    model.setResponder(scriptedAgent());
    const codexHome = join(root, 'codex-home');
    writeCodexHome(codexHome, { port: model.port, model: 'fake-model' });

    const webhookSecret = randomBytes(16).toString('hex');
    const adminToken = randomBytes(16).toString('hex');
    const port = await freePort();
    const serviceUrl = `http://127.0.0.1:${port}`;
    const webhookUrl = `${serviceUrl}/api/gitea/webhook`;
    const hookId = await gitea.addWebhook(webhookUrl, webhookSecret);
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
      CODEX_HOME: codexHome,
    };
    const m = model;
    return {
      root,
      gitea,
      model: m,
      codexHome,
      webhookSecret,
      adminToken,
      serviceUrl,
      webhookUrl,
      hookId,
      env,
      mcp: 'real',
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
