/**
 * Everything the service needs around it, on 127.0.0.1: the sandbox Gitea, the scripted model that
 * the real Codex app-server talks to (through CODEX_HOME/config.toml), a `gitea-mcp` command (the
 * stand-in, launched exactly like the real binary: `gitea-mcp -t stdio -host <url>` with the token in
 * its environment), and the service's configuration as CCWEB_* variables.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GITEA_MCP_STANDIN_PATH, REAL_GITEA_MCP_PATH } from '../gitea-mcp-standin/index.js';
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
  /** Which gitea-mcp runs: the real binary when installed in .tools/bin, else the stand-in. */
  mcp: 'real' | 'standin';
  close(): Promise<void>;
}

/**
 * `port`: the service's (CCWEB_PORT in `env`); `giteaPort`, `modelPort`: the sandbox Gitea's and the
 * scripted model's. Each defaults to a free port; all listen on 127.0.0.1.
 */
export async function startSandboxEnvironment(
  root: string,
  options: { port?: number; giteaPort?: number; modelPort?: number; useRealMcp?: boolean } = {},
): Promise<SandboxEnvironment> {
  mkdirSync(root, { recursive: true });
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

  const bin = join(root, 'bin');
  mkdirSync(bin, { recursive: true });
  const real = options.useRealMcp !== false && existsSync(REAL_GITEA_MCP_PATH);
  const mcpCommand = join(bin, 'gitea-mcp');
  writeFileSync(mcpCommand, `#!/bin/sh\nexec ${real ? `'${REAL_GITEA_MCP_PATH}'` : `'${process.execPath}' '${GITEA_MCP_STANDIN_PATH}'`} "$@"\n`);
  chmodSync(mcpCommand, 0o755);

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
    mcp: real ? 'real' : 'standin',
    async close() {
      await model.close();
      await gitea.close();
    },
  };
}
