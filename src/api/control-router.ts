import { Readable } from 'node:stream';
import Router from '@koa/router';
import type { Context } from 'koa';
import type { z } from 'zod';
import type { EventObject } from 'xstate';
import { TASK_STATES, taskStateHas, taskStatesWith, taskStateTakes, type TaskState } from '../../machines/task-lifecycle.js';
import {
  GLOBAL_CONTROL_KEY,
  type ControlRecord,
  type ControlRequestRecord,
  type RepositoryRecord,
  type TaskRecord,
} from '../domain/records.js';
import { findRepository, matchingRepositories } from '../domain/repository-identity.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { AuditEvent, AuditEventInput, Store, Tx } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';
import { requireAdminToken } from './admin-auth.js';
import { publishPathSettings, type PublishPathSettings } from '../publish/protected-paths.js';
import { AgentToolsBody, AuditQuery, ControlBody, PublishPathsBody, ReaderNoticesBody, ReviewTriggersBody, TaskListQuery } from './control-schemas.js';
import { ApiError, handled, parseOr400, queryOf, readJsonBody, type ApiLogger } from './http-helpers.js';
import { controlOf, listTasks, overview, taskDetail } from './task-queries.js';
import { nodesView, type NodeStatus } from './nodes-view.js';

export const API_PREFIX = '/api/gitea-workflow';

type NodeList = { self: string; nodes: NodeStatus[]; now?: string };

export interface ControlRouterDeps {
  store: Store;
  runtime: ActorRuntime;
  adminToken: string;
  /** After pause/resume/disable/enable is durable: wake the scheduler. Awaited before the answer. */
  onControlChanged?: () => void | Promise<void>;
  /** After a task entered `aborting`: the executor interrupts the running turn. */
  onAbortRequested?: (taskId: string) => void;
  now?: () => Date;
  logger?: ApiLogger;
  /** Where the agent's commands run: `/overview` shows it, the admin page warns when off. */
  agentIsolation?: { mode: 'on' | 'off'; network: 'on' | 'off'; warning: string | null };
  /** The scheduler's cap on tasks running at once and how many slots are taken now (`/overview`). */
  concurrency?: () => { limit: number; busy: number };
  /** The nodes sharing this store, this one included (`/overview`). */
  /** `now`: the database's clock when the nodes were read; their heartbeats are on it, so staleness is judged by it. */
  nodes?: () => NodeList | Promise<NodeList>;
}

type Answer = { status: number; body: Record<string, unknown> };

/** What a control action decided, recorded with the request in one transaction. */
interface Outcome extends Answer {
  audit: Omit<AuditEventInput, 'actor' | 'action'>;
}

/** Task actions: the event, and the states in which an operator may send it (spec §5.6, §6.2). */
/**
 * Cancel and abort reach every non-terminal state; the machine decides what each does: a
 * task with nothing in flight is cancelled, one with work in flight goes to `aborting`. A task
 * already `aborting` answers 200 with `alreadyStopping` and is sent nothing.
 */
const STOPPABLE: readonly TaskState[] = [...taskStatesWith('cancelledByStop'), ...taskStatesWith('abortedByStop')];
const TASK_ACTIONS = {
  cancel: { event: 'CANCEL', from: STOPPABLE },
  unblock: { event: 'UNBLOCK', from: TASK_STATES.filter((s) => taskStateTakes(s, 'UNBLOCK')) },
  abort: { event: 'ABORT', from: STOPPABLE },
} as const satisfies Record<string, { event: string; from: readonly TaskState[] }>;
type TaskAction = keyof typeof TASK_ACTIONS;

/**
 * The control and query API of spec §6.2. Every route needs the admin bearer token. Control
 * requests are idempotent by `requestId`: the first answer is stored in `control_requests` (in the
 * same transaction as the change and its audit event) and returned again for a repeat, which
 * changes nothing and sends nothing.
 */
