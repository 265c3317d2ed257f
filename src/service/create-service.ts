import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Config } from '../config/index.js';
import { STORE_INDEXES } from '../domain/records.js';
import { createTaskExecutor } from '../executor/task-executor.js';
import { createWorkspaceAdapter } from '../executor/workspace-adapter.js';
import { createGiteaClient, type GiteaClient } from '../gitea/index.js';
import { createApp } from '../http/create-app.js';
import { createIntake } from '../intake/accept-comment.js';
import { leaseOwnerId } from '../leases/lease-owner.js';
import { repoLockKind } from '../leases/repo-lock-actor.js';
import { createLogger, type LogCorrelation, type Logger } from '../observability/logger.js';
import { createMetrics, queuedTasksByRepo, type ServiceMetrics } from '../observability/metrics.js';
import { createOpsRouter } from '../health/ops-router.js';
import { createReadiness } from '../health/readiness.js';
import { DAY_MS, startRetention } from '../retention/retention-sweep.js';
import { DEFAULTS } from '../config/keys.js';
import type { TaskRecord } from '../domain/records.js';
import { createReceiptOutbox } from '../receipts/receipt-outbox.js';
import { ActorRuntime } from '../runtime/actor-runtime.js';
import { createScheduler } from '../scheduler/index.js';
import { appServerKind, createAppServerSupervisor } from '../sessions/app-server-supervisor.js';
import { sessionKind } from '../sessions/session-actor.js';
import { createSessionManager } from '../sessions/session-manager.js';
import { createStore } from '../store/index.js';
import { taskKind } from '../tasks/task-actor.js';
import { createReplyVerification } from '../verification/reply-verification.js';
import { findReplyComments } from '../verification/find-reply.js';
import { parseMarkers } from '../domain/marker.js';
import { createWebhookRouter } from '../webhook/route.js';
import { createOperatorRouters } from '../api/operator-routers.js';
import { allowedRepositoryHosts } from '../webhook/repository-origin.js';
import { cachedPermissionLookup } from '../webhook/permission-cache.js';
import type { RepoPermission } from '../webhook/authorize-actor.js';

export interface ServiceOptions {
  config: Config;
  logger?: Logger;
  /** Extra environment for the Codex app-server (e.g. CODEX_HOME); secrets are stripped anyway. */
  codexEnv?: Record<string, string>;
  /** Extra arguments for the gitea-mcp command (default `-t stdio -host <giteaUrl>`). */
  mcpArgs?: string[];
  mcpStartupTimeoutSec?: number;
  /** Delay before an execution retry. */
  retryDelayMs?: number;
  /** Where the service's own logger writes (default stdout); ignored when `logger` is given. */
  logDestination?: NodeJS.WritableStream;
}

export interface Service {
  url: string;
  botLogin: string;
  logger: Logger;
  metrics: ServiceMetrics;
  close(): Promise<void>;
}

/** The Gitea login the bot posts as: configured, or learned from the token (`GET /user`). */
async function resolveBotLogin(config: Config, gitea: GiteaClient): Promise<string> {
  if (config.botLogin) return config.botLogin;
  const user = await gitea.getCurrentUser();
  if (!user.login) throw new Error('could not learn the bot login from GET /api/v1/user: set CCWEB_BOT_LOGIN');
  return user.login;
}

/**
 * Wires every part into one running service: store → actor runtime (restored) → recovery →
 * app-server → scheduler, receipts, intake and the operators' view on one HTTP server.
 */
