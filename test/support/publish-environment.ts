/**
 * The service as its own process against a REAL Gitea (test/support/real-gitea), the real Codex
 * app-server with the scripted agent (src/demo/scripted-agent.ts), and the real
 * official gitea-mcp (test/support/real-gitea-mcp.ts, no fallback) — for change delivery. Two fault-injection seams, both outside the service:
 *
 * - `holdPush()`: a server-side `post-receive.d` hook in Gitea's bare repository that waits while a
 *   file exists — Gitea has updated the ref, the service's `git push` has not got its answer yet;
 * - `holdPulls()`: the service reaches Gitea's REST API through a loopback proxy (CCWEB_GITEA_URL),
 *   which can hold `POST /repos/{o}/{r}/pulls` before forwarding it.
 *
 * Test double: only that proxy (a pass-through, to inject the fault); Gitea itself is real.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { writeRealGiteaMcpWrapper } from './real-gitea-mcp.js';
import { freePort, giteaApi, SERVICE_BOT_PERMISSION, startSeededGitea, type SeededGitea } from './real-gitea/index.js';
import { scriptedAgent } from '../../src/demo/scripted-agent.js';
import { startServiceProcess, type ServiceProcess } from './sandbox/service-process.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel } from '../../src/demo/scripted-model.js';

export interface PublishEnvironment {
  root: string;
  gitea: SeededGitea;
  model: ScriptedModel;
  /** The bot's token with `write:repository` (change delivery pushes and opens pull requests). */
  botToken: string;
  adminToken: string;
  env: Record<string, string>;
  dataDir: string;
  workspaceRoot: string;
  /** One line per git command the service (or the agent) ran: its arguments. */
  gitArgsLog: string;
  /** The repository webhook pointing at the service (Gitea's delivery history, Replay). */
  hookId: number;
  service: ServiceProcess | null;
  startService(): Promise<ServiceProcess>;
  /** Holds the next pushes (after Gitea updated the ref) until the returned release(); resolves `held` when one is held. */
  holdPush(): { held: Promise<void>; release(): void };
  /** Holds the next `POST …/pulls` at the proxy until release() forwards it. */
  holdPulls(): { held: Promise<void>; release(): void };
  /** Holds the next REST request `matches` picks (method, path with query) at the proxy until release() forwards it. */
  holdRequest(matches: (method: string, url: string) => boolean): { held: Promise<void>; release(): void };
  /**
   * Holds every `git <verb> …` the service starts, before the real git runs, until release(); `held`
   * resolves once one waits. A held command the service kills (a stop) never runs at all.
   */
  holdGit(verb: string): { held: Promise<void>; release(): void };
  close(): Promise<void>;
}

export interface PublishEnvironmentOptions {
  /** The hook's events (Gitea API names). Default: Issue Comment and Pull Request Comment (docs/getting-started.md subscribes Pull Request Reviewed too). */
  hookEvents?: string[];
  /** Gitea's concurrent webhook deliveries (RealGiteaOptions.webhookWorkers). */
  giteaWebhookWorkers?: number;
}

