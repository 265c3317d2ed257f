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
import { anyDisabled, sameRepoKey } from '../domain/repository-identity.js';
import { workspacePathFor } from '../domain/workspace-path.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { StoreError, type Store } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';
import type { QuotaPort } from '../usage/quota-check.js';
import { authorizeActor, type AuthorizeResult, type RepoPermission } from '../webhook/authorize-actor.js';
import { classifyComment, classifyEvent } from '../webhook/classify.js';
import { getHeader, type WebhookHeaders } from '../webhook/headers.js';
import { INSTANCE_ID, commentTriggerKey, isSafeName, isValidDeliveryId, normalizeComment, type NormalizedComment } from '../webhook/normalize-comment.js';
import { foreignRepositoryOrigin, type ForeignOrigin } from '../webhook/repository-origin.js';
import { extractPayload, verifySignature } from '../webhook/verify-signature.js';
import { canonicalComment, resolveRepository, type ResolvedComment } from './canonical-repository.js';
import { DEFAULT_DELIVERY_RETENTION_MS, payloadHash } from './intake-records.js';
import {
  FOREIGN_REPOSITORY_ORIGIN,
  INVALID_PAYLOAD,
  STORE_UNAVAILABLE,
  UNAUTHORIZED,
  UNSUPPORTED_MEDIA_TYPE,
  type IntakeResponse,
} from './intake-response.js';
import type { Outcome, Plan, Subject } from './intake-types.js';
import { createSecurityEvents, safeValue, type SecurityEvents } from './security-events.js';
import { sendStops } from './stop-tasks.js';
import { withTimeout } from './with-timeout.js';
import { writeOutcome, type WriteContext } from './write-outcome.js';

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
  /**
   * Gitea's `GET /repositories/{id}`: the owner/name Gitea has for a repository id. Asked only when a
   * comment would register a repository nothing is stored for yet, so that it is registered under
   * Gitea's own letter case whatever case the payload used. Unset or failing: the payload's form.
   */
  repositoryName?: (repoId: number) => Promise<{ owner: string; name: string }>;
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
  /**
   * How long the per-author day counts of rejected mentions (`security_events`, kind
   * `mention_rejected`) are kept after their day. Default 30 days, as CCWEB_SECURITY_EVENT_RETENTION_DAYS.
   */
  securityEventRetentionMs?: number;
  /** Daily quotas (src/usage/quota-check.ts): a new task over one is refused with one comment. */
  quota?: QuotaPort;
  /** After a task was queued durably (e.g. wake the scheduler). Must not throw; errors are ignored. */
  onAccepted?: (taskId: string) => void;
  /** After a stop was recorded and its events sent. */
  onStop?: (taskIds: string[]) => void;
  logger?: IntakeLogger;
  /**
   * `compact` (default): an accepted comment is journalled as one compact record the store derives
   * the task's records from (write-outcome.ts). `records`: each record written on its own (the
   * generic path; kept for what the compact format does not cover and for comparing the two).
   */
  writeModel?: 'compact' | 'records';
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

interface Reader {
  get: Store['get'];
  list: Store['list'];
}

const EVENT_TYPE = /^[a-z_]{1,64}$/;