export function createControlRouter(deps: ControlRouterDeps): Router {
  const { store, runtime } = deps;
  const now = deps.now ?? (() => new Date());
  const auth = requireAdminToken(deps.adminToken);
  const router = new Router({ prefix: API_PREFIX });
  // Two concurrent requests with one requestId: the second waits for the first's answer.
  const inFlight = new Map<string, Promise<unknown>>();

  const h = (fn: (ctx: Context) => Promise<void>) => handled(deps.logger, fn);

  router.get('/overview', auth, h(async (ctx) => {
    await store.sync();
    const o = await overview(store, now(), deps.concurrency?.());
    const cluster = await deps.nodes?.();
    if (cluster) o['nodes'] = nodesView(cluster.nodes, cluster.self, cluster.now ? new Date(cluster.now) : now());
    const iso = deps.agentIsolation;
    ctx.body = iso ? { ...o, agentIsolation: { mode: iso.mode, network: iso.network, warning: iso.warning } } : o;
  }));

  router.get('/tasks', auth, h(async (ctx) => {
    const q = parseOr400(TaskListQuery, queryOf(ctx));
    await store.sync();
    ctx.body = await listTasks(store, q);
  }));

  router.get('/tasks/:taskId', auth, h(async (ctx) => {
    await store.sync();
    const detail = await taskDetail(store, String(ctx.params['taskId']));
    if (!detail) throw new ApiError(404, { error: 'task_not_found' });
    ctx.body = detail;
  }));

  router.get('/audit', auth, h(async (ctx) => {
    const q = parseOr400(AuditQuery, queryOf(ctx));
    await store.sync();
    const events = await auditEvents(store, q);
    if (q.format === 'ndjson') {
      const name = `audit-${(q.taskId ?? q.deliveryId ?? q.deliveryKey ?? q.actorId ?? q.turnId ?? (q.commentId !== undefined ? `comment-${q.commentId}` : undefined) ?? 'all').replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 80)}.ndjson`;
      ctx.set('content-disposition', `attachment; filename="${name}"`);
      ctx.type = 'application/x-ndjson';
      ctx.body = Readable.from(ndjsonLines(events));
      return;
    }
    // Newest first: the page continues with `beforeSeq` (the answer's `nextBeforeSeq`), not `afterSeq`.
    ctx.body =
      q.order === 'desc'
        ? { events, nextAfterSeq: null, nextBeforeSeq: events.length === q.limit ? events[events.length - 1]!.seq : null }
        : { events, nextAfterSeq: events.length ? events[events.length - 1]!.seq : null };
  }));

  const control = <B extends ControlBody = ControlBody>(
    path: string,
    action: string,
    target: (ctx: Context) => string | null,
    perform: (ctx: Context, req: B, target: string | null) => Promise<Answer>,
    schema: z.ZodType<B> = ControlBody as unknown as z.ZodType<B>,
  ) => {
    router.post(path, auth, h(async (ctx) => {
      const req = parseOr400(schema, await readJsonBody(ctx));
      const t = target(ctx);
      for (;;) {
        const prior = await store.get<ControlRequestRecord>('control_requests', req.requestId);
        if (prior) return replay(ctx, prior, action, t);
        const running = inFlight.get(req.requestId);
        if (!running) break;
        await running.catch(() => undefined);
      }
      const work = perform(ctx, req, t);
      inFlight.set(req.requestId, work);
      try {
        const answer = await work;
        ctx.status = answer.status;
        ctx.body = answer.body;
      } finally {
        inFlight.delete(req.requestId);
      }
    }));
  };

  /** Records the request, its audit event and (via `decide`) the change, atomically. */
  const commit = (req: ControlBody, action: string, target: string | null, decide: (tx: Tx) => Outcome | Promise<Outcome>): Promise<Answer & { replayed: boolean }> =>
    store.transact(async (tx) => {
      const prior = await tx.get<ControlRequestRecord>('control_requests', req.requestId);
      if (prior) return { ...prior.response, replayed: true };
      const outcome = await decide(tx);
      const answer = { status: outcome.status, body: outcome.body };
      await tx.appendAudit({
        ...outcome.audit,
        action,
        actor: `admin:${req.operator}`,
        level: 'security',
        metadata: { ...outcome.audit.metadata, requestId: req.requestId, reason: req.reason, status: outcome.status },
      });
      await tx.insert<ControlRequestRecord>('control_requests', req.requestId, {
        requestId: req.requestId,
        operator: req.operator,
        action,
        target,
        reason: req.reason,
        response: answer,
        createdAt: now().toISOString(),
      });
      return { ...answer, replayed: false };
    });

  const setPaused = (paused: boolean) => async (_ctx: Context, req: ControlBody): Promise<Answer> => {
    const answer = await commit(req, paused ? 'control.pause' : 'control.resume', GLOBAL_CONTROL_KEY, async (tx) => {
      const current = await tx.get<ControlRecord>('control', GLOBAL_CONTROL_KEY);
      const changed = (current?.globalPaused ?? false) !== paused;
      let record = current;
      if (changed || !current) {
        const next: ControlRecord = {
          globalPaused: paused,
          pauseReason: paused ? req.reason : null,
          updatedBy: `admin:${req.operator}`,
          updatedAt: now().toISOString(),
          version: (current?.version ?? 0) + 1,
        };
        record = current
          ? await tx.put('control', GLOBAL_CONTROL_KEY, next, { expectVersion: current.version })
          : await tx.insert('control', GLOBAL_CONTROL_KEY, next);
      }
      const body = { ok: true, changed, control: { ...record! } };
      return { status: 200, body, audit: { fromState: String(current?.globalPaused ?? false), toState: String(paused) } };
    });
    if (!answer.replayed) await notify(deps.onControlChanged, deps.logger);
    return answer;
  };

  control('/control/pause', 'control.pause', () => GLOBAL_CONTROL_KEY, setPaused(true));
  control('/control/resume', 'control.resume', () => GLOBAL_CONTROL_KEY, setPaused(false));

  const setRepo = (status: 'active' | 'disabled') => async (_ctx: Context, req: ControlBody, repoKey: string | null): Promise<Answer> => {
    const action = status === 'disabled' ? 'control.repo_disable' : 'control.repo_enable';
    const answer = await commit(req, action, repoKey, async (tx) => {
      // Any letter case names the repository (Gitea's rule); a case variant stored as a second
      // record by an older version gets the same status, so the repository is one thing to switch.
      const all = matchingRepositories(repoKey!, await tx.list<RepositoryRecord>('repositories'));
      const repo = findRepository(repoKey!, all);
      if (!repo) return { status: 404, body: { error: 'repo_not_found' }, audit: { errorCode: 'repo_not_found', metadata: { repoKey } } };
      const changed = repo.status !== status;
      let stored = repo;
      for (const r of all) {
        if (r.status === status) continue;
        const put = await tx.put<RepositoryRecord>('repositories', r.repoKey, { ...r, status, version: r.version + 1 }, { expectVersion: r.version });
        if (r.repoKey === repo.repoKey) stored = put;
      }
      return {
        status: 200,
        body: { ok: true, changed, repoKey: repo.repoKey, status: stored.status, version: stored.version },
        audit: { fromState: repo.status, toState: status, metadata: { repoKey: repo.repoKey, ...(repo.repoKey !== repoKey ? { requested: repoKey } : {}), ...(all.length > 1 ? { variants: all.map((r) => r.repoKey) } : {}) } },
      };
    });
    if (!answer.replayed && answer.status === 200) await notify(deps.onControlChanged, deps.logger);
    return answer;
  };
  const repoKeyOf = (ctx: Context) => String(ctx.params['repoKey']);
  control('/repos/:repoKey/disable', 'control.repo_disable', repoKeyOf, setRepo('disabled'));
  control('/repos/:repoKey/enable', 'control.repo_enable', repoKeyOf, setRepo('active'));

  // What the agent may do through Gitea here beyond reading and answering (src/mcp-gate/gate-policy.ts);
  // the gate reads it before each thread start and turn.
  const setAgentTools = async (_ctx: Context, req: AgentToolsBody, repoKey: string | null): Promise<Answer> => {
    return commit(req, 'control.repo_agent_tools', repoKey, async (tx) => {
      const repo = findRepository(repoKey!, await tx.list<RepositoryRecord>('repositories'));
      if (!repo) return { status: 404, body: { error: 'repo_not_found' }, audit: { errorCode: 'repo_not_found', metadata: { repoKey } } };
      const before = Array.isArray(repo.agentToolGroups) ? repo.agentToolGroups : [];
      const groups = [...req.groups].sort();
      const changed = before.join(',') !== groups.join(',');
      const stored = changed ? await tx.put<RepositoryRecord>('repositories', repo.repoKey, { ...repo, agentToolGroups: groups, version: repo.version + 1 }, { expectVersion: repo.version }) : repo;
      return {
        status: 200,
        body: { ok: true, changed, repoKey: repo.repoKey, agentToolGroups: groups, version: stored.version },
        audit: { fromState: before.join(',') || 'none', toState: groups.join(',') || 'none', metadata: { repoKey: repo.repoKey, groups } },
      };
    });
  };
  control('/repos/:repoKey/agent-tools', 'control.repo_agent_tools', repoKeyOf, setAgentTools, AgentToolsBody);

  // What the publisher may commit here (src/publish/protected-paths.ts); it reads the record at each publish.
  const setPublishPaths = async (_ctx: Context, req: PublishPathsBody, repoKey: string | null): Promise<Answer> =>
    commit(req, 'control.repo_publish_paths', repoKey, async (tx) => {
      const repo = await tx.get<RepositoryRecord>('repositories', repoKey!);
      if (!repo) return { status: 404, body: { error: 'repo_not_found' }, audit: { errorCode: 'repo_not_found', metadata: { repoKey } } };
      const before = publishPathSettings(repo);
      const next: PublishPathSettings = { allowCiChanges: req.allowCiChanges, protectedPaths: [...new Set(req.protectedPaths)].sort() };
      const text = (p: PublishPathSettings) => `allowCiChanges=${p.allowCiChanges};protectedPaths=${p.protectedPaths.join(',')}`;
      const changed = text(before) !== text(next);
      const stored = changed ? await tx.put<RepositoryRecord>('repositories', repoKey!, { ...repo, publishPaths: next, version: repo.version + 1 }, { expectVersion: repo.version }) : repo;
      return {
        status: 200,
        body: { ok: true, changed, repoKey, publishPaths: next, version: stored.version },
        audit: { fromState: text(before), toState: text(next), metadata: { repoKey, ...next } },
      };
    });
  control('/repos/:repoKey/publish-paths', 'control.repo_publish_paths', repoKeyOf, setPublishPaths, PublishPathsBody);

  // Whether a "request changes" review on the bot's own pull request starts a task without a mention
  // (src/intake/review-tasks.ts); intake reads the record at each review delivery. Off unless set here.
  const setReviewTriggers = async (_ctx: Context, req: ReviewTriggersBody, repoKey: string | null): Promise<Answer> => {
    return commit(req, 'control.repo_review_triggers', repoKey, async (tx) => {
      const repo = findRepository(repoKey!, await tx.list<RepositoryRecord>('repositories'));
      if (!repo) return { status: 404, body: { error: 'repo_not_found' }, audit: { errorCode: 'repo_not_found', metadata: { repoKey } } };
      const before = repo.reviewTriggers?.requestChanges === true;
      const changed = before !== req.requestChanges;
      const next = { requestChanges: req.requestChanges };
      const stored = changed ? await tx.put<RepositoryRecord>('repositories', repo.repoKey, { ...repo, reviewTriggers: next, version: repo.version + 1 }, { expectVersion: repo.version }) : repo;
      return {
        status: 200,
        body: { ok: true, changed, repoKey: repo.repoKey, reviewTriggers: next, version: stored.version },
        audit: { fromState: `requestChanges=${before}`, toState: `requestChanges=${req.requestChanges}`, metadata: { repoKey: repo.repoKey, ...next } },
      };
    });
  };
  control('/repos/:repoKey/review-triggers', 'control.repo_review_triggers', repoKeyOf, setReviewTriggers, ReviewTriggersBody);

  // Whether a mention by someone without write access gets the thread's one notice of the day that only
  // writers can ask (src/intake/write-outcome.ts); intake reads the record at each such mention. On unless set off here.
  const setReaderNotices = async (_ctx: Context, req: ReaderNoticesBody, repoKey: string | null): Promise<Answer> => {
    return commit(req, 'control.repo_reader_notices', repoKey, async (tx) => {
      const all = matchingRepositories(repoKey!, await tx.list<RepositoryRecord>('repositories'));
      const repo = findRepository(repoKey!, all);
      if (!repo) return { status: 404, body: { error: 'repo_not_found' }, audit: { errorCode: 'repo_not_found', metadata: { repoKey } } };
      const before = repo.readerNotices?.enabled !== false;
      const next = { enabled: req.enabled };
      // Every stored letter case of the repository gets it: intake reads whichever the comment resolves to.
      let stored = repo;
      for (const r of all) {
        if ((r.readerNotices?.enabled !== false) === req.enabled) continue;
        const put = await tx.put<RepositoryRecord>('repositories', r.repoKey, { ...r, readerNotices: next, version: r.version + 1 }, { expectVersion: r.version });
        if (r.repoKey === repo.repoKey) stored = put;
      }
      return {
        status: 200,
        body: { ok: true, changed: before !== req.enabled, repoKey: repo.repoKey, readerNotices: next, version: stored.version },
        audit: { fromState: `enabled=${before}`, toState: `enabled=${req.enabled}`, metadata: { repoKey: repo.repoKey, ...next } },
      };
    });
  };
  control('/repos/:repoKey/reader-notices', 'control.repo_reader_notices', repoKeyOf, setReaderNotices, ReaderNoticesBody);

  const taskAction = (name: TaskAction) => async (_ctx: Context, req: ControlBody, taskId: string | null): Promise<Answer> => {
    const spec = TASK_ACTIONS[name];
    const action = `control.task_${name}`;
    const id = taskId!;
    const actorId = taskActorId(id);
    const by = `admin:${req.operator}`;
    const task = await store.get<TaskRecord>('tasks', id);
    if (!task) {
      return commit(req, action, id, () => ({ status: 404, body: { error: 'task_not_found' }, audit: { errorCode: 'task_not_found', metadata: { taskId: id } } }));
    }
    // A transition made for this request before a crash (the event carries the requestId) counts
    // as done: answer as if it had just happened, send nothing again.
    const done = (await store.audit({ actorId })).find((e) => e.action === 'task.transition' && (e.metadata?.['event'] as { requestId?: unknown } | undefined)?.requestId === req.requestId);
    let result: { ok: true; fromState: string; toState: string; stateVersion: number; alreadyStopping?: true } | { ok: false; state: string | null };
    if (done) {
      result = { ok: true, fromState: done.fromState ?? '', toState: done.toState ?? '', stateVersion: done.stateVersion ?? 0 };
    } else if (name !== 'unblock' && taskStateHas(task.state, 'stopping')) {
      result = { ok: true, fromState: task.state, toState: task.state, stateVersion: (await runtime.stateOf(actorId))?.stateVersion ?? 0, alreadyStopping: true };
    } else if (!(spec.from as readonly string[]).includes(task.state)) {
      result = { ok: false, state: task.state };
    } else {
      const event = { type: spec.event, by, requestId: req.requestId } as EventObject;
      const sent = await runtime.send(actorId, event, { by });
      result = sent.ok ? sent : { ok: false, state: sent.state ?? (await store.get<TaskRecord>('tasks', id))?.state ?? null };
    }
    const answer = await commit(req, action, id, () =>
      result.ok
        ? {
            status: 200,
            body: { ok: true, taskId: id, fromState: result.fromState, toState: result.toState, stateVersion: result.stateVersion, ...(result.alreadyStopping ? { alreadyStopping: true } : {}) },
            audit: { taskId: id, actorId, fromState: result.fromState, toState: result.toState, stateVersion: result.stateVersion },
          }
        : {
            status: 409,
            body: { error: 'illegal_state', state: result.state },
            audit: { taskId: id, actorId, fromState: result.state, errorCode: 'illegal_state' },
          },
    );
    // Work in flight (the task is now aborting, or was cancelled during a reply-retry wait) is stopped by its host.
    if (!answer.replayed && name !== 'unblock' && answer.status === 200) await notify(() => deps.onAbortRequested?.(id), deps.logger);
    return answer;
  };
  const taskIdOf = (ctx: Context) => String(ctx.params['taskId']);
  control('/tasks/:taskId/cancel', 'control.task_cancel', taskIdOf, taskAction('cancel'));
  control('/tasks/:taskId/unblock', 'control.task_unblock', taskIdOf, taskAction('unblock'));
  control('/tasks/:taskId/abort', 'control.task_abort', taskIdOf, taskAction('abort'));

  return router;
}