export async function startService(options: ServiceOptions): Promise<Service> {
  const { config } = options;
  const correlation: LogCorrelation = {};
  const logger =
    options.logger ??
    createLogger({
      level: config.logLevel,
      secrets: [config.giteaToken, config.adminToken, ...config.webhookSecret],
      correlation,
      ...(options.logDestination ? { destination: options.logDestination } : {}),
    });
  const metrics = createMetrics();
  const gitea = createGiteaClient({ baseUrl: config.giteaUrl, token: config.giteaToken });
  const botLogin = await resolveBotLogin(config, gitea);

  const store = createStore({ dir: join(config.dataDir, 'store'), indexes: STORE_INDEXES });
  metrics.timeStoreCommits(store);
  await store.open();
  correlation.deliveryIdOf = (taskId) => store.get<TaskRecord>('tasks', taskId)?.deliveryId;
  metrics.watchQueue(() => queuedTasksByRepo(store));

  let runtime: ActorRuntime | null = null;
  const getRuntime = () => {
    if (!runtime) throw new Error('runtime not ready');
    return runtime;
  };
  const verification = createReplyVerification({ store, runtime: getRuntime, gitea, botLogin, logger: (msg, fields) => logger.child({ part: 'verifier' }).info(fields, msg) });
  runtime = new ActorRuntime({
    store,
    kinds: [taskKind(), repoLockKind(), sessionKind(), appServerKind(), verification.kind],
    onAlert: (event) => logger.warn({ audit: event }, 'alert'),
  });
  runtime.onTransition((change) => metrics.onTransition(change));
  const restored = await runtime.restoreAll();
  logger.info(restored, 'actors restored');

  let executorRef: ReturnType<typeof createTaskExecutor> | null = null;
  const supervisor = createAppServerSupervisor({
    runtime,
    connection: {
      command: config.codexCommand,
      env: process.env,
      extraEnv: options.codexEnv,
      ...(config.codexModel ? { model: config.codexModel } : {}),
    },
    logger: logger.child({ part: 'app-server' }),
  });
  const sessions = createSessionManager({
    store,
    runtime,
    supervisor,
    giteaUrl: config.giteaUrl,
    giteaToken: config.giteaToken,
    mcpCommand: config.giteaMcpCommand,
    ...(options.mcpArgs ? { mcpArgs: options.mcpArgs } : {}),
    mcpStartupTimeoutSec: options.mcpStartupTimeoutSec ?? 30,
    ...(config.codexModel ? { model: config.codexModel } : {}),
    turnTimeoutMs: config.turnTimeoutMs,
    botLogin,
    logger: logger.child({ part: 'sessions' }),
  });
  const executor = createTaskExecutor({
    store,
    runtime,
    workspace: createWorkspaceAdapter({ root: config.workspaceRoot, token: config.giteaToken, giteaUrl: config.giteaUrl }),
    currentRepository: async (repo) => {
      const id = Number(repo['repoId']);
      if (!Number.isSafeInteger(id) || id <= 0) return null;
      const found = await gitea.getRepositoryById(id);
      return { owner: found.owner.login, name: found.name };
    },
    sessions,
    verification,
    replyExists: async (task, turn) => {
      const marker = parseMarkers(turn.marker)[0];
      if (!marker) return false;
      // Gitea filters `since` on whole seconds of its own clock: a margin, the marker does the matching.
      const since = new Date(Date.parse(turn.startedAt) - 5 * 60_000);
      const comments = await gitea.listIssueComments(task.owner, task.repo, task.resource.number, { since });
      return findReplyComments(comments, botLogin, marker).first !== undefined;
    },
    retryDelayMs: options.retryDelayMs,
    log: (msg, fields) => logger.info(fields, msg),
  });
  executorRef = executor;
  const scheduler = createScheduler({
    store,
    runtime,
    executor,
    owner: leaseOwnerId('default'),
    maxConcurrentTasks: config.maxConcurrentTasks,
    leaseTtlMs: config.leaseTtlMs,
    logger: logger.child({ part: 'scheduler' }),
  });
  const recovery = await scheduler.recover();
  logger.info(recovery, 'restart recovery done');
  const receipts = createReceiptOutbox({ store, runtime, gitea, botLogin, logger: (msg, fields) => logger.child({ part: 'receipts' }).info(fields, msg) });

  const intake = createIntake({
    store,
    runtime,
    botLogin,
    secrets: config.webhookSecret,
    allowUsers: config.allowUsers,
    denyUsers: config.denyUsers,
    repositoryHosts: allowedRepositoryHosts(config.giteaUrl, config.giteaPublicUrl),
    fetchPermission: cachedPermissionLookup(
      async (owner, repo, login) => (await gitea.getCollaboratorPermission(owner, repo, login)).permission as RepoPermission,
    ),
    workspaceRoot: config.workspaceRoot,
    deliveryRetentionMs: (config.deliveryRetentionDays ?? DEFAULTS.deliveryRetentionDays) * DAY_MS,
    onAccepted: () => {
      receipts.kick();
      void scheduler.wake();
    },
    onStop: (taskIds) => taskIds.forEach((id) => executorRef?.abort(id)),
    logger: logger.child({ part: 'intake' }),
  });
  const operators = createOperatorRouters({
    store,
    runtime,
    adminToken: config.adminToken,
    onControlChanged: () => void scheduler.wake(),
    onAbortRequested: (taskId) => executorRef?.abort(taskId),
    logger: logger.child({ part: 'api' }),
  });
  const app = createApp({
    routers: [
      createOpsRouter({
        metrics,
        webhookPath: config.webhookPath,
        readiness: createReadiness({ store, appServerState: () => supervisor.state()?.state }),
      }),
      createWebhookRouter({ intake, path: config.webhookPath, maxBytes: config.webhookMaxBytes }),
      ...operators.routers,
    ],
    logger: logger.child({ part: 'http' }),
  });

  // The app-server starts in the background: intake and the API answer while Codex boots.
  supervisor.start().catch((err: unknown) => logger.error({ err }, 'codex app-server failed to start'));
  await receipts.start();
  scheduler.start();
  const retention = startRetention({
    store,
    policy: {
      deliveryRetentionMs: (config.deliveryRetentionDays ?? DEFAULTS.deliveryRetentionDays) * DAY_MS,
      taskRetentionMs: config.taskRetentionDays === undefined ? null : config.taskRetentionDays * DAY_MS,
      archiveAfterMs: (config.archiveAfterMinutes ?? DEFAULTS.archiveAfterMinutes) * 60_000,
    },
    logger: logger.child({ part: 'retention' }),
  });

  const server: Server = await new Promise((resolve) => {
    const s = app.listen(config.port, config.host, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.host}:${port}`;
  logger.info({ url, botLogin, webhookPath: config.webhookPath }, 'ccweb-gitea listening');

  return {
    url,
    botLogin,
    logger,
    metrics,
    async close() {
      operators.close();
      await new Promise<void>((r) => server.close(() => r()));
      await intake.close();
      await retention.stop();
      receipts.stop();
      await scheduler.stop();
      await supervisor.stop();
      await runtime?.settled();
      runtime?.stopAll();
      await store.close();
    },
  };
}
