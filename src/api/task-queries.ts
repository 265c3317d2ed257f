import { TERMINAL_TASK_STATES, TASK_STATE, TASK_STATES, taskStateHas, taskStatesWith, type TaskState } from '../../machines/task-lifecycle.js';
import { messages } from '../messages/catalogue.js';
import {
  GLOBAL_CONTROL_KEY,
  type CommentRecord,
  type ControlRecord,
  type DeliveryRecord,
  type LeaseRecord,
  type RepositoryRecord,
  type SessionRecord,
  type TaskRecord,
  type TurnRecord,
} from '../domain/records.js';
import type { ActorRecord } from '../runtime/actor-runtime.js';
import type { AuditEvent, RecordType, Store } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';
import { taskStop } from './task-stop.js';

/** Reads for the operators' view. Pure functions of the store; nothing here writes. */

/** States in which a task holds its repository's lease (the machine's `holdsLease` tag). */
const RUNNING_STATES: readonly TaskState[] = taskStatesWith('holdsLease');
const ACTIVE_STATES = TASK_STATES.filter((s) => !TERMINAL_TASK_STATES.includes(s));

export async function controlOf(store: Store): Promise<ControlRecord> {
  return (
    (await store.get<ControlRecord>('control', GLOBAL_CONTROL_KEY)) ?? {
      globalPaused: false,
      pauseReason: null,
      updatedBy: null,
      updatedAt: null,
      version: 0,
    }
  );
}

/** `waiting`: tasks queued while every slot is busy (they wait for the cap, not for their repository). */
function concurrencyOf(c: { limit: number; busy: number } | undefined, running: number, queued: number): { limit: number | null; busy: number; free: number | null; waiting: number } {
  const busy = c?.busy ?? running;
  const limit = c?.limit ?? null;
  return { limit, busy, free: limit === null ? null : Math.max(0, limit - busy), waiting: limit !== null && busy >= limit ? queued : 0 };
}

export async function overview(store: Store, now: Date, concurrency?: { limit: number; busy: number }): Promise<Record<string, unknown>> {
  const repos = new Map<string, { repoKey: string; status: string; running: number; queued: number; byState: Record<string, number> }>();
  const repo = (repoKey: string, status = 'unregistered') => {
    let r = repos.get(repoKey);
    if (!r) {
      r = { repoKey, status, running: 0, queued: 0, byState: {} };
      repos.set(repoKey, r);
    }
    return r;
  };
  for (const rec of await store.list<RepositoryRecord>('repositories')) repo(rec.repoKey, rec.status).status = rec.status;
  const totals: Record<string, number> = {};
  for (const state of ACTIVE_STATES) {
    for (const task of await store.byIndex<TaskRecord>('tasks', 'state', state)) {
      const r = repo(task.repoKey);
      r.byState[state] = (r.byState[state] ?? 0) + 1;
      if (RUNNING_STATES.includes(state)) r.running += 1;
      if (state === TASK_STATE.queued) r.queued += 1;
      totals[state] = (totals[state] ?? 0) + 1;
    }
  }
  const control = await controlOf(store);
  return {
    now: now.toISOString(),
    control: {
      globalPaused: control.globalPaused,
      pauseReason: control.pauseReason,
      updatedBy: control.updatedBy,
      updatedAt: control.updatedAt,
      version: control.version,
    },
    running: sum(repos, 'running'),
    queued: sum(repos, 'queued'),
    // The cap behind which queued tasks wait (CCWEB_MAX_CONCURRENT_TASKS) and the slots taken now.
    concurrency: concurrencyOf(concurrency, sum(repos, 'running'), sum(repos, 'queued')),
    activeByState: totals,
    /** Finished tasks moved to the on-disk archive (readable by id; not in task lists). */
    archivedTasks: await store.archivedCount('tasks'),
    repos: [...repos.values()].sort((a, b) => a.repoKey.localeCompare(b.repoKey)),
    leases: (await store.list<LeaseRecord>('leases')).map((l) => ({ ...l })),
  };
}

