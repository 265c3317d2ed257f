// Webhook intake (spec §5.1): one signed Gitea delivery in, at most one durable queued task out.
//
// Order: content type → signature (401, security audit only) → event kind → delivery id →
// delivery dedup → normalise (400) → comment-trigger dedup → filters → disabled repository (409)
// → authorisation (async) → ONE transaction that re-checks every uniqueness rule and writes the
// outcome. Because the store applies a transaction synchronously against its in-memory state, the
// re-check inside the transaction is what makes 50 concurrent identical posts yield one task; the
// checks before it only spare the authorisation call for requests already known to be repeats.
//
// Every answer that reports a stored outcome is given only after that outcome is durable: a write
// resolves when its journal line is on disk, and a repeat is answered after an audit write, which
// the journal orders after everything it is answering about.
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';
import { pendingReceiptRecord } from '../receipts/receipt-record.js';
import type { DeliveryRecord, CommentTriggerRecord, RepositoryRecord } from '../domain/records.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { StoreError, type AuditEventInput, type CollectionName, type Store, type StoredRecord, type Tx } from '../store/types.js';
import { TASK_KIND, taskActorId } from '../tasks/task-actor.js';
import { authorizeActor, type AuthorizeResult, type RepoPermission } from '../webhook/authorize-actor.js';
import { classifyComment, classifyEvent } from '../webhook/classify.js';
import { getHeader, type WebhookHeaders } from '../webhook/headers.js';
import {
  INSTANCE_ID,
  commentTriggerKey,
  isValidDeliveryId,
  normalizeComment,
  taskIdFor,
  type NormalizedComment,
} from '../webhook/normalize-comment.js';
import { extractPayload, verifySignature } from '../webhook/verify-signature.js';
import { foreignRepositoryOrigin, type ForeignOrigin } from '../webhook/repository-origin.js';
import { workspacePathFor } from '../domain/workspace-path.js';
import {
  DEFAULT_DELIVERY_RETENTION_MS,
  deliveryRecord,
  payloadHash,
  repositoryRecord,
  sessionRecord,
  taskRecord,
  triggerRecord,
} from './intake-records.js';
import {
  FOREIGN_REPOSITORY_ORIGIN,
  INVALID_PAYLOAD,
  REPOSITORY_DISABLED,
  STORE_UNAVAILABLE,
  UNAUTHORIZED,
  UNSUPPORTED_MEDIA_TYPE,
  accepted,
  duplicate,
  ignored,
  rejected,
  repeatOf,
  stopped,
  type IntakeResponse,
} from './intake-response.js';
import { sendStops, stopTargets, type StopTarget } from './stop-tasks.js';
import { createSecurityEvents, safeValue, type SecurityEvents } from './security-events.js';
import { followUpWithTextStoredOnce, taskWithTextStoredOnce } from '../tasks/task-texts.js';
import type { QuotaPort } from '../usage/quota-check.js';

export interface IntakeLogger {
  warn(obj: Record<string, unknown>, msg?: string): void;
}

export interface IntakeOptions {
  store: Store;
  runtime: ActorRuntime;
  botLogin: string;
  /** Several for rotation; a signature under any of them is accepted. */
  secrets: readonly string[];
  allowUsers?: readonly string[];
  denyUsers?: readonly string[];
  /**
   * Host names the payload's repository URLs may name (CCWEB_GITEA_URL's, CCWEB_GITEA_PUBLIC_URL's);
   * another host → 400 `foreign_repository_origin` + security audit. Unset: not checked (tests).
   */
  repositoryHosts?: readonly string[];
  /** Gitea's `GET /repos/{o}/{r}/collaborators/{user}/permission`: confirms write access (the payload's permissions are a hint). */
  fetchPermission: (owner: string, repo: string, login: string) => Promise<RepoPermission>;
  workspaceRoot: string;
  now?: () => Date;
  /** How long a delivery record answers repeats. Default 30 days (Gitea never retries on its own; Replay is manual). */
  deliveryRetentionMs?: number;
  /** A permission lookup slower than this counts as failed (fail closed). Default 3000; Gitea gives up after 5 s. */
  permissionTimeoutMs?: number;
  /** `sessions.mcp.hostRef` for new sessions. Default `gitea-main`, as the session manager's. */
  mcpHostRef?: string;
  /**
   * Bad-signature requests come from anyone: they are counted per source and window into expiring
   * `security_events` records (security-events.ts), never one audit event each. Default: a sink
   * with 10-minute windows and 30 days of retention.
   */
  securityEvents?: SecurityEvents;
  /** Daily quotas (src/usage/quota-check.ts): a new task over one is refused with one comment. */
  quota?: QuotaPort;
  /** After a task was queued durably (e.g. wake the scheduler). Must not throw; errors are ignored. */
  onAccepted?: (taskId: string) => void;
  /** After a stop was recorded and its events sent. */
  onStop?: (taskIds: string[]) => void;
  logger?: IntakeLogger;
}

