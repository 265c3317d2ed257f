import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { isTerminalTaskState, TASK_STATES } from '../../machines/task-lifecycle.js';
import { defaultNodeId, secretValues, type Config } from '../config/index.js';
import { VERSION } from '../config/version.js';
import { STORE_INDEXES } from '../domain/records.js';
import { createTaskExecutor } from '../executor/task-effects.js';
import { createWorkspaceAdapter } from '../executor/workspace-adapter.js';
import { createGiteaPullsClient } from '../publish/gitea-pulls.js';
import { createPublisher } from '../publish/publisher.js';
import { createPublishToolHandler, PUBLISH_TOOL_INSTRUCTIONS, publishToolSpecs } from '../publish/publish-tool.js';
import { createGiteaClient } from '../gitea/index.js';
import { currentRepositoryOnGitea, repositoryNameOnGitea } from '../gitea/current-repository.js';
import { createApp } from '../http/create-app.js';
import { createIntake } from '../intake/intake.js';
import { commentOnGitea } from '../gitea/comment-on-gitea.js';
import { reviewOnGitea } from '../gitea/review-on-gitea.js';
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
import { DEFAULT_LOCALE } from '../messages/catalogue.js';
import { ActorRuntime } from '../runtime/actor-runtime.js';
import { createScheduler } from '../scheduler/index.js';
import { APP_SERVER_KIND, appServerActorId, appServerKind, createAppServerSupervisor } from '../sessions/app-server-supervisor.js';
import { sessionKind } from '../sessions/session-actor.js';
import { createSessionManager } from '../sessions/session-manager.js';
import { AUDIT_CHANNEL, createStore } from '../store/index.js';
import type { AuditEvent } from '../store/types.js';
import { followAudit } from '../api/audit-follower.js';
import { announceClaimable, CLAIMABLE_CHANNEL } from '../scheduler/claimable-channel.js';
import { claimPreference } from '../scheduler/claim-preference.js';
import { taskKind } from '../tasks/task-actor.js';
import { createReplyVerification } from '../verification/reply-verification.js';
import { replyExistsOnGitea } from '../verification/reply-exists.js';
import { createWebhookRouter } from '../intake/webhook-route.js';
import { createOperatorRouters } from '../api/operator-routers.js';
import { allowedRepositoryHosts } from '../webhook/repository-origin.js';
import { createSecurityEvents } from '../intake/security-events.js';
import { checkCodexHome, checkCommand, checkDataDir, listenError, storeDirOf, storeOpenError } from './startup-checks.js';
import { onLeaseRenewed } from './lease-renewed.js';
import { resolveBotLogin, StartAborted } from './resolve-bot-login.js';
import { EXIT_CODES } from './operator-error.js';
import { DEFAULT_HTTP_LIMITS, defaultNodeUrl, listen, type HttpLimits } from './listen.js';
import { startServiceProbes } from './dependency-probes.js';
import { cachedPermissionLookup } from '../webhook/permission-cache.js';
import type { RepoPermission } from '../webhook/authorize-actor.js';
import { createReceiptNotices } from '../receipts/receipt-notice.js';
import { createReceiptProgress, type ReceiptProgress } from '../receipts/receipt-progress-worker.js';
import { createCommitStatuses } from '../receipts/commit-status.js';
import { LIMIT_DEFAULTS } from '../config/limit-keys.js';
import { configuredLimits } from '../usage/limits.js';
import { createProviderHold, PROVIDER_RATE_LIMITED } from '../usage/provider-hold.js';
import { createQuotaCheck } from '../usage/quota-check.js';
import { createUsageAccounting } from '../usage/usage-accounting.js';
import { registerUsageMetrics } from '../usage/usage-metrics.js';
import { agentToolGroupsOf, ingestAllGateCalls } from '../sessions/gate-calls.js';
import { sweepLeftovers } from '../isolation/agent-containment.js';
import { codexHomeOf, serviceCodexSetup, verifyAgentIsolation, type AgentIsolationStatus } from '../isolation/service-isolation.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import { nodeLoads } from '../api/node-load.js';
import type { NodeStatus } from '../api/nodes-view.js';
import type { ActorRecord } from '../runtime/actor-runtime.js';

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
  /** Aborts a start-up that waits for Gitea (SIGTERM during start). */
  signal?: AbortSignal;
  /** When the store stops for good (default: log it and exit 75, so the supervisor restarts the node). */
  onStoreLost?: (error: Error, logger: Logger) => void;
}