function sum(repos: Map<string, { running: number; queued: number }>, field: 'running' | 'queued'): number {
  let n = 0;
  for (const r of repos.values()) n += r[field];
  return n;
}

export interface TaskFilter {
  repoKey?: string | undefined;
  resourceKey?: string | undefined;
  state?: TaskState | undefined;
  page: number;
  pageSize: number;
}

/** Newest first: by creation time, then by arrival order (queueSeq), then later insertion first. */
export async function listTasks(store: Store, q: TaskFilter): Promise<Record<string, unknown>> {
  let base: TaskRecord[];
  // Start from the most selective index, filter by the rest.
  if (q.resourceKey) base = await store.byIndex<TaskRecord>('tasks', 'resourceKey', q.resourceKey);
  else if (q.state) base = await store.byIndex<TaskRecord>('tasks', 'state', q.state);
  else if (q.repoKey) base = await store.byIndex<TaskRecord>('tasks', 'repoKey', q.repoKey);
  else base = await store.list<TaskRecord>('tasks');
  const matching = base
    .map((t, i) => ({ t, i }))
    .filter(({ t }) => (!q.repoKey || t.repoKey === q.repoKey) && (!q.resourceKey || t.resourceKey === q.resourceKey) && (!q.state || t.state === q.state))
    .sort((a, b) => cmp(b.t.createdAt, a.t.createdAt) || (b.t.queueSeq ?? 0) - (a.t.queueSeq ?? 0) || b.i - a.i)
    .map(({ t }) => t);
  const start = (q.page - 1) * q.pageSize;
  const items: Record<string, unknown>[] = [];
  for (const t of matching.slice(start, start + q.pageSize)) {
    const error = await taskError(store, t);
    // Only a stopped task has a stop to explain (its own audit events, an indexed read).
    const stop = t.stoppedBy ? taskStop(t, await store.audit({ taskId: t.taskId })) : null;
    items.push({ ...taskSummary(t), error, errorMeaning: errorMeaningOf(error), stop, pullRequest: pullRequestOf(t) });
  }
  return {
    page: q.page,
    pageSize: q.pageSize,
    total: matching.length,
    /** Archived tasks are not listed here (see CCWEB_ARCHIVE_AFTER_MINUTES); GET /tasks/:id still finds them. */
    archivedTasks: await store.archivedCount('tasks'),
    items,
  };
}

/**
 * Why a task ended badly, as one code for the operators' lists: its errorCode, or for a task intake
 * turned away (`rejected`, which records no errorCode) the reason stored with its delivery.
 */