export interface IntakeRequest {
  rawBody: Buffer;
  headers: WebhookHeaders;
  /** Defaults to the `Content-Type` header. */
  contentType?: string | undefined;
  /** The TCP peer, for the security audit of a bad signature. */
  remoteAddress?: string | undefined;
}

export interface Intake {
  handle(request: IntakeRequest): Promise<IntakeResponse>;
  /** Writes the counts of the current security-event window (call at shutdown). */
  flush(): Promise<void>;
  /** Stops the security-event window timer and writes its counts. */
  close(): Promise<void>;
}

/** What the final transaction should write when no uniqueness rule or disabled repository intervenes. */
type Plan =
  | { kind: 'ignored'; reason: string }
  | { kind: 'accept' }
  | { kind: 'reject'; reason: string }
  | { kind: 'stop' }
  /** Write only if a check hits (used before authorisation); otherwise write nothing. */
  | { kind: 'probe' };

interface Subject {
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  hash: string;
  receivedAt: Date;
  comment: NormalizedComment | null;
  triggerKey: string | null;
}

type Outcome =
  | { response: IntakeResponse; start?: () => void; taskId?: string; stop?: StopTarget[]; followUp?: string }
  | null;

interface Reader {
  get: Store['get'];
}

const EVENT_TYPE = /^[a-z_]{1,64}$/;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('permission lookup timed out')), ms);
    timer.unref?.();
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