function replay(ctx: Context, prior: ControlRequestRecord, action: string, target: string | null): void {
  if (prior.action !== action || prior.target !== target) {
    throw new ApiError(409, { error: 'request_id_conflict' });
  }
  ctx.set('idempotent-replay', 'true');
  ctx.status = prior.response.status;
  ctx.body = prior.response.body;
}

async function notify(fn: (() => void | Promise<void>) | undefined, logger: ApiLogger | undefined): Promise<void> {
  try {
    await fn?.();
  } catch (err) {
    logger?.error({ err: err instanceof Error ? { name: err.name, message: err.message } : String(err) }, 'operator callback failed');
  }
}

/**
 * The delivery id a delivery key stands for: the stored delivery's, else the key's part after the
 * instance (`default:<uuid>`), so a key whose record retention dropped still finds its events.
 */
async function deliveryIdOfKey(store: Store, key: string): Promise<string> {
  const rec = await store.get<{ deliveryId?: unknown }>('webhook_deliveries', key);
  return typeof rec?.deliveryId === 'string' ? rec.deliveryId : key.slice(key.indexOf(':') + 1);
}

/** Filters the store has no index for: an event names the id in its field or in its metadata. */
function correlated(q: ReturnType<typeof AuditQuery.parse>): ((e: AuditEvent) => boolean) | null {
  if (q.turnId === undefined && q.commentId === undefined) return null;
  return (e) =>
    (q.turnId === undefined || e.turnId === q.turnId || e.metadata?.['turnId'] === q.turnId) &&
    (q.commentId === undefined || e.commentId === q.commentId || e.metadata?.['commentId'] === q.commentId);
}

