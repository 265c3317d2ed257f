/**
 * Everything the service needs around it, on 127.0.0.1: the sandbox Gitea, the scripted model that
 * the real Codex app-server talks to (through CODEX_HOME/config.toml), a `gitea-mcp` command (a
 * wrapper execing the REAL official binary, test/support/real-gitea-mcp.ts — no fallback: it throws
 * when the binary is not installed; launched as the service launches it, `gitea-mcp -t stdio -host
 * <url>` with the token in its environment), and the service's configuration as CCWEB_* variables.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeRealGiteaMcpWrapper } from '../real-gitea-mcp.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel } from '../scripted-model/index.js';
import { scriptedAgent } from './scripted-agent.js';
import { startGiteaSandbox, type GiteaSandbox } from './gitea-sandbox.js';

export interface SandboxEnvironment {
  root: string;
  gitea: GiteaSandbox;
  model: ScriptedModel;
  codexHome: string;
  webhookSecret: string;
  adminToken: string;
  /** CCWEB_* configuration plus CODEX_HOME, for `npm start` or `loadConfig({env})`. */
  env: Record<string, string>;
  /** Which gitea-mcp runs: always the real binary (kept as a field for `demo`'s banner). */
  mcp: 'real';
  close(): Promise<void>;
}

/**
 * `port`: the service's (CCWEB_PORT in `env`); `giteaPort`, `modelPort`: the sandbox Gitea's and the
 * scripted model's. Each defaults to a free port; all listen on 127.0.0.1.
 */
export async function startSandboxEnvironment(
  root: string,
  options: { port?: number; giteaPort?: number; modelPort?: number } = {},
): Promise<SandboxEnvironment> {
  mkdirSync(root, { recursive: true });
  // First, before anything listens: a missing binary is a set-up error, said with the command to run.
  const mcpCommand = writeRealGiteaMcpWrapper(join(root, 'bin', 'gitea-mcp'));
  const gitea = await startGiteaSandbox({ root, ...(options.giteaPort !== undefined ? { port: options.giteaPort } : {}) });
  let model: ScriptedModel;
  try {
    model = await startScriptedModel([], options.modelPort !== undefined ? { port: options.modelPort } : {});
  } catch (err) {
    await gitea.close();
    throw err;
  }
  model.setResponder(scriptedAgent());
  const codexHome = join(root, 'codex-home');
  writeCodexHome(codexHome, { port: model.port, model: 'fake-model' });

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
    CODEX_HOME: codexHome,
  };
  return {
    root,
    gitea,
    model,
    codexHome,
    webhookSecret,
    adminToken,
    env,
    mcp: 'real',
    async close() {
      await model.close();
      await gitea.close();
    },
  };
}