export function createIntake(options: IntakeOptions): Intake {
  const { store, runtime, botLogin, secrets } = options;
  const now = options.now ?? (() => new Date());
  const retentionMs = options.deliveryRetentionMs ?? DEFAULT_DELIVERY_RETENTION_MS;
  const permissionTimeoutMs = options.permissionTimeoutMs ?? 3000;
  const hostRef = options.mcpHostRef ?? 'gitea-main';

  async function handle(request: IntakeRequest): Promise<IntakeResponse> {
    try {
      return await process(request);
    } catch (error) {
      // Whatever the store could not do, nothing was acknowledged: Gitea may retry (§6.1 500/503).
      if (error instanceof StoreError) return STORE_UNAVAILABLE;
      throw error;
    }
  }

  async function process(request: IntakeRequest): Promise<IntakeResponse> {
    const { rawBody, headers } = request;
    const receivedAt = now();
    const contentType = request.contentType ?? getHeader(headers, 'content-type');

    const extracted = extractPayload(rawBody, contentType);
    if ('error' in extracted && extracted.error === 'unsupported_content_type') return UNSUPPORTED_MEDIA_TYPE;
    if ('error' in extracted || !verifySignature(extracted.json, headers, secrets)) {
      await auditBadSignature(request, 'error' in extracted ? extracted.error : 'invalid_signature');
      return UNAUTHORIZED;
    }
    const json = extracted.json;

    const event = classifyEvent(headers);
    if (!event.ok && event.outcome === 'invalid') return invalidPayload(headers, event.issues);
    const deliveryId = getHeader(headers, 'x-gitea-delivery')?.trim();
    if (deliveryId === undefined || !isValidDeliveryId(deliveryId)) {
      return invalidPayload(headers, 'missing or malformed X-Gitea-Delivery header');
    }
    const deliveryKey = `${INSTANCE_ID}:${deliveryId}`;
    const headerType = getHeader(headers, 'x-gitea-event-type')?.trim() ?? '';
    const subject: Subject = {
      deliveryKey,
      deliveryId,
      eventType: EVENT_TYPE.test(headerType) ? headerType : 'unknown',
      hash: payloadHash(json),
      receivedAt,
      comment: null,
      triggerKey: null,
    };

    // A repeat is answered before parsing: the same delivery id carries the same signed body.
    if (store.get('webhook_deliveries', deliveryKey) !== undefined) {
      const repeat = await commit(subject, { kind: 'probe' });
      if (repeat !== null) return repeat;
    }
    if (!event.ok) return (await commit(subject, { kind: 'ignored', reason: event.reason }))!;

    const normalized = normalizeComment(headers, json, { botLogin });
    if (!normalized.ok) return invalidPayload(headers, normalized.issues);
    const c = normalized.value;
    const foreign = options.repositoryHosts ? foreignRepositoryOrigin(c.repo, options.repositoryHosts) : null;
    if (foreign !== null) return refuseForeignOrigin(deliveryId, c, foreign);
    subject.comment = c;
    subject.eventType = c.eventType;

    const decision = classifyComment(c, botLogin);
    if (decision.outcome === 'ignored') {
      // Ignored comments leave no trigger: an edit or a mention-less comment never becomes a task.
      return (await commit(subject, { kind: 'ignored', reason: decision.reason }))!;
    }
    subject.triggerKey = commentTriggerKey(c);
    if (knownOutcome(store, subject)) {
      const known = await commit(subject, { kind: 'probe' });
      if (known !== null) return known;
    }

    const auth = await authorize(c);
    const plan: Plan = !auth.allowed
      ? { kind: 'reject', reason: auth.reason }
      : decision.command.kind === 'stop'
        ? { kind: 'stop' }
        : { kind: 'accept' };
    return (await commit(subject, plan))!;
  }

  function authorize(c: NormalizedComment): Promise<AuthorizeResult> {
    return authorizeActor({
      login: c.actor.login,
      permissions: c.permissions,
      allowList: options.allowUsers,
      denyList: options.denyUsers,
      fetchPermission: (login) =>
        withTimeout(options.fetchPermission(c.repo.owner, c.repo.name, login), permissionTimeoutMs),
    });
  }

  /**
   * True when a write would be decided by an existing record rather than by the plan. (The delivery
   * itself was looked up just before, with nothing asynchronous since.)
   */
  function knownOutcome(reader: Reader, s: Subject): boolean {
    if (s.triggerKey !== null && reader.get('comment_triggers', s.triggerKey) !== undefined) return true;
    const repo = s.comment ? reader.get<RepositoryRecord>('repositories', s.comment.repoKey) : undefined;
    return repo?.status === 'disabled';
  }

  /** `null` only for a probe that found nothing to decide (the caller then goes on). */
  async function commit(s: Subject, plan: Plan): Promise<IntakeResponse | null> {
    const c = s.comment;
    const workspacePath =
      c && plan.kind === 'accept' ? workspacePathFor(options.workspaceRoot, c.instanceId, c.repo.owner, c.repo.name) : '';
    const outcome = await store.transact((tx): Outcome => write(tx, s, plan, workspacePath));
    if (outcome === null) return null;
    outcome.start?.();
    if (outcome.followUp !== undefined && c) {
      // The reply is recorded on the task (durable above); the task goes back to the queue and
      // resumes its thread. A crash between the two leaves the follow-up stored and the task
      // waiting: the next comment (or an operator) moves it on.
      // The delivery is accepted and durable whatever happens next: a failure here is logged, never a 500.
      await runtime
        .send(taskActorId(outcome.followUp), { type: 'USER_REPLIED' } satisfies TaskEvent, { by: `gitea:user:${c.actor.login}` })
        .catch((error: unknown) => options.logger?.warn({ taskId: outcome.followUp, err: error instanceof Error ? error.message : String(error) }, 'follow-up not re-queued'));
    }
    if (outcome.taskId !== undefined && plan.kind === 'accept') safely(() => options.onAccepted?.(outcome.taskId!));
    if (outcome.stop !== undefined && c) {
      const targets = outcome.stop;
      await sendStops(runtime, targets, `gitea:user:${c.actor.login}`).catch((error: unknown) =>
        options.logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'stop events not all sent'),
      );
      safely(() => options.onStop?.(targets.map((t) => t.taskId)));
    }
    return outcome.response;
  }

  function insertArchived<T extends StoredRecord>(tx: Tx, collection: CollectionName, key: string, record: T): T {
    const stored = tx.insert(collection, key, record);
    tx.archive(collection, key);
    return stored;
  }

  function write(tx: Tx, s: Subject, plan: Plan, workspacePath: string): Outcome {
    const c = s.comment;
    const at = now();
    // Delivery, trigger and new session records are only ever read by key (dedup, the detail view, the
    // session manager) or scanned by retention: they go straight to the store's cold tier.
    const delivery = (status: DeliveryRecord['status'], reason: string | null, taskId: string | null, response: IntakeResponse) =>
      insertArchived(
        tx,
        'webhook_deliveries',
        s.deliveryKey,
        deliveryRecord({
          deliveryKey: s.deliveryKey,
          deliveryId: s.deliveryId,
          eventType: s.eventType,
          receivedAt: s.receivedAt,
          retentionMs,
          normalized: c !== null,
          taskId,
          status,
          reason,
          payloadHash: s.hash,
          response,
        }),
      );
    const actor = c ? `gitea:user:${c.actor.login}` : 'gitea:webhook';
    const audit = (action: string, extra: Partial<AuditEventInput> = {}) =>
      tx.appendAudit({
        action,
        actor,
        deliveryId: s.deliveryId,
        ...extra,
        metadata: {
          deliveryKey: s.deliveryKey,
          eventType: s.eventType,
          ...(c ? { repoKey: c.repoKey, resourceKey: c.resourceKey, commentId: c.comment.id } : {}),
          ...(extra.metadata ?? {}),
        },
      });

    // 1. The same delivery again: its first answer.
    const known = tx.get<DeliveryRecord>('webhook_deliveries', s.deliveryKey);
    if (known) {
      audit('webhook.duplicate_delivery', {
        taskId: known.taskId,
        errorCode: 'duplicate_delivery',
        metadata: { payloadMatches: known.payloadHash === s.hash },
      });
      return { response: repeatOf(known.response) };
    }
    // 2. The same comment under a new delivery id (Gitea's manual Replay).
    if (s.triggerKey !== null) {
      const trigger = tx.get<CommentTriggerRecord>('comment_triggers', s.triggerKey);
      if (trigger) {
        const response = duplicate(trigger.taskId);
        delivery('duplicate', 'duplicate_comment', trigger.taskId, response);
        audit('webhook.duplicate_comment', { taskId: trigger.taskId, errorCode: 'duplicate_comment', metadata: { originalDeliveryKey: trigger.deliveryKey } });
        return { response };
      }
    }
    if (plan.kind === 'ignored') {
      const response = ignored(plan.reason);
      delivery('ignored', plan.reason, null, response);
      audit('webhook.ignored', { errorCode: plan.reason });
      return { response };
    }
    if (c === null) return null;
    // 3. Disabled by an operator: no task, whoever asks.
    if (tx.get<RepositoryRecord>('repositories', c.repoKey)?.status === 'disabled') {
      delivery('rejected', 'repository_disabled', null, REPOSITORY_DISABLED);
      audit('webhook.repository_disabled', { errorCode: 'repository_disabled' });
      return { response: REPOSITORY_DISABLED };
    }
    if (plan.kind === 'probe') return null;

    const triggerKey = s.triggerKey!;
    const taskId = taskIdFor(s.deliveryKey);

    if (plan.kind === 'stop') {
      const targets = stopTargets(store, c.resourceKey);
      const taskIds = targets.map((t) => t.taskId);
      const response = stopped(taskIds);
      delivery('accepted', 'stop', null, response);
      insertArchived(tx, 'comment_triggers', triggerKey, triggerRecord(triggerKey, s.deliveryKey, null, at));
      audit('webhook.stop', { metadata: { taskIds, events: targets.map((t) => t.event) } });
      return { response, stop: targets };
    }

    if (plan.kind === 'reject') {
      // Visible to operators as a task in `rejected`; no repository, session or receipt is created
      // for someone who may not trigger work.
      const event = audit('webhook.rejected', { taskId, actorId: taskActorId(taskId), errorCode: plan.reason });
      const response = rejected(plan.reason, taskId);
      delivery('rejected', plan.reason, taskId, response);
      insertArchived(tx, 'comment_triggers', triggerKey, triggerRecord(triggerKey, s.deliveryKey, taskId, at));
      tx.insert('tasks', taskId, taskWithTextStoredOnce(tx, taskRecord(c, taskId, event.seq, at)));
      const reject: TaskEvent = { type: 'REJECT', reason: plan.reason };
      const created = runtime.createInTx(tx, TASK_KIND, taskActorId(taskId), { taskId }, {
        events: [reject],
        by: actor,
        taskId,
      });
      return { response, start: created.start, taskId };
    }

    // A reply to a task that asked the user something (spec: session = resource): the same task
    // is re-queued with this comment as its next input, on the same thread; no new task or receipt.
    // Few tasks wait at any time, while one resource may have many: search the state index.
    const waiting = store.byIndex<TaskRecord>('tasks', 'state', 'waiting_user').find((t) => t.resourceKey === c.resourceKey);
    if (waiting) {
      audit('webhook.follow_up', { taskId: waiting.taskId, actorId: taskActorId(waiting.taskId) });
      const response = accepted(s.deliveryId, waiting.taskId);
      delivery('accepted', 'follow_up', waiting.taskId, response);
      insertArchived(tx, 'comment_triggers', triggerKey, triggerRecord(triggerKey, s.deliveryKey, waiting.taskId, at));
      const followUps = [...(waiting.followUps ?? []), followUpWithTextStoredOnce(tx, waiting.taskId, { commentId: c.comment.id, author: c.actor.login, body: c.comment.body, commentUrl: c.comment.htmlUrl, deliveryKey: s.deliveryKey, at: at.toISOString() })];
      tx.put('tasks', waiting.taskId, { ...waiting, followUps });
      return { response, followUp: waiting.taskId, taskId: waiting.taskId };
    }

    // Over a daily quota: a task in `rejected` (visible to operators) and ONE comment saying when the
    // user can try again — never a silent drop.
    const who = { repoKey: c.repoKey, login: c.actor.login };
    const refusal = options.quota?.check(tx, who, at) ?? null;
    if (refusal) {
      const event = audit('webhook.quota_refused', { taskId, actorId: taskActorId(taskId), errorCode: refusal.code, metadata: { limit: refusal.limit, used: refusal.used, retryAt: refusal.retryAt } });
      const response = rejected(refusal.code, taskId);
      delivery('rejected', refusal.code, taskId, response);
      insertArchived(tx, 'comment_triggers', triggerKey, triggerRecord(triggerKey, s.deliveryKey, taskId, at));
      const task = tx.insert('tasks', taskId, taskWithTextStoredOnce(tx, taskRecord(c, taskId, event.seq, at)));
      const refuse: TaskEvent = { type: 'REJECT', reason: refusal.code };
      const created = runtime.createInTx(tx, TASK_KIND, taskActorId(taskId), { taskId }, { events: [refuse], by: actor, taskId });
      const receipt = pendingReceiptRecord(task, 'refused', at);
      tx.insert('comments', receipt.commentKey, { ...receipt, errorCode: refusal.code, quota: refusal });
      options.quota!.countRefused(tx, who, at);
      return { response, start: created.start, taskId };
    }

    // Accepted. The audit event's store-wide sequence number doubles as the FIFO queue position.
    options.quota?.countAccepted(tx, who, at);
    const event = audit('webhook.accept', { taskId, actorId: taskActorId(taskId), metadata: { eventType: s.eventType } });
    const response = accepted(s.deliveryId, taskId);
    delivery('accepted', null, taskId, response);
    insertArchived(tx, 'comment_triggers', triggerKey, triggerRecord(triggerKey, s.deliveryKey, taskId, at));
    if (tx.get('repositories', c.repoKey) === undefined) {
      tx.insert('repositories', c.repoKey, repositoryRecord(c, workspacePath, at));
      audit('repository.register', { metadata: { workspacePath } });
    }
    const task = tx.insert('tasks', taskId, taskWithTextStoredOnce(tx, taskRecord(c, taskId, event.seq, at)));
    // Sessions too are read by key only; the session manager's first write brings one back to memory.
    if (tx.get('sessions', c.resourceKey) === undefined) insertArchived(tx, 'sessions', c.resourceKey, sessionRecord(task, hostRef, at));
    const created = runtime.createInTx(tx, TASK_KIND, taskActorId(taskId), { taskId }, {
      events: [{ type: 'ACCEPT' }],
      by: actor,
      taskId,
      // Queued tasks wait for the scheduler: no live actor until it sends CLAIM.
      deferHosting: true,
    });
    const receipt = pendingReceiptRecord(task, 'received', at);
    tx.insert('comments', receipt.commentKey, receipt);
    return { response, start: created.start, taskId };
  }

  async function invalidPayload(headers: WebhookHeaders, issues: string): Promise<IntakeResponse> {
    const deliveryId = getHeader(headers, 'x-gitea-delivery')?.trim();
    await store.transact((tx) =>
      tx.appendAudit({
        action: 'webhook.invalid_payload',
        actor: 'gitea:webhook',
        deliveryId: deliveryId !== undefined && isValidDeliveryId(deliveryId) ? deliveryId : null,
        errorCode: 'invalid_payload',
        // Zod issues name fields and rules, never values.
        metadata: { issues: issues.slice(0, 1000) },
      }),
    );
    return INVALID_PAYLOAD;
  }

  async function refuseForeignOrigin(deliveryId: string, c: NormalizedComment, foreign: ForeignOrigin): Promise<IntakeResponse> {
    await store.transact((tx) =>
      tx.appendAudit({
        action: 'webhook.foreign_repository_origin',
        actor: `gitea:user:${c.actor.login}`,
        level: 'security',
        deliveryId,
        errorCode: 'foreign_repository_origin',
        metadata: { repoKey: c.repoKey, field: foreign.field, host: foreign.host },
      }),
    );
    options.logger?.warn({ deliveryId, repoKey: c.repoKey, field: foreign.field, host: foreign.host }, 'signed webhook names a repository URL on another host than CCWEB_GITEA_URL: refused');
    return FOREIGN_REPOSITORY_ORIGIN;
  }

  const security =
    options.securityEvents ?? createSecurityEvents({ store, ...(options.now ? { now: () => options.now!().getTime() } : {}), ...(options.logger ? { logger: options.logger } : {}) });

  function auditBadSignature(request: IntakeRequest, reason: string): Promise<void> {
    return security.record(reason === 'invalid_form' ? 'invalid_form' : 'invalid_signature', request.remoteAddress, {
      deliveryId: safeValue(getHeader(request.headers, 'x-gitea-delivery')),
      userAgent: safeValue(getHeader(request.headers, 'user-agent')),
      event: safeValue(getHeader(request.headers, 'x-gitea-event')),
      bodyBytes: request.rawBody.length,
    });
  }

  function safely(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      options.logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'intake callback failed');
    }
  }

  return {
    handle,
    flush: () => security.flush(),
    close: () => security.close(),
  };
}