/** Tasks whose delivery id the logger keeps at hand (see `correlation.deliveryIdOf`). */
const DELIVERY_ID_CACHE = 10_000;

/** Where a node that took a stop, cancel or abort tells every node to stop that task's turn (payload: the task id). */
const CONTROL_CHANNEL = 'ccweb_control';

function exitOnStoreLost(error: Error, logger: Logger): void {
  logger.fatal({ part: 'store', err: { message: error.message } }, `the store stopped: ${error.message}; exiting (${EXIT_CODES.tempFail}) so a restart reads what the store holds`);
  setImmediate(() => process.exit(EXIT_CODES.tempFail));
}

export interface Service {
  url: string;
  botLogin: string;
  /** What the agent's commands can reach (shown by doctor and the admin page). */
  agentIsolation: AgentIsolationStatus;
  logger: Logger;
  metrics: ServiceMetrics;
  close(): Promise<void>;
}

export { StartAborted } from './resolve-bot-login.js';

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
      secrets: secretValues(config),
      correlation,
      ...(options.logDestination ? { destination: options.logDestination } : {}),
    });
  const metrics = createMetrics();
  // Operator mistakes first, before anything is opened: each is one line with the key and the fix.
  checkDataDir(config.dataDir, { embedded: !config.databaseUrl });
  checkCommand('codex', config.codexCommand);
  checkCommand('gitea-mcp', config.giteaMcpCommand);
  const { sandbox: agentSandbox, connection: codexConnection, containment } = serviceCodexSetup(config, { env: process.env, ...(options.codexEnv ? { codexEnv: options.codexEnv } : {}) });
  checkCodexHome(codexHomeOf(codexConnection));
  // Before anything else starts: a host where the agent's sandbox does not hold refuses to start
  // (IsolationUnavailableError) unless the operator set CCWEB_AGENT_ISOLATION=off.
  const agentIsolation = await verifyAgentIsolation(agentSandbox, codexConnection, logger.child({ part: 'isolation' }));
  const gitea = createGiteaClient({ baseUrl: config.giteaUrl, token: config.giteaToken });
  const botLogin = await resolveBotLogin(config, gitea, logger, options.signal);

  // The embedded store by default; with CCWEB_DATABASE_URL, PostgreSQL, shared by every node as it
  // is: the same tables, the database deciding leases and order. Nothing past this line knows which.
  const nodeId = config.nodeId ?? defaultNodeId(config.dataDir);
  const startedAt = new Date().toISOString();
  const httpLimits: HttpLimits = {
    ...DEFAULT_HTTP_LIMITS,
    headersTimeoutMs: (config.httpHeadersTimeoutSeconds ?? DEFAULTS.httpHeadersTimeoutSeconds) * 1000,
    bodyTimeoutMs: (config.httpBodyTimeoutSeconds ?? DEFAULTS.httpBodyTimeoutSeconds) * 1000,
    maxConnections: config.httpMaxConnections ?? DEFAULTS.httpMaxConnections,
  };
  const heartbeatMs = (config.nodeHeartbeatSeconds ?? DEFAULTS.nodeHeartbeatSeconds) * 1000;
  const storeLost = (error: Error) => (options.onStoreLost ?? exitOnStoreLost)(error, logger);
  const store = config.databaseUrl
    ? createStore({
        url: config.databaseUrl,
        indexes: STORE_INDEXES,
        lockDir: storeDirOf(config),
        node: {
          nodeId,
          // Named in the nodes list and in the refusal of a second process under this id.
          url: config.nodeUrl ?? (config.port !== 0 ? defaultNodeUrl(config.host, config.port) : null),
          version: VERSION,
          heartbeatMs,
          // Another process holds this node id now (this one missed three heartbeats): whatever this
          // one still did would be done twice.
          onNodeIdTaken: () => storeLost(new Error(`node id ${nodeId} was taken by another process while this one missed its heartbeats`)),
          // Meanwhile every write fails and is tried again; past this the node stops (exit 75) for a restart.
          outageMs: (config.databaseOutageSeconds ?? DEFAULTS.databaseOutageSeconds) * 1000,
          onUnreachable: storeLost,
        },
      })
    : createStore({
        dir: storeDirOf(config),
        indexes: STORE_INDEXES,
        // A commit SQLite could not make: what reached the disk is known only to a restart.
        onFailure: storeLost,
      });
  metrics.timeStoreCommits(store);
  try {
    await store.open();
  } catch (error) {
    if (options.signal?.aborted) throw new StartAborted();
    throw storeOpenError(error, config.dataDir);
  }
  // With the data directory's lock held and no app-server of ours started yet, whatever carries this
  // data directory's agent marks was left by an earlier instance (killed, crashed, or without
  // containment): end it before the workspaces are used again.
  const swept = await sweepLeftovers({ stateDir: agentSandbox.stateDir, agentHome: codexConnection.agentHome ?? join(config.dataDir, 'agent-home') });
  if (swept.length > 0) logger.warn({ count: swept.length, processes: swept.slice(0, 20) }, 'ended processes an earlier instance of this data directory left running (agent sandbox, agent commands, app-server)');
  if (containment.warning) logger.warn({ agentContainment: containment.mode }, containment.warning);
  // The logger's mixin is synchronous, and a task's delivery never changes: it is answered from a
  // cache that a read fills on the first miss (a line written before that read answered goes out
  // without it, as one written while the store is closed does).
  const deliveryIds = new Map<string, string>();
  const reading = new Set<string>();
  const rememberDelivery = (taskId: string, deliveryId: string) => {
    deliveryIds.set(taskId, deliveryId);
    if (deliveryIds.size > DELIVERY_ID_CACHE) deliveryIds.delete(deliveryIds.keys().next().value!);
  };
  // The tasks this node may work on from the start are known at once: the unfinished ones, and each
  // new one as intake accepts it (onAccepted below).
  for (const state of TASK_STATES.filter((st) => !isTerminalTaskState(st))) {
    for (const task of await store.byIndex<TaskRecord>('tasks', 'state', state)) rememberDelivery(task.taskId, task.deliveryId);
  }
  correlation.deliveryIdOf = (taskId) => {
    const known = deliveryIds.get(taskId);
    if (known !== undefined || reading.has(taskId)) return known;
    reading.add(taskId);
    void store
      .get<TaskRecord>('tasks', taskId)
      .then(
        (task) => {
          if (task?.deliveryId) rememberDelivery(taskId, task.deliveryId);
        },
        () => undefined,
      )
      .finally(() => reading.delete(taskId));
    return undefined;
  };

  // Every node acts for every repository: the database's lease row lets one task of a repository run at a time.
  const scope: RepositoryScope = EVERY_REPOSITORY;
  // On a shared database each node runs its own app-server: its actor names the node.
  const serviceId = config.databaseUrl ? nodeId : undefined;
  /**
   * The stored actors this node brings to life at start: on a shared database only its own app-server's.
   * Every other actor is read from the store when an event for it comes (a task's or a lock's by the node
   * that holds the repository's lease; the other nodes' copies would be stale).
   */
  const hosts = config.databaseUrl ? (rec: ActorRecord) => rec.kind === APP_SERVER_KIND && rec.actorId === appServerActorId(nodeId) : undefined;
  metrics.watchQueue(() => queuedTasksByRepo(store));

  let runtime: ActorRuntime | null = null;
  const getRuntime = () => {
    if (!runtime) throw new Error('runtime not ready');
    return runtime;
  };
  const verification = createReplyVerification({ store, runtime: getRuntime, gitea, botLogin, logger: (msg, fields) => logger.child({ part: 'verifier' }).info(fields, msg) });
  // On a shared database each node owns its leases under its own name, so a node that starts
  // releases only what its own earlier process held (that process is gone: it held this data
  // directory), never another node's unexpired lease (spec §5.5); those end at their expiry.
  // The embedded store has one node by construction and keeps the name it always had.
  const processOwner = leaseOwnerId(config.databaseUrl ? nodeId : 'default');
  runtime = new ActorRuntime({
    store,
    kinds: [taskKind(), repoLockKind(), sessionKind(), appServerKind(), verification.kind],
    // Any node may write any actor: each is hosted where it is used, and re-read when another node moved it.
    ...(config.databaseUrl ? { shared: true, announce: announceClaimable(processOwner) } : {}),
    onAlert: (event) => logger.warn({ audit: event }, 'alert'),
  });
  runtime.onTransition((change) => metrics.onTransition(change));
  const restored = await runtime.restoreAll(hosts);
  logger.info(restored, 'actors restored');

  // Usage and budgets (src/usage/): limits from the configuration, per-repository overrides from the
  // store; the provider's rate limits hold the scheduler.
  const limits = configuredLimits(config);
  const providerHold = await createProviderHold({
    store,
    defaultBackoffMs: (config.providerBackoffSeconds ?? LIMIT_DEFAULTS.providerBackoffSeconds) * 1000,
    logger: logger.child({ part: 'usage' }),
  });
  const usageMetrics = registerUsageMetrics(metrics.registry, store, providerHold);
  const usage = createUsageAccounting({
    store,
    limits,
    providerHold,
    events: { onTurnRecorded: (u, _task, stoppedBy) => usageMetrics.onTurnRecorded(u, stoppedBy) },
  });

  let executorRef: ReturnType<typeof createTaskExecutor> | null = null;
  let schedulerRef: { writeDeadline(taskId: string): number | undefined } | null = null;
  let progressRef: ReceiptProgress | null = null;
  const supervisor = createAppServerSupervisor({
    runtime,
    // Every node runs its own app-server when all of them work at once: the actor names the node.
    ...(serviceId ? { serviceId } : {}),
    connection: {
      ...codexConnection,
      ...(config.codexModel ? { model: config.codexModel } : {}),
    },
    logger: logger.child({ part: 'app-server' }),
  });
  // Readiness asks for the app-server's state synchronously: it is kept from the actor's transitions,
  // and read once for the state stored before them (a transition seen during that read wins).
  let appServerState: string | undefined;
  let appServerMoved = false;
  runtime.onTransition((change) => {
    if (change.actorId !== supervisor.actorId) return;
    appServerState = change.toState;
    appServerMoved = true;
  });
  const storedAppServerState = (await supervisor.state())?.state;
  if (!appServerMoved) appServerState = storedAppServerState;
  const publisher = createPublisher({
    store,
    gitea: createGiteaPullsClient({ baseUrl: config.giteaUrl, token: config.giteaToken }),
    token: config.giteaToken,
    botLogin,
    giteaUrl: config.giteaUrl,
    workspaceRoot: config.workspaceRoot,
    patchDir: join(config.dataDir, 'patches'),
    mode: config.delivery ?? DEFAULTS.delivery,
    branchPrefix: config.branchPrefix ?? DEFAULTS.branchPrefix,
    log: (msg, fields) => logger.child({ part: 'publisher' }).info(fields, msg),
    onOutcome: (outcome) => metrics.observePublish(outcome),
  });
  supervisor.onReady((conn) => {
    conn.on('notification', (e) => {
      if (e.notification.method === 'account/rateLimits/updated') providerHold.observeRateLimits(e.notification.params);
    });
  });
  const sessions = createSessionManager({
    ...(config.databaseUrl ? { nodeId } : {}),
    store,
    runtime,
    supervisor,
    giteaUrl: config.giteaUrl,
    giteaToken: config.giteaToken,
    mcpCommand: config.giteaMcpCommand,
    ...(options.mcpArgs ? { mcpArgs: options.mcpArgs } : {}),
    mcpStartupTimeoutSec: options.mcpStartupTimeoutSec ?? 30,
    mcpGate: {
      dataDir: config.dataDir,
      ...(config.giteaMcpToken ? { token: config.giteaMcpToken } : {}),
      extraFor: (task) => agentToolGroupsOf(store, task.repoKey),
      onCall: (line) => metrics.observeAgentGiteaCall(line.tool, line.outcome),
      // Several nodes: the agent's Gitea writes go through only while this node's lease of the task is
      // renewed in time (a task it runs no lease of: none).
      ...(config.databaseUrl ? { writesUntil: (taskId: string) => schedulerRef?.writeDeadline(taskId) ?? 0 } : {}),
    },
    ...(config.codexModel ? { model: config.codexModel } : {}),
    turnTimeoutMs: config.turnTimeoutMs,
    botLogin,
    agentSandbox,
    logger: logger.child({ part: 'sessions' }),
    // Change delivery: the agent can publish its change itself and link the pull request in its answer.
    ...((config.delivery ?? DEFAULTS.delivery) !== 'off'
      ? { dynamicTools: { specs: publishToolSpecs(), instructions: PUBLISH_TOOL_INSTRUCTIONS, call: createPublishToolHandler(publisher) } }
      : {}),
    usage,
    onStep: (taskId, step) => progressRef?.noteStep(taskId, step),
  });
  const executor = createTaskExecutor({
    store,
    runtime,
    workspace: createWorkspaceAdapter({
      root: config.workspaceRoot,
      token: config.giteaToken,
      giteaUrl: config.giteaUrl,
      timeoutMs: config.workspaceTimeoutMs,
      worktrees: { branchPrefix: config.branchPrefix ?? DEFAULTS.branchPrefix },
    }),
    publisher,
    currentRepository: currentRepositoryOnGitea(gitea),
    sessions,
    verification,
    // Restart recovery: an interrupted turn whose answer is on Gitea is verified, not run again.
    replyExists: replyExistsOnGitea({ gitea, botLogin }),
    retryDelayMs: options.retryDelayMs,
    retryAtFor: (errorCode) => (errorCode === PROVIDER_RATE_LIMITED ? providerHold.heldUntil() : null),
    log: (msg, fields) => logger.info(fields, msg),
  });
  executorRef = executor;
  // A task's turn runs on the node that holds its repository's lease; a stop, cancel or abort may
  // come to any node. The task's new state is in the store already (the request's transaction); on a
  // shared database every node is told to stop the turn, and the one running it does.
  const stopTurn = config.databaseUrl
    ? (taskId: string) => void store.transact((tx) => tx.notify(CONTROL_CHANNEL, taskId)).catch((err: unknown) => logger.warn({ taskId, err: String(err) }, 'stop not announced to the other nodes'))
    : (taskId: string) => executorRef?.abort(taskId);
  const stopListening = config.databaseUrl ? await store.listen(CONTROL_CHANNEL, (taskId) => executorRef?.abort(taskId)) : () => undefined;
  const scheduler = createScheduler({
    store,
    runtime,
    executor,
    owner: processOwner,
    maxConcurrentTasks: config.maxConcurrentTasks,
    leaseTtlMs: config.leaseTtlMs,
    logger: logger.child({ part: 'scheduler' }),
    holdClaimsUntil: (now) => providerHold.heldUntil(now),
    // Another node may take a repository over once this node's lease expires on the database's clock.
    ...(config.databaseUrl ? { othersMayTakeOver: true, claimPreference: claimPreference({ nodeId }) } : {}),
    ...(config.databaseUrl
      ? {
          onLeaseRenewed: (taskId: string) =>
            void onLeaseRenewed({ store, refreshGate: (task) => sessions.refreshGate(task), abort: (id) => executorRef?.abort(id), warn: (f, m) => logger.warn(f, m) }, taskId),
        }
      : {}),
  });
  schedulerRef = scheduler;
  providerHold.onChange(() => void scheduler.wake());
  // What agents did through Gitea before a crash, still in the gate's files: audited before anything runs.
  await ingestAllGateCalls(store, config.dataDir, { onCall: (line) => metrics.observeAgentGiteaCall(line.tool, line.outcome) });
  const recovery = await scheduler.recover();
  logger.info(recovery, 'restart recovery done');
  const receipts = createReceiptOutbox({
    store,
    runtime,
    gitea,
    botLogin,
    scope,
    processId: processOwner,
    locale: config.locale ?? DEFAULT_LOCALE,
    logger: (msg, fields) => logger.child({ part: 'receipts' }).info(fields, msg),
    // A task that ended before its receipt was posted gets its final edit right after the post.
    onSent: (taskId) => progressRef?.touch(taskId),
  });
  // The receipt as the task's tracking comment: edited at each stage, at most once per interval.
  const progress = createReceiptProgress({
    store,
    scope,
    runtime,
    gitea,
    locale: config.locale ?? DEFAULT_LOCALE,
    intervalMs: (config.receiptEditIntervalSeconds ?? DEFAULTS.receiptEditIntervalSeconds) * 1000,
    logger: (msg, fields) => logger.child({ part: 'receipts' }).info(fields, msg),
    // While a task holds its lease, its receipt is edited by the node whose worker runs it, under that lease.
    fenceOf: (taskId) => executor.fenceOf(taskId),
  });
  progressRef = progress;
  // The bot's own commit status on each head it pushed: pending, then how the task ended.
  const commitStatuses = createCommitStatuses({ store, runtime, gitea, logger: (msg, fields) => logger.child({ part: 'receipts' }).info(fields, msg) });
  const notices = createReceiptNotices({
    store,
    scope,
    runtime,
    gitea,
    limits,
    locale: config.locale ?? DEFAULT_LOCALE,
    composeReceipt: (taskId) => progress.bodyFor(taskId),
    onReceiptEdited: (taskId) => progress.touch(taskId),
    logger: (msg, fields) => logger.child({ part: 'receipts' }).info(fields, msg),
  });

  // Failed authentications (webhook signatures, admin tokens): counted per source and window, expiring.
  const securityEventRetentionMs = (config.securityEventRetentionDays ?? DEFAULTS.securityEventRetentionDays) * DAY_MS;
  const securityEvents = createSecurityEvents({
    store,
    retentionMs: securityEventRetentionMs,
    logger: logger.child({ part: 'security' }),
  });
  const intake = createIntake({
    ...(config.databaseUrl ? { nodeId } : {}),
    scope,
    securityEvents,
    securityEventRetentionMs,
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
    repositoryName: repositoryNameOnGitea(gitea),
    // Every acting comment is read back from Gitea first: a payload is not proof that the comment exists.
    commentOnGitea: commentOnGitea(gitea),
    // Review deliveries carry neither the review nor its line comments: read back from Gitea.
    reviewOnGitea: reviewOnGitea(gitea),
    pendingRetry: { maxAttempts: config.intakeConfirmAttempts ?? DEFAULTS.intakeConfirmAttempts },
    maxPending: config.intakeMaxPending ?? DEFAULTS.intakeMaxPending,
    workspaceRoot: config.workspaceRoot,
    quota: createQuotaCheck({ limits }),
    deliveryRetentionMs: (config.deliveryRetentionDays ?? DEFAULTS.deliveryRetentionDays) * DAY_MS,
    onAccepted: (taskId, deliveryId) => {
      rememberDelivery(taskId, deliveryId);
      receipts.kick();
      void scheduler.wake();
    },
    onStop: (taskIds) => taskIds.forEach(stopTurn),
    logger: logger.child({ part: 'intake' }),
  });
  const operators = createOperatorRouters({
    store,
    runtime,
    adminToken: config.adminToken,
    securityEvents,
    agentIsolation,
    onControlChanged: () => {
      void scheduler.wake();
      // An unpause or a repository enabled again may make claims possible on every node.
      if (config.databaseUrl)
        void store.transact((tx) => tx.notify(CLAIMABLE_CHANNEL, processOwner)).catch((err: unknown) => logger.warn({ err: String(err) }, 'control change not announced to the other nodes'));
    },
    onAbortRequested: stopTurn,
    // Several nodes: the live view follows every node's audit.
    ...(config.databaseUrl ? { auditFeed: (listener: (events: AuditEvent[]) => void) => followAudit(store, AUDIT_CHANNEL, listener, (err) => logger.warn({ err: String(err) }, 'audit follow failed')) } : {}),
    concurrency: () => ({ limit: config.maxConcurrentTasks, busy: scheduler.running().length }),
    nodes: async () => {
      const load = await nodeLoads(store);
      // Every running node writes: the role says which ones run.
      const rows = config.databaseUrl ? await store.nodes() : [];
      const listed: NodeStatus[] = config.databaseUrl
        ? rows.map((n) => ({ nodeId: n.nodeId, role: n.state === 'running' ? 'writer' : 'stopped', version: n.version, startedAt: n.startedAt, heartbeatAt: n.heartbeatAt, url: n.url }))
        : [{ nodeId, role: 'writer', version: VERSION, startedAt, heartbeatAt: new Date().toISOString(), url: null }];
      // The embedded store's leases are held under the name it always had ('default').
      return { self: nodeId, nodes: listed.map((n) => ({ ...n, ...load(config.databaseUrl ? n.nodeId : 'default') })), ...(rows[0]?.listedAt ? { now: rows[0].listedAt } : {}) };
    },
    limits,
    providerHold,
    logger: logger.child({ part: 'api' }),
  });
  // Outside dependencies, checked at start and periodically; /readyz reads the last results.
  const probes = startServiceProbes({ config, gitea, mcpArgs: options.mcpArgs ?? ['-t', 'stdio', '-host', config.giteaUrl], supervisor, logger });

  const app = createApp({
    middleware: operators.middleware,
    routers: [
      createOpsRouter({
        metrics,
        webhookPath: config.webhookPath,
        readiness: createReadiness({
          store,
          appServerState: () => appServerState,
          dependencies: { gitea: probes.gitea.current, mcp: probes.mcp.current, codexLogin: probes.codexLogin.current },
        }),
        readyDetails: () => ({ providerHold: providerHold.status() }),
      }),
      createWebhookRouter({
        intake,
        path: config.webhookPath,
        maxBytes: config.webhookMaxBytes,
        bodyTimeoutMs: httpLimits.bodyTimeoutMs,
        // Which node answered, as Gitea's delivery history shows it (several nodes behind one URL).
        ...(config.databaseUrl ? { nodeId } : {}),
      }),
      ...operators.routers,
    ],
    logger: logger.child({ part: 'http' }),
  });

  // The app-server starts in the background: intake and the API answer while Codex boots.
  supervisor
    .start()
    .then(() => probes.codexLogin.refresh())
    .catch((err: unknown) => logger.error({ err }, 'codex app-server failed to start'));
  await receipts.start();
  await notices.start();
  await progress.start();
  commitStatuses.start();
  scheduler.start();
  // Comments that wait for Gitea (a restart keeps them: they are in the store) are asked about again.
  intake.start();
  const retention = startRetention({
    store,
    scope,
    policy: {
      deliveryRetentionMs: (config.deliveryRetentionDays ?? DEFAULTS.deliveryRetentionDays) * DAY_MS,
      taskRetentionMs: config.taskRetentionDays === undefined ? null : config.taskRetentionDays * DAY_MS,
      archiveAfterMs: (config.archiveAfterMinutes ?? DEFAULTS.archiveAfterMinutes) * 60_000,
      // Rejected and refused mentions' tasks (excerpt only) go with the security events.
      excerptOnlyTaskRetentionMs: securityEventRetentionMs,
    },
    logger: logger.child({ part: 'retention' }),
  });

  async function stopParts(): Promise<void> {
    probes.stop();
    operators.close();
    stopListening();
    await intake.close();
    await securityEvents.close();
    await retention.stop();
    receipts.stop();
    notices.stop();
    progress.stop();
    commitStatuses.stop();
    await scheduler.stop();
    await providerHold.flush();
    await supervisor.stop();
    await runtime?.settled();
    runtime?.stopAll();
    await store.close();
  }

  let server: Server;
  try {
    // Koa's request handler settles its own promise (its onerror answers and logs a failure).
    // eslint-disable-next-line @typescript-eslint/no-misused-promises
    server = await listen(app.callback(), config.host, config.port, httpLimits);
  } catch (error) {
    // Leave nothing running and the data directory unlocked, then say why in one line.
    await stopParts().catch(() => undefined);
    throw listenError(error, config);
  }
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.host}:${port}`;
  logger.info({ url, botLogin, webhookPath: config.webhookPath }, 'ccweb-gitea listening');

  return {
    url,
    botLogin,
    agentIsolation,
    logger,
    metrics,
    async close() {
      // Event streams end first, then idle keep-alive connections: either would hold close() open.
      operators.close();
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      await closed;
      await stopParts();
    },
  };
}
