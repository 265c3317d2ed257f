// The world `npm run bench:task` runs in: a real Gitea 1.26 with the cached big repository
// imported N times (`POST /repos/migrate` from the local folder: a local clone hardlinks the pack, so
// importing 145 MB takes seconds and the copies share the page cache), the real gitea-mcp behind the
// gate, the scripted model answering at once, and the real service process with change delivery on.
// Every repository gets alice (write), the bot (admin, as docs/operations.md asks), a webhook to the
// service and one issue per task.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeRealGiteaMcpWrapper } from '../test/support/real-gitea-mcp.js';
import { freePort, giteaApi, SERVICE_BOT_PERMISSION, startSeededGitea, type SeededGitea } from '../test/support/real-gitea/index.js';
import { scriptedAgent } from '../src/demo/scripted-agent.js';
import { startServiceProcess, type ServiceProcess } from '../test/support/sandbox/service-process.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel } from '../src/demo/scripted-model.js';

export interface TaskBenchEnv {
  root: string;
  gitea: SeededGitea;
  model: ScriptedModel;
  codexHome: string;
  /** The bot's token with write:repository (change delivery pushes and opens pull requests). */
  botToken: string;
  adminToken: string;
  env: Record<string, string>;
  dataDir: string;
  service: ServiceProcess;
  /** Imports the big repository as acme/<name>, with collaborators and the webhook. */
  importRepo(name: string, source: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * `compiled`: the service as production runs it (`node dist/src/main.js`; its gate then loads the
 * compiled gate instead of TypeScript through tsx, which is most of a thread start from a checkout).
 */
export async function startTaskBenchEnv(root: string, extraEnv: Record<string, string> = {}, options: { compiled?: boolean } = {}): Promise<TaskBenchEnv> {
  mkdirSync(root, { recursive: true });
  const mcpCommand = writeRealGiteaMcpWrapper(join(root, 'bin', 'gitea-mcp'));
  const gitea = await startSeededGitea({ root: join(root, 'gitea'), botPermission: SERVICE_BOT_PERMISSION, importLocalPaths: true, timeoutMs: 120_000 });
  const bot = gitea.users.bot;
  const botToken = (
    await giteaApi<{ sha1: string }>(gitea.url, { basic: { login: bot.login, password: bot.password } }, 'POST', `/users/${bot.login}/tokens`, {
      name: 'ccweb-delivery',
      scopes: ['write:repository', 'write:issue', 'read:user'],
    }, 201)
  ).body.sha1;
  const model = await startScriptedModel();
  model.setResponder(scriptedAgent());
  const codexHome = join(root, 'codex-home');
  writeCodexHome(codexHome, { port: model.port, model: 'fake-model' });
  const port = await freePort();
  const dataDir = join(root, 'data');
  const webhookSecret = randomBytes(16).toString('hex');
  const adminToken = randomBytes(16).toString('hex');
  const env: Record<string, string> = {
    CCWEB_HOST: '127.0.0.1',
    CCWEB_PORT: String(port),
    CCWEB_DATA_DIR: dataDir,
    CCWEB_WEBHOOK_SECRET: webhookSecret,
    CCWEB_GITEA_URL: gitea.url,
    CCWEB_GITEA_TOKEN: botToken,
    CCWEB_ADMIN_TOKEN: adminToken,
    CCWEB_GITEA_MCP_COMMAND: mcpCommand,
    CCWEB_LOCALE: 'en',
    // 8 first clones of 10⁵ files at once on 2 shared cores take minutes each (the floor's too).
    CCWEB_WORKSPACE_TIMEOUT_MS: '1800000',
    CODEX_HOME: codexHome,
    ...extraEnv,
  };
  const service = await startServiceProcess(env, { timeoutMs: 120_000, compiled: options.compiled ?? false });
  const admin = { token: gitea.users.admin.token };
  const asOwner = (method: string, path: string, body?: unknown, expect?: number | number[]) => gitea.api(gitea.owner, method, path, body, expect);
  return {
    root,
    gitea,
    model,
    codexHome,
    botToken,
    adminToken,
    env,
    dataDir,
    service,
    async importRepo(name, source) {
      await giteaApi(gitea.url, admin, 'POST', '/repos/migrate', { clone_addr: source, repo_name: name, repo_owner: gitea.owner, service: 'git', private: true }, 201);
      await asOwner('PUT', `/repos/${gitea.owner}/${name}/collaborators/${gitea.users.writer.login}`, { permission: 'write' }, 204);
      await asOwner('PUT', `/repos/${gitea.owner}/${name}/collaborators/${bot.login}`, { permission: SERVICE_BOT_PERMISSION }, 204);
      await asOwner('POST', `/repos/${gitea.owner}/${name}/hooks`, {
        type: 'gitea',
        active: true,
        events: ['issue_comment', 'pull_request_comment'],
        config: { url: `http://127.0.0.1:${port}/api/gitea/webhook`, content_type: 'json', secret: webhookSecret },
      }, 201);
    },
    async close() {
      await service.stop().catch(() => undefined);
      await model.close();
      await gitea.close();
    },
  };
}