export function createIntake(options: IntakeOptions): Intake {
  const { store, runtime, botLogin, secrets } = options;
  const now = options.now ?? (() => new Date());
  const retentionMs = options.deliveryRetentionMs ?? DEFAULT_DELIVERY_RETENTION_MS;
  const permissionTimeoutMs = options.permissionTimeoutMs ?? 3000;
  const writeContext: WriteContext = {
    store,
    runtime,
    now,
    retentionMs,
    securityEventRetentionMs: options.securityEventRetentionMs ?? 30 * 24 * 60 * 60 * 1000,
    hostRef: options.mcpHostRef ?? 'gitea-main',
    quota: options.quota,
    compact: options.writeModel !== 'records',
  };

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
    const foreign = options.repositoryHosts ? foreignRepositoryOrigin(normalized.value.repo, options.repositoryHosts) : null;
    if (foreign !== null) return refuseForeignOrigin(deliveryId, normalized.value, foreign);
    subject.comment = normalized.value;
    subject.eventType = normalized.value.eventType;

    const decision = classifyComment(normalized.value, botLogin);
    if (decision.outcome === 'ignored') {
      // Ignored comments leave no trigger: an edit or a mention-less comment never becomes a task.
      // (Most comments end here: they are recorded as the payload named them, nothing is looked up.)
      return (await commit(subject, { kind: 'ignored', reason: decision.reason }))!;
    }
    // Names compare case-insensitively, as on Gitea: from here on the comment names its repository
    // as the store does (the write transaction resolves it again, finally).
    const c = await registeredName(resolveRepository(store, normalized.value));
    subject.comment = c;
    subject.triggerKey = commentTriggerKey(c);
    const payloadTriggerKey = commentTriggerKey(normalized.value);
    if (payloadTriggerKey !== subject.triggerKey) subject.payloadTriggerKey = payloadTriggerKey;
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

  /**
   * A repository seen for the first time is registered under the name Gitea has for its id, when that
   * is the payload's name in another letter case. A name that differs otherwise (a rename, or an id
   * the payload made up) is left as the payload said: the id alone never moves a comment to another
   * repository's records.
   */
  async function registeredName(resolved: ResolvedComment): Promise<NormalizedComment> {
    const c = resolved.comment;
    if (resolved.records.length > 0 || !options.repositoryName) return c;
    const found = await withTimeout(options.repositoryName(c.repo.id), permissionTimeoutMs, 'repository lookup').catch(() => null);
    if (found === null) return c;
    const repoKey = `${INSTANCE_ID}:${found.owner}/${found.name}`;
    if (repoKey === c.repoKey || !sameRepoKey(repoKey, c.repoKey) || !isSafeName(found.owner) || !isSafeName(found.name)) return c;
    return canonicalComment(c, { repoKey, owner: found.owner, name: found.name });
  }

  function authorize(c: NormalizedComment): Promise<AuthorizeResult> {
    return authorizeActor({
      login: c.actor.login,
      permissions: c.permissions,
      allowList: options.allowUsers,
      denyList: options.denyUsers,
      fetchPermission: (login) =>
        withTimeout(options.fetchPermission(c.repo.owner, c.repo.name, login), permissionTimeoutMs, 'permission lookup'),
    });
  }

  /**
   * True when a write would be decided by an existing record rather than by the plan. (The delivery
   * itself was looked up just before, with nothing asynchronous since.)
   */
  function knownOutcome(reader: Reader, s: Subject): boolean {
    if (s.triggerKey !== null && reader.get('comment_triggers', s.triggerKey) !== undefined) return true;
    if (s.payloadTriggerKey != null && reader.get('comment_triggers', s.payloadTriggerKey) !== undefined) return true;
    return s.comment !== null && anyDisabled(resolveRepository(reader, s.comment).records);
  }

  /** `null` only for a probe that found nothing to decide (the caller then goes on). */
  async function commit(s: Subject, plan: Plan): Promise<IntakeResponse | null> {
    const c = s.comment;
    const workspacePath =
      c && plan.kind === 'accept' ? workspacePathFor(options.workspaceRoot, c.instanceId, c.repo.owner, c.repo.name) : '';
    const outcome = await store.transact((tx): Outcome => writeOutcome(writeContext, tx, s, plan, workspacePath));
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
    // A new task, or a stop's or a disabled repository's one comment: the receipt outbox has a row to post.
    if (outcome.taskId !== undefined && (plan.kind === 'accept' || plan.kind === 'stop')) safely(() => options.onAccepted?.(outcome.taskId!));
    if (outcome.stop !== undefined && c) {
      const targets = outcome.stop;
      await sendStops(runtime, targets, `gitea:user:${c.actor.login}`).catch((error: unknown) =>
        options.logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'stop events not all sent'),
      );
      // Work in flight is stopped by its host (the executor); a task cancelled meanwhile is unaffected.
      safely(() => options.onStop?.(targets.map((t) => t.taskId)));
    }
    return outcome.response;
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