export async function startPublishEnvironment(root: string, options: PublishEnvironmentOptions = {}): Promise<PublishEnvironment> {
  mkdirSync(root, { recursive: true });
  // Before Gitea starts: a missing binary is a set-up error, said with the command to run.
  const mcpCommand = writeRealGiteaMcpWrapper(join(root, 'bin', 'gitea-mcp'));
  // Admin, as docs/operations.md asks: the service confirms every commenter's permission with Gitea.
  const gitea = await startSeededGitea({ botPermission: SERVICE_BOT_PERMISSION, ...(options.giteaWebhookWorkers ? { webhookWorkers: options.giteaWebhookWorkers } : {}) });
  const bot = gitea.users.bot;
  const tokenRes = await giteaApi<{ sha1: string }>(gitea.url, { basic: { login: bot.login, password: bot.password } }, 'POST', `/users/${bot.login}/tokens`, {
    name: 'ccweb-delivery',
    scopes: ['write:repository', 'write:issue', 'read:user'],
  }, 201);
  const botToken = tokenRes.body.sha1;

  // The REST pass-through with a hold on the next request a test picks (pull-request creation, …).
  let pullHold: { matches: (method: string, url: string) => boolean; onHeld: () => void; waitRelease: Promise<void> } | null = null;
  const target = new URL(gitea.url);
  const proxy: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const forward = () => {
        const up = request(
          { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
          (r) => {
            res.writeHead(r.statusCode ?? 502, r.headers);
            r.pipe(res);
          },
        );
        up.on('error', () => res.writeHead(502).end());
        up.end(Buffer.concat(chunks));
      };
      const hold = pullHold;
      if (hold && hold.matches(req.method ?? '', req.url ?? '')) {
        pullHold = null;
        hold.onHeld();
        // Forwarded only on release: Gitea creates the pull request after the service may be dead.
        void hold.waitRelease.then(forward);
        return;
      }
      forward();
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;

  const model = await startScriptedModel();
  model.setResponder(scriptedAgent());
  const codexHome = join(root, 'codex-home');
  writeCodexHome(codexHome, { port: model.port, model: 'fake-model' });
  const bin = join(root, 'bin');
  mkdirSync(bin, { recursive: true });

  // Every git the service runs goes through this wrapper, which records its arguments (the token must
  // never be one of them).
  const gitArgsLog = join(root, 'git-args.log');
  const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  // `git-hold-<verb>` in the root holds that verb (holdGit): the wrapper waits before the real git runs.
  writeFileSync(
    join(bin, 'git'),
    `#!/bin/sh\nprintf '%s\\n' "$*" >> '${gitArgsLog}'\nif [ -e '${root}/git-hold-'"$1" ]; then touch '${root}/git-held-'"$1"; while [ -e '${root}/git-hold-'"$1" ]; do sleep 0.1; done; fi\nexec '${realGit}' "$@"\n`,
  );
  chmodSync(join(bin, 'git'), 0o755);

  const port = await freePort();
  const dataDir = join(root, 'data');
  const workspaceRoot = join(dataDir, 'workspaces');
  const webhookSecret = randomBytes(16).toString('hex');
  const adminToken = randomBytes(16).toString('hex');
  const env: Record<string, string> = {
    CCWEB_HOST: '127.0.0.1',
    CCWEB_PORT: String(port),
    CCWEB_DATA_DIR: dataDir,
    CCWEB_WEBHOOK_SECRET: webhookSecret,
    CCWEB_GITEA_URL: proxyUrl,
    // Gitea's own ROOT_URL, which its payloads name: the service reaches it through the proxy above.
    CCWEB_GITEA_PUBLIC_URL: gitea.url,
    CCWEB_GITEA_TOKEN: botToken,
    CCWEB_ADMIN_TOKEN: adminToken,
    CCWEB_GITEA_MCP_COMMAND: mcpCommand,
    // The receipts in English, so the assertions read the words they check.
    CCWEB_LOCALE: 'en',
    CCWEB_LOG_LEVEL: 'warn',
    CODEX_HOME: codexHome,
    PATH: `${bin}:${process.env.PATH ?? ''}`,
  };
  const hookId = await gitea.addWebhook(`http://127.0.0.1:${port}/api/gitea/webhook`, webhookSecret, options.hookEvents ? { events: options.hookEvents } : {});

  const hooksDir = join(gitea.gitea.root, 'repos', gitea.owner, `${gitea.repo}.git`, 'hooks', 'post-receive.d');
  const holdFile = join(root, 'push-hold');
  const heldFile = join(root, 'push-held');

  const envObj: PublishEnvironment = {
    root,
    gitea,
    model,
    botToken,
    adminToken,
    env,
    dataDir,
    workspaceRoot,
    gitArgsLog,
    hookId,
    service: null,
    async startService() {
      envObj.service = await startServiceProcess(env, { timeoutMs: 90_000 });
      return envObj.service;
    },
    holdPush() {
      if (!existsSync(hooksDir)) throw new Error(`no hooks directory at ${hooksDir}`);
      writeFileSync(holdFile, '');
      rmSync(heldFile, { force: true });
      // Runs after Gitea's own post-receive script ("gitea" sorts before "zz"): the ref is updated.
      const script = join(hooksDir, 'zz-ccweb-test-hold');
      writeFileSync(script, `#!/bin/sh\ncat >/dev/null\n[ -e '${holdFile}' ] || exit 0\ntouch '${heldFile}'\nwhile [ -e '${holdFile}' ]; do sleep 0.1; done\nrm -f '${script}'\nexit 0\n`);
      chmodSync(script, 0o755);
      const held = (async () => {
        const deadline = Date.now() + 60_000;
        while (!existsSync(heldFile)) {
          if (Date.now() > deadline) throw new Error('no push was held');
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      return { held, release: () => rmSync(holdFile, { force: true }) };
    },
    holdPulls() {
      return envObj.holdRequest((method, url) => method === 'POST' && /^\/api\/v1\/repos\/[^/]+\/[^/]+\/pulls\/?$/.test(url));
    },
    holdRequest(matches) {
      let onHeld!: () => void;
      const held = new Promise<void>((r) => (onHeld = r));
      let release!: () => void;
      const waitRelease = new Promise<void>((r) => (release = r));
      pullHold = { matches, onHeld, waitRelease };
      return { held, release };
    },
    holdGit(verb) {
      const hold = join(root, `git-hold-${verb}`);
      const heldMark = join(root, `git-held-${verb}`);
      rmSync(heldMark, { force: true });
      writeFileSync(hold, '');
      const held = (async () => {
        const deadline = Date.now() + 90_000;
        while (!existsSync(heldMark)) {
          if (Date.now() > deadline) throw new Error(`no git ${verb} was held`);
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      return { held, release: () => rmSync(hold, { force: true }) };
    },
    async close() {
      rmSync(holdFile, { force: true });
      for (const f of readdirSync(root)) if (f.startsWith('git-hold-')) rmSync(join(root, f), { force: true });
      await envObj.service?.stop().catch(() => undefined);
      await new Promise<void>((r) => proxy.close(() => r()));
      proxy.closeAllConnections?.();
      await model.close();
      await gitea.close();
    },
  };
  return envObj;
}