async function auditEvents(store: Store, q: ReturnType<typeof AuditQuery.parse>): Promise<AuditEvent[]> {
  const deliveryId = q.deliveryId ?? (q.deliveryKey ? await deliveryIdOfKey(store, q.deliveryKey) : undefined);
  const query = {
    ...(q.taskId ? { taskId: q.taskId } : {}),
    ...(deliveryId ? { deliveryId } : {}),
    ...(q.actorId ? { actorId: q.actorId } : {}),
    ...(q.from ? { from: new Date(q.from).toISOString() } : {}),
    ...(q.to ? { to: new Date(q.to).toISOString() } : {}),
    ...(q.afterSeq !== undefined ? { afterSeq: q.afterSeq } : {}),
    ...(q.level ? { level: q.level } : {}),
  };
  // The NDJSON export is the whole range; the JSON answer is a page (`afterSeq` continues it,
  // `beforeSeq` when newest first).
  const page = q.format === 'ndjson' ? Number.POSITIVE_INFINITY : q.limit;
  const keep = correlated(q);
  const read = async (): Promise<AuditEvent[]> => (keep ? (await store.audit(query)).filter(keep) : store.audit(query));
  if (q.order === 'asc') {
    const events = await read();
    return q.beforeSeq === undefined ? events.slice(0, page) : events.filter((e) => e.seq < q.beforeSeq!).slice(0, page);
  }
  const events = await read();
  const newest: AuditEvent[] = [];
  for (let i = events.length - 1; i >= 0 && newest.length < page; i--) {
    if (q.beforeSeq === undefined || events[i]!.seq < q.beforeSeq) newest.push(events[i]!);
  }
  return newest;
}

function* ndjsonLines(events: AuditEvent[]): Generator<string> {
  for (const e of events) yield `${JSON.stringify(e)}\n`;
}
