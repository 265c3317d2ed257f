// The operators' view over real HTTP: a durable store in a temp dir, the actor runtime with the
// task kind, the operator routers mounted on the app from createApp, bound to 127.0.0.1.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../src/http/create-app.js';
import { createOperatorRouters, type OperatorDeps, type OperatorRouters } from '../../src/api/operator-routers.js';
import type { RepositoryRecord, TaskRecord } from '../../src/domain/records.js';
import { initialTaskMirror } from '../../src/intake/intake-records.js';
import type { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import type { Store } from '../../src/store/types.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import type { ActorKind } from '../../src/runtime/actor-runtime.js';
import { deliveryRecord } from '../../src/intake/intake-records.js';
import { createIntake } from '../../src/intake/intake.js';
import { createCommentRegistry, learningIntake } from './comment-registry.js';
import { FAILED_AUTH_WINDOW_MS, createSecurityEvents, type SecurityEvents } from '../../src/intake/security-events.js';
import { createWebhookRouter } from '../../src/intake/webhook-route.js';
import type { RepoPermission } from '../../src/webhook/authorize-actor.js';
import { createTestRuntime } from './test-runtime.js';
import { FIXTURE_SECRET } from './webhook-fixtures.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export interface ApiHarness {
  url: string;
  store: Store;
  runtime: ActorRuntime;
  operator: OperatorRouters;
  controlChanges: number;
  aborts: string[];
  /** With `webhook: true`: the one sink intake and the admin guard count failed authentications into. */
  securityEvents?: SecurityEvents;
  /** JSON request with the admin token unless `token` says otherwise (null: no header). */
  call(method: string, path: string, body?: unknown, token?: string | null): Promise<{ status: number; body: any; headers: Headers; text: string }>;
  close(): Promise<void>;
}

/**
 * `kinds`: the actor kinds the runtime hosts (the task kind alone unless a test needs more).
 * `maxAuthFailures`: failed admin authentications per client before 429 (the service's default is
 * 10); unlimited unless given, because most tests here send many wrong tokens on purpose.
 */
/**
 * A clock that runs at the real pace from the middle of a security-event window (10 minutes), so a
 * test's requests all fall in one window that is still open when it reads them, whenever it runs:
 * on the real clock a run that crosses a window's end splits its counts and sees the window closed.
 */
export function midWindowClock(windowMs = FAILED_AUTH_WINDOW_MS): () => Date {
  const start = Date.now();
  const offset = Math.floor(start / windowMs) * windowMs + windowMs / 2 - start;
  return () => new Date(Date.now() + offset);
}