export async function taskError(store: Store, t: TaskRecord): Promise<string | null> {
  if (t.errorCode) return t.errorCode;
  if (!taskStateHas(t.state, 'refused')) return null;
  return (await store.get<DeliveryRecord>('webhook_deliveries', t.deliveryKey))?.reason ?? null;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The one-line meaning of an error code the service explains (the receipt's sentence, in English); null otherwise. */
export function errorMeaningOf(code: string | null): string | null {
  if (!code) return null;
  return (messages('en').errors as Record<string, string>)[code] ?? null;
}

/** The pull request the task opened or updated (change delivery), with a link safe for the page. */
function pullRequestOf(t: TaskRecord): { number: number; url: string | null } | null {
  const pr = t.publish?.pullRequest;
  if (!pr || typeof pr.number !== 'number') return null;
  return { number: pr.number, url: typeof pr.url === 'string' ? safeUrl(pr.url) : null };
}

export function taskSummary(t: TaskRecord): Record<string, unknown> {
  return {
    taskId: t.taskId,
    repoKey: t.repoKey,
    resourceKey: t.resourceKey,
    resource: t.resource,
    author: t.author,
    state: t.state,
    stateVersion: t.stateVersion,
    attempt: t.attempt,
    errorCode: t.errorCode,
    stoppedBy: t.stoppedBy,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
    commentUrl: safeUrl(t.commentUrl),
    instruction: truncate(t.instruction ?? '', 160),
  };
}

/**
 * A task with everything that explains it: turns, comments, errors and the full audit chain (the
 * task's events, its delivery's, and those of every actor it drove), plus the correlation chain
 * `deliveryKey → taskId → sessionKey/threadId → turnId → commentId` with links to Gitea.
 */
export async function taskDetail(store: Store, taskId: string): Promise<Record<string, unknown> | undefined> {
  const task = await store.get<TaskRecord>('tasks', taskId);
  if (!task) return undefined;
  const delivery = (await store.get<DeliveryRecord>('webhook_deliveries', task.deliveryKey)) ?? null;
  const session = (await store.get<SessionRecord>('sessions', task.sessionKey)) ?? null;
  // An archived task's records left the indexes; the task lists their keys (task-archiver.ts).
  const related = async <T extends RecordType>(collection: 'turns' | 'comments' | 'actors'): Promise<T[]> => {
    const keys = task.archive?.records[collection];
    if (!keys) return store.byIndex<T>(collection, 'taskId', taskId);
    const found: T[] = [];
    for (const key of keys) {
      const r = await store.get<T>(collection, key);
      if (r !== undefined) found.push(r);
    }
    return found;
  };
  const turns = await related<TurnRecord>('turns');
  const comments = await related<CommentRecord>('comments');
  const actors = (await related<ActorRecord>('actors')).map(actorSummary);
  const actorIds = new Set<string>([taskActorId(taskId), ...actors.map((a) => String(a.actorId))]);
  const sessionActor = await store.get<ActorRecord>('actors', `session:${task.sessionKey}`);

  const events = new Map<string, AuditEvent>();
  const add = (list: AuditEvent[]) => list.forEach((e) => events.set(e.eventId, e));
  const own = await store.audit({ taskId });
  add(own);
  if (task.deliveryId) add(await store.audit({ deliveryId: task.deliveryId }));
  for (const actorId of actorIds) add((await store.audit({ actorId })).filter((e) => !e.taskId || e.taskId === taskId));
  // The session is shared by every task of the resource and its events carry no task id: keep those
  // that name this task, and those written while this task held the repository (one task per
  // repository at a time), so a task that never ran shows none of its neighbours' turns.
  if (sessionActor) {
    const windows = workingWindows(own);
    const inWindow = (seq: number) => windows.some(([from, to]) => seq > from && seq < to);
    add(
      (await store.audit({ actorId: sessionActor.actorId })).filter((e) => {
        const named = e.taskId ?? eventField(e, 'taskId');
        return named === taskId || ((named === null || named === undefined) && inWindow(e.seq));
      }),
    );
  }
  // The repository lock's events for the leases this task held.
  const leaseIds = new Set<string>();
  for (const e of events.values()) {
    const leaseId = eventField(e, 'leaseId');
    if (typeof leaseId === 'string') leaseIds.add(leaseId);
  }
  add(
    (await store.audit({ actorId: `lock:${task.repoKey}` })).filter((e) => eventField(e, 'taskId') === taskId || leaseIds.has(String(eventField(e, 'leaseId')))),
  );
  const audit = [...events.values()].sort((a, b) => a.seq - b.seq);

  const errors = audit
    .filter((e) => e.errorCode || e.level === 'alert')
    .map((e) => ({ seq: e.seq, timestamp: e.timestamp, action: e.action, errorCode: e.errorCode ?? null, actorId: e.actorId ?? null }));
  const threadId = task.threadId ?? session?.threadId ?? null;
  const error = await taskError(store, task);
  return {
    task: { ...task, commentUrl: safeUrl(task.commentUrl) },
    /** As in the task list: errorCode, or a rejected task's reason. */
    error,
    errorMeaning: errorMeaningOf(error),
    /** Who stopped the task, why and how the stop ended; null when nobody did (task-stop.ts). */
    stop: taskStop(task, own),
    /** The task reached a final state: what it published (below) is all it will publish. */
    finished: TERMINAL_TASK_STATES.includes(task.state),
    /** Change delivery: branch, commits, pull request, or where an unpublished change is kept. */
    publish: publishView(task.publish),
    delivery: delivery && {
      deliveryKey: delivery.deliveryKey,
      deliveryId: delivery.deliveryId,
      eventType: delivery.eventType,
      receivedAt: delivery.receivedAt,
      status: delivery.status,
      reason: delivery.reason,
    },
    session,
    turns,
    comments: comments.map((c) => ({ ...c, url: commentLink(task, c) })),
    actors: sessionActor ? [...actors, actorSummary(sessionActor)] : actors,
    errors: task.errorCode ? [{ source: 'task', errorCode: task.errorCode }, ...errors] : errors,
    audit,
    correlation: {
      deliveryKey: task.deliveryKey,
      deliveryId: task.deliveryId,
      taskId,
      sessionKey: task.sessionKey,
      threadId,
      trigger: { commentId: task.commentId, url: safeUrl(task.commentUrl) },
      turns: turns.map((t) => ({ turnKey: t.turnKey, turnId: t.turnId, kind: t.kind, status: t.status })),
      comments: comments.map((c) => ({ commentKey: c.commentKey, kind: c.kind, commentId: c.commentId, status: c.status, turnId: c.turnId, url: commentLink(task, c) })),
    },
  };
}

export function actorSummary(a: ActorRecord): Record<string, unknown> {
  return {
    actorId: a.actorId,
    kind: a.kind,
    machineId: a.machineId,
    state: a.state,
    status: a.status,
    stateVersion: a.stateVersion,
    taskId: a.taskId,
    createdAt: a.createdAt,
    updatedAt: a.updatedAt,
  };
}

/** States in which a task holds its repository's lease (and so is the only one using its session). */
const LEASE_STATES: readonly string[] = RUNNING_STATES;

/** [from, to) audit sequence ranges during which the task was in a lease-holding state. */
function workingWindows(own: AuditEvent[]): Array<[number, number]> {
  const windows: Array<[number, number]> = [];
  let open: number | null = null;
  for (const e of [...own].sort((a, b) => a.seq - b.seq)) {
    if (e.action !== 'task.transition' || !e.toState) continue;
    const holding = LEASE_STATES.includes(e.toState);
    if (holding && open === null) open = e.seq;
    else if (!holding && open !== null) {
      windows.push([open, e.seq]);
      open = null;
    }
  }
  if (open !== null) windows.push([open, Number.POSITIVE_INFINITY]);
  return windows;
}

/** A field of the event a transition audit recorded (`metadata.event`). */
function eventField(e: AuditEvent, field: string): unknown {
  const ev = e.metadata?.['event'];
  return ev && typeof ev === 'object' ? (ev as Record<string, unknown>)[field] : undefined;
}

/** The Gitea page of a comment: its stored html url, else derived from the trigger comment's url. */
function commentLink(task: TaskRecord, c: CommentRecord): string | null {
  const stored = safeUrl(c.htmlUrl);
  if (stored) return stored;
  const base = safeUrl(task.commentUrl);
  if (!base || c.commentId === null) return null;
  return `${base.replace(/#.*$/, '')}#issuecomment-${c.commentId}`;
}

/** Only http(s) links reach the page: a stored `javascript:` url must never become a link. */
/** The task's delivery record as stored, with the pull request's link filtered like every other url shown. */
function publishView(value: unknown): Record<string, unknown> | null {
  if (!value || typeof value !== 'object') return null;
  const p = value as { pullRequest?: { number: number; url: unknown } | null };
  return { ...p, pullRequest: p.pullRequest ? { ...p.pullRequest, url: safeUrl(p.pullRequest.url) } : null };
}

export function safeUrl(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > 2000) return null;
  try {
    const u = new URL(value);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.toString() : null;
  } catch {
    return null;
  }
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