export async function startApiHarness(
  kinds: ActorKind[] = [taskKind()],
  options: {
    agentIsolation?: OperatorDeps['agentIsolation'];
    maxAuthFailures?: number;
    /** Also mount the real webhook intake (secret FIXTURE_SECRET) at /api/gitea/webhook, sharing one security-event sink as the service does. */
    webhook?: boolean;
    concurrency?: OperatorDeps['concurrency'];
    /** The clock of the security-event sink and the operators' API (default the real one). */
    now?: () => Date;
    /** With `webhook: true`: each commenter's permission as Gitea would answer it (default `write` for all). */
    permission?: (login: string) => RepoPermission;
  } = {},
): Promise<ApiHarness> {
  const { dir, store, runtime, close } = await createTestRuntime(kinds);
  const harness = { controlChanges: 0, aborts: [] as string[] } as ApiHarness;
  const now = options.now;
  const securityEvents = options.webhook ? createSecurityEvents({ store, ...(now ? { now: () => now().getTime() } : {}) }) : undefined;
  // Its Gitea holds every comment a test posts (comment-registry.ts).
  const comments = createCommentRegistry();
  const intake = securityEvents
    ? createIntake({ store, runtime, botLogin: 'ccweb-bot', secrets: [FIXTURE_SECRET], fetchPermission: async (_owner, _repo, login) => options.permission?.(login) ?? 'write', commentOnGitea: comments.lookup, workspaceRoot: `${dir}-workspaces`, securityEvents })
    : undefined;
  const operator = createOperatorRouters({
    store,
    runtime,
    adminToken: ADMIN_TOKEN,
    ...(securityEvents ? { securityEvents } : {}),
    maxAuthFailures: options.maxAuthFailures ?? Number.MAX_SAFE_INTEGER,
    ...(options.agentIsolation ? { agentIsolation: options.agentIsolation } : {}),
    ...(options.concurrency ? { concurrency: options.concurrency } : {}),
    ...(now ? { now } : {}),
    onControlChanged: () => {
      harness.controlChanges += 1;
    },
    onAbortRequested: (taskId) => harness.aborts.push(taskId),
  });
  const app = createApp({ routers: [...operator.routers, ...(intake ? [createWebhookRouter({ intake: learningIntake(intake, comments) })] : [])], middleware: operator.middleware });
  const server: Server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  Object.assign(harness, {
    url,
    store,
    runtime,
    operator,
    ...(securityEvents ? { securityEvents } : {}),
    call: async (method: string, path: string, body?: unknown, token: string | null = ADMIN_TOKEN) => {
      const headers: Record<string, string> = {};
      if (token !== null) headers['authorization'] = `Bearer ${token}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      let parsed: unknown = null;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
      return { status: res.status, body: parsed, headers: res.headers, text };
    },
    close: async () => {
      operator.close();
      await intake?.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await close();
    },
  });
  return harness;
}

let seq = 0;

/** The task record intake stores for a mention on issue #n of acme/widget (numbered per test run). */
function testTaskRecord(
  overrides: Partial<TaskRecord> & { taskId: string },
  comment: { author: string; instruction: (n: number) => string },
): TaskRecord {
  seq += 1;
  const id = overrides.taskId;
  const repoKey = overrides.repoKey ?? 'default:acme/widget';
  const number = overrides.resource?.number ?? seq;
  const createdAt = overrides.createdAt ?? new Date().toISOString();
  return {
    deliveryKey: `default:delivery-${id}`,
    deliveryId: `delivery-${id}`,
    repoKey,
    resourceKey: `${repoKey}:issue:${number}`,
    sessionKey: `${repoKey}:issue:${number}`,
    resource: { kind: 'issue', number },
    owner: 'acme',
    repo: 'widget',
    commentId: 1000 + seq,
    commentUrl: `http://127.0.0.1:3000/acme/widget/issues/${number}#issuecomment-${1000 + seq}`,
    author: comment.author,
    instruction: comment.instruction(seq),
    refs: null,
    ...initialTaskMirror(),
    queueSeq: seq,
    createdAt,
    updatedAt: createdAt,
    stateVersion: 0,
    ...overrides,
  };
}

/**
 * Creates a task the way intake does: the record (stateVersion 0) and the task actor, accepted
 * into `queued`, in one transaction; then starts the actor.
 */
export async function createQueuedTask(
  store: Store,
  runtime: ActorRuntime,
  overrides: Partial<TaskRecord> & { taskId: string },
): Promise<TaskRecord> {
  const id = overrides.taskId;
  const record = testTaskRecord(overrides, { author: 'alice', instruction: (n) => `@ccweb-bot please look at <b>this</b> #${n}` });
  const created = await store.transact(async (tx) => {
    await tx.insert('tasks', id, record);
    return runtime.createInTx(tx, 'task', taskActorId(id), { taskId: id }, { events: [{ type: 'ACCEPT' }], taskId: id });
  });
  created.start();
  return (await store.get<TaskRecord>('tasks', id))!;
}

/**
 * A mention intake turned away (the commenter may not write): what intake's transaction stores — the
 * delivery with its reason, the `webhook.rejected` audit event, the task record and its actor moved
 * to `rejected` — written the same way, without the webhook.
 */
export async function createRejectedTask(
  store: Store,
  runtime: ActorRuntime,
  overrides: Partial<TaskRecord> & { taskId: string },
  reason = 'actor_not_authorized',
): Promise<TaskRecord> {
  const id = overrides.taskId;
  const at = new Date();
  const record = testTaskRecord({ createdAt: at.toISOString(), ...overrides }, { author: 'mallory', instruction: () => '@ccweb-bot delete the repository' });
  const created = await store.transact(async (tx) => {
    await tx.appendAudit({ action: 'webhook.rejected', actor: `gitea:user:${record.author}`, taskId: id, actorId: taskActorId(id), deliveryId: record.deliveryId, errorCode: reason });
    await tx.insert(
      'webhook_deliveries',
      record.deliveryKey,
      deliveryRecord({
        deliveryKey: record.deliveryKey,
        deliveryId: record.deliveryId,
        eventType: 'issue_comment',
        receivedAt: at,
        retentionMs: 86_400_000,
        normalized: true,
        taskId: id,
        status: 'rejected',
        reason,
        payloadHash: 'sha256:test',
        response: { status: 200, body: { status: 'rejected', reason, taskId: id } },
      }),
    );
    await tx.insert('tasks', id, record);
    return runtime.createInTx(tx, 'task', taskActorId(id), { taskId: id }, { events: [{ type: 'REJECT', reason } as { type: string }], by: `gitea:user:${record.author}`, taskId: id });
  });
  created.start();
  return (await store.get<TaskRecord>('tasks', id))!;
}

/** Drives a queued task on to a later state with the events the scheduler/executor would send. */
export async function driveTask(runtime: ActorRuntime, taskId: string, to: 'running' | 'blocked_workspace'): Promise<void> {
  const id = taskActorId(taskId);
  const send = async (event: { type: string; [k: string]: unknown }) => {
    const r = await runtime.send(id, event as never);
    if (!r.ok) throw new Error(`${event.type} rejected in ${r.state}`);
  };
  await send({ type: 'CLAIM', leaseId: `lease-${taskId}` });
  await send(to === 'running' ? { type: 'WORKSPACE_READY' } : { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' });
}

export async function insertRepository(store: Store, repoKey: string): Promise<void> {
  const [owner, name] = repoKey.split(':')[1]!.split('/');
  const record: RepositoryRecord = {
    repoKey,
    instanceId: 'default',
    owner: owner!,
    name: name!,
    cloneUrl: `http://127.0.0.1:3000/${owner}/${name}.git`,
    workspacePath: `/tmp/ws/${owner}/${name}`,
    defaultBranch: 'main',
    status: 'active',
    registeredAt: new Date().toISOString(),
    lastFetchAt: null,
    version: 1,
  };
  await store.transact((tx) => tx.insert('repositories', repoKey, record));
}
