// Webhook intake (spec §5.1): one signed Gitea delivery in, at most one durable queued task out.
//
// Order: content type → signature (401, security audit only) → event kind → delivery id →
// delivery dedup → normalise (400) → comment-trigger dedup → filters → disabled repository (409)
// → the comment read back from Gitea and the authorisation, in parallel (async) → ONE transaction
// that re-checks every uniqueness rule and writes the outcome. A payload Gitea contradicts is refused
// (confirm-comment.ts); a lookup that fails for a passing reason leaves the comment waiting in
// `pending_intake` (pending-intake.ts), retried by this file's loop until Gitea decides. Because the store's transactions are serializable, the
// re-check inside the transaction is what makes 50 concurrent identical posts yield one task; the
// checks before it only spare the authorisation call for requests already known to be repeats.
//
// Every answer that reports a stored outcome is given only after that outcome is durable: a write
// resolves once it is committed, and a repeat is answered after an audit write, which the store
// commits after everything it is answering about.
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import { anyDisabled, sameRepoKey } from '../domain/repository-identity.js';
import { workspacePathFor } from '../domain/workspace-path.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { StoreError, UniqueViolationError, type Store } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';
import type { QuotaPort } from '../usage/quota-check.js';
import { authorizeActor, type AuthorizeResult, type RepoPermission } from '../webhook/authorize-actor.js';
import { classifyComment, classifyEvent } from '../webhook/classify.js';
import { getHeader, type WebhookHeaders } from '../webhook/headers.js';
import { INSTANCE_ID, commentTriggerKey, isSafeName, isValidDeliveryId, normalizeComment, type NormalizedComment } from '../webhook/normalize-comment.js';
import { foreignRepositoryOrigin, type ForeignOrigin } from '../webhook/repository-origin.js';
import { extractPayload, verifySignature } from '../webhook/verify-signature.js';
import { normalizeReview, reviewEventType, type NormalizedReview } from '../webhook/review-event.js';
import type { DeliveryRecord, RepositoryRecord } from '../domain/records.js';
import { asLineReply, type GiteaReviewCommentFacts } from './review-tasks.js';
import { lookUpReview, type ReviewLookupDeps, type ReviewReader, type ReviewVerdict } from './review-lookup.js';
import { canonicalComment, resolveRepository, type ResolvedComment } from './canonical-repository.js';
import { compareWithGitea, describeLookupError, isClearNo, sha256Hex, type GiteaCommentFacts, type MismatchField } from './confirm-comment.js';
import {
  DEFAULT_MAX_PENDING,
  DEFAULT_RETRY_POLICY,
  PENDING_INTAKE,
  admit,
  afterFailure,
  dueRecords,
  pendingRecord,
  reviewPendingKey,
  type PendingIntakeRecord,
  type RetryPolicy,
} from './pending-intake.js';
import { deliveryRecord } from './intake-records.js';
import { DEFAULT_DELIVERY_RETENTION_MS, payloadHash } from './intake-records.js';
import {
  FOREIGN_REPOSITORY_ORIGIN,
  INVALID_PAYLOAD,
  PENDING_BACKLOG_FULL,
  STORE_UNAVAILABLE,
  UNAUTHORIZED,
  UNSUPPORTED_MEDIA_TYPE,
  pendingConfirmation,
  rejected,
  type IntakeResponse,
} from './intake-response.js';
import type { Outcome, Plan, Subject } from './intake-types.js';
import type { Tx } from '../store/types.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import { createSecurityEvents, safeValue, type SecurityEvents } from './security-events.js';
import { sendStops } from './stop-tasks.js';
import { withTimeout } from './with-timeout.js';
import { writeOutcome, type WriteContext } from './write-outcome.js';

export interface IntakeLogger {
  warn(obj: Record<string, unknown>, msg?: string): void;
}

export interface IntakeOptions {
  /** Several nodes: this node's id, recorded on the tasks it accepts (the scheduler's claim preference). */
  nodeId?: string;
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
   * Gitea's `GET /repos/{o}/{r}/issues/comments/{id}` (src/gitea/comment-on-gitea.ts): the comment as
   * Gitea has it. Every mention that would act (a task, a stop) is compared with it first
   * (confirm-comment.ts); the text the agent receives is Gitea's.
   */
  commentOnGitea: (owner: string, repo: string, id: number) => Promise<GiteaCommentFacts>;
  /**
   * Gitea's review API (src/gitea/review-on-gitea.ts): a review delivery names neither the review nor
   * its line comments, so both are read here. Unset: review deliveries are ignored as
   * `unsupported_event`.
   */
  reviewOnGitea?: ReviewReader;
  /** Bounds of the retries of a comment Gitea has not decided on (pending-intake.ts). */
  pendingRetry?: Partial<RetryPolicy>;
  /** Comments waiting for Gitea at most; one more → 503. Default 1000. */
  maxPending?: number;
  /** How often the retry loop looks for due comments. Default 1000 ms. */
  pendingPollMs?: number;
  /**
   * The repositories whose waiting comments this node asks Gitea about again: the retry
   * loop skips a comment of a repository another node owns, asked per comment at each pass. Only the
   * loop: which node handles a delivery is decided before intake. Default: every repository.
   */
  scope?: Pick<RepositoryScope, 'owns' | 'leads'>;
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
  /** A task (or its receipt) was written for the delivery `deliveryId`. */
  onAccepted?: (taskId: string, deliveryId: string) => void;
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
  /** Starts the loop that asks Gitea again about waiting comments (pending-intake.ts). */
  start(): void;
  /** One pass of that loop now: every waiting comment that is due. Resolves with how many were tried. */
  retryDue(): Promise<number>;
  /** Writes the counts of the current security-event window (call at shutdown). */
  flush(): Promise<void>;
  /** Stops the retry loop and the security-event window timer, and writes its counts. */
  close(): Promise<void>;
}

/** What Gitea said about a comment, both lookups together. */
type Verdict =
  | { kind: 'refused'; reasons: Array<MismatchField | 'not_found' | 'repository'> }
  | { kind: 'undecided'; error: string }
  | { kind: 'decided'; auth: AuthorizeResult; body: string; line?: GiteaReviewCommentFacts };

/** The reason (delivery, answer, security event) of a payload Gitea contradicts. */
export const COMMENT_NOT_CONFIRMED = 'comment_not_confirmed';

/** The review in the shape repository resolution and the origin check take (no comment of its own yet). */
function reviewAsComment(r: NormalizedReview): NormalizedComment {
  return {
    instanceId: INSTANCE_ID,
    deliveryId: r.deliveryId,
    deliveryKey: r.deliveryKey,
    eventType: 'pull_request_comment',
    action: r.action,
    repo: r.repo,
    repoKey: r.repoKey,
    resource: r.resource,
    resourceKey: r.resourceKey,
    comment: { id: 0, body: r.content, createdAt: '', updatedAt: '', htmlUrl: '' },
    actor: r.actor,
    refs: r.refs,
  };
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
  const retryPolicy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.pendingRetry };
  const maxPending = options.maxPending ?? DEFAULT_MAX_PENDING;
  const scope = options.scope ?? EVERY_REPOSITORY;
  const writeContext: WriteContext = {
    runtime,
    now,
    retentionMs,
    securityEventRetentionMs: options.securityEventRetentionMs ?? 30 * 24 * 60 * 60 * 1000,
    hostRef: options.mcpHostRef ?? 'gitea-main',
    quota: options.quota,
    nodeId: options.nodeId,
  };

  const reviewDeps: ReviewLookupDeps = {
    reader: () => options.reviewOnGitea!,
    botLogin,
    timeoutMs: permissionTimeoutMs,
    authorize: (c) => authorize(c),
    requestChangesStartsTask: async (c) => ((await resolveRepository(store, c)).records[0] as RepositoryRecord | undefined)?.reviewTriggers?.requestChanges === true,
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
    if ((await store.get('webhook_deliveries', deliveryKey)) !== undefined) {
      const repeat = await commit(subject, { kind: 'probe' });
      if (repeat !== null) return repeat;
    }
    if (reviewEventType(headers) !== null && options.reviewOnGitea) return processReview(request, subject, json);
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
    const { comment: c, repoMismatch } = await registeredName(await resolveRepository(store, normalized.value));
    subject.comment = c;
    subject.triggerKey = commentTriggerKey(c);
    const payloadTriggerKey = commentTriggerKey(normalized.value);
    if (payloadTriggerKey !== subject.triggerKey) subject.payloadTriggerKey = payloadTriggerKey;
    if (await knownOutcome(store, subject)) {
      const known = await commit(subject, { kind: 'probe' });
      if (known !== null) return known;
    }

    // Nothing acts on the payload's word: the comment as Gitea has it, and the author's permission.
    // (A Replay of a comment still waiting for Gitea comes here too, and is decided now if it can be.)
    const waiting: Waiting = {
      bodySha256: sha256Hex(c.comment.body),
      command: decision.command.kind === 'stop' ? 'stop' : 'task',
      source: request.remoteAddress ?? null,
    };
    const verdict = await lookUp(c, waiting.bodySha256, repoMismatch);
    return settle(subject, c, waiting, verdict);
  }

  /**
   * A review delivery: the review and its line comments read back from Gitea, then each task
   * they make (review-tasks.ts) written like an accepted comment, under its own delivery key part (one
   * delivery may make several tasks) and its own trigger (a Replay is a duplicate). A lookup Gitea
   * cannot answer now (5xx, a timeout, Gitea down, the bot's token refused) leaves the delivery waiting
   * in `pending_intake` as a comment does (202 `pending_confirmation`), asked again by the retry loop; a
   * clear "no" (404, a review that does not match) refuses it.
   */
  async function processReview(request: IntakeRequest, s: Subject, json: Buffer): Promise<IntakeResponse> {
    const normalized = normalizeReview(request.headers, json, { botLogin });
    if (!normalized.ok) return invalidPayload(request.headers, normalized.issues);
    const r0 = normalized.value;
    s.eventType = r0.eventType;
    const base = reviewAsComment(r0);
    const foreign = options.repositoryHosts ? foreignRepositoryOrigin(r0.repo, options.repositoryHosts) : null;
    if (foreign !== null) return refuseForeignOrigin(s.deliveryId, base, foreign);
    if (r0.actor.isBot) return (await commit(s, { kind: 'ignored', reason: 'bot_self_comment' }))!;
    const { comment: c, repoMismatch } = await registeredName(await resolveRepository(store, base));
    const r: NormalizedReview = { ...r0, repo: c.repo, repoKey: c.repoKey, resourceKey: c.resourceKey };
    const waiting: Waiting = { bodySha256: sha256Hex(r0.content), command: 'task', source: request.remoteAddress ?? null };
    const key = reviewPendingKey(c.repoKey, s.hash);
    const verdict: ReviewVerdict = repoMismatch ? { kind: 'refused', reasons: ['repository'] } : await lookUpReview(reviewDeps, r, c, waiting.bodySha256);
    return settleReview(s, key, c, r, waiting, verdict, false);
  }

  /** Writes what a review verdict means for this delivery: refused, ignored, still waiting (under `key`), or its tasks. */
  async function settleReview(s: Subject, key: string, c: NormalizedComment, r: NormalizedReview, w: Waiting, verdict: ReviewVerdict, retrying: boolean): Promise<IntakeResponse> {
    const dropPending = async (tx: Tx) => {
      if ((await tx.get(PENDING_INTAKE, key)) !== undefined) await tx.delete(PENDING_INTAKE, key);
    };
    if (verdict.kind === 'refused') return refuseUnconfirmed(s, c, w, verdict.reasons, dropPending);
    if (verdict.kind === 'undecided') return waitForGitea(s, key, c, w, verdict.error, { review: r, retrying });
    if (verdict.kind === 'ignored') return (await commit({ ...s, comment: c }, { kind: 'ignored', reason: verdict.reason }, dropPending))!;
    const answers: IntakeResponse[] = [];
    for (const item of verdict.items) {
      const part: Subject = { ...s, deliveryKey: `${s.deliveryKey}:${item.part}`, comment: { ...item.comment, deliveryKey: `${s.deliveryKey}:${item.part}` }, triggerKey: item.triggerKey };
      answers.push((await commit(part, verdict.plan, dropPending))!);
    }
    const first = answers[0]!;
    return answers.length === 1 ? first : { status: first.status, body: { ...first.body, taskIds: answers.map((a) => a.body['taskId'] ?? null) } };
  }

  /**
   * Gitea did not decide (a passing failure): the delivery waits under `key` and is asked about again
   * (pending-intake.ts); 202 `pending_confirmation`. A retry (`retrying`) whose record is gone was
   * decided meanwhile (a Replay): nothing waits again.
   */
  async function waitForGitea(s: Subject, key: string, c: NormalizedComment, w: Waiting, error: string, extra: { review?: NormalizedReview; retrying?: boolean } = {}): Promise<IntakeResponse> {
    const at = now();
    const answer = await store.transact(async (tx): Promise<IntakeResponse | null> => {
      // Decided meanwhile (a Replay, or the loop): that outcome answers.
      if ((await tx.get('comment_triggers', key)) !== undefined) return null;
      const prior = await tx.get<PendingIntakeRecord>(PENDING_INTAKE, key);
      if (prior !== undefined) {
        const next = prior.state === 'gave_up' ? afterFailure({ ...prior, attempts: Math.max(0, retryPolicy.maxAttempts - 2) }, at, error, retryPolicy) : afterFailure(prior, at, error, retryPolicy);
        await tx.put(PENDING_INTAKE, key, next);
        return pendingConfirmation(s.deliveryId, next);
      }
      if (extra.retrying === true) return null;
      const room = admit(await tx.list<PendingIntakeRecord>(PENDING_INTAKE), maxPending);
      if (!room.ok) return PENDING_BACKLOG_FULL;
      if (room.evict !== null) await tx.delete(PENDING_INTAKE, room.evict);
      const record = pendingRecord(
        {
          key,
          deliveryKey: s.deliveryKey,
          deliveryId: s.deliveryId,
          eventType: s.eventType,
          payloadHash: s.hash,
          receivedAt: s.receivedAt,
          comment: c,
          ...(extra.review !== undefined ? { review: extra.review } : {}),
          bodySha256: w.bodySha256,
          command: w.command,
          source: w.source,
          error,
        },
        at,
        retryPolicy,
      );
      await tx.put(PENDING_INTAKE, key, record);
      return pendingConfirmation(s.deliveryId, record);
    });
    if (answer === null) return (await commit(s, { kind: 'probe' })) ?? PENDING_BACKLOG_FULL;
    if (answer !== PENDING_BACKLOG_FULL) {
      const what = extra.review !== undefined ? 'a review' : 'a comment';
      options.logger?.warn({ deliveryId: s.deliveryId, commentId: c.comment.id, error }, `Gitea did not decide on ${what}: it waits and is asked again`);
    }
    return answer;
  }

  interface Waiting {
    bodySha256: string;
    command: 'task' | 'stop';
    source: string | null;
  }

  /** Both lookups at once (the acknowledgement waits for the slower one, not for their sum). */
  async function lookUp(c: NormalizedComment, bodySha256: string, repoMismatch: boolean): Promise<Verdict> {
    const [found, auth] = await Promise.all([
      withTimeout(options.commentOnGitea(c.repo.owner, c.repo.name, c.comment.id), permissionTimeoutMs, 'comment lookup').then(
        (facts) => ({ ok: true as const, facts }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
      authorize(c),
    ]);
    // Gitea 1.26.3 answers `GET …/issues/comments/{id}` of a reply in a line thread (a code comment) with
    // 204 and no body: such a comment is read from its thread's review instead (review-on-gitea.ts).
    const line = !found.ok && !isClearNo(found.error) ? await lineOfReply(c) : null;
    const facts: GiteaCommentFacts | null = found.ok ? found.facts : line === null ? null : { id: line.id, body: line.body, user: line.user, issueUrl: '', pullRequestUrl: line.htmlUrl, createdAt: line.createdAt, updatedAt: line.updatedAt };
    if (facts === null) {
      const error = (found as { error: unknown }).error;
      return isClearNo(error) ? { kind: 'refused', reasons: ['not_found'] } : { kind: 'undecided', error: `comment lookup: ${describeLookupError(error)}` };
    }
    const compared = compareWithGitea({ comment: c, bodySha256 }, facts);
    const reasons: Array<MismatchField | 'repository'> = compared.confirmed ? [] : [...compared.mismatch];
    if (repoMismatch) reasons.push('repository');
    if (reasons.length > 0) return { kind: 'refused', reasons };
    if (!auth.allowed && auth.reason === 'permission_check_failed') {
      return { kind: 'undecided', error: `permission lookup: ${describeLookupError(auth.error)}` };
    }
    return { kind: 'decided', auth, body: facts.body, ...(line !== null ? { line } : {}) };
  }

  /** A PR comment as a line-thread reply (its thread's review comment), or null: not one, or not readable now. */
  async function lineOfReply(c: NormalizedComment): Promise<GiteaReviewCommentFacts | null> {
    const lineOf = options.reviewOnGitea?.lineOf;
    if (lineOf === undefined || c.resource.kind !== 'pull_request') return null;
    const line = await withTimeout(lineOf(c.repo.owner, c.repo.name, c.resource.number, c.comment.id), permissionTimeoutMs, 'line thread lookup').catch(() => null);
    return line !== null && line.id === c.comment.id ? line : null;
  }

  /** Writes what the verdict means for this delivery: refused, still waiting, or the decided outcome. */
  async function settle(s: Subject, c: NormalizedComment, w: Waiting, verdict: Verdict, retrying = false): Promise<IntakeResponse> {
    const key = s.triggerKey!;
    const dropPending = async (tx: Tx) => {
      if ((await tx.get(PENDING_INTAKE, key)) !== undefined) await tx.delete(PENDING_INTAKE, key);
    };
    if (verdict.kind === 'refused') return refuseUnconfirmed(s, c, w, verdict.reasons, dropPending);
    if (verdict.kind === 'undecided') return waitForGitea(s, key, c, w, verdict.error, { retrying });
    const plan: Plan = !verdict.auth.allowed
      ? { kind: 'reject', reason: verdict.auth.reason, reader: 'readerOnly' in verdict.auth && verdict.auth.readerOnly === true }
      : w.command === 'stop'
        ? { kind: 'stop' }
        : { kind: 'accept' };
    const confirmed: NormalizedComment = { ...c, comment: { ...c.comment, body: verdict.body } };
    // A reply in a line thread, confirmed through its thread: the agent gets the line's context too.
    const decided = verdict.line !== undefined ? asLineReply(confirmed, verdict.line) : confirmed;
    return (await commit({ ...s, comment: decided }, plan, dropPending))!;
  }

  /**
   * A signed payload Gitea contradicts: one security event (counted per source and window), a
   * delivery record that answers its repeats, nothing else — no task, no trigger (the real comment,
   * if any, is still decided on its own), nothing posted.
   */
  async function refuseUnconfirmed(s: Subject, c: NormalizedComment, w: Waiting, reasons: string[], dropPending: (tx: Tx) => Promise<void>): Promise<IntakeResponse> {
    const response = rejected(COMMENT_NOT_CONFIRMED, null);
    await store.transact(async (tx) => {
      await dropPending(tx);
      if ((await tx.get('webhook_deliveries', s.deliveryKey)) !== undefined) return;
      await tx.insert<DeliveryRecord>('webhook_deliveries', s.deliveryKey, deliveryRecord({ deliveryKey: s.deliveryKey, deliveryId: s.deliveryId, eventType: s.eventType, receivedAt: s.receivedAt, retentionMs, normalized: true, taskId: null, status: 'rejected', reason: COMMENT_NOT_CONFIRMED, payloadHash: s.hash, response }), { archived: true });
    });
    await security.record(COMMENT_NOT_CONFIRMED, w.source ?? undefined, {
      deliveryId: safeValue(s.deliveryId),
      repoKey: safeValue(c.repoKey),
      resource: `${c.resource.kind}:${c.resource.number}`,
      commentId: c.comment.id,
      sender: safeValue(c.actor.login),
      mismatch: reasons.join(',').slice(0, 100),
    });
    options.logger?.warn({ deliveryId: s.deliveryId, repoKey: c.repoKey, commentId: c.comment.id, mismatch: reasons }, 'signed webhook does not match the comment on Gitea: refused');
    return response;
  }

  /** One waiting comment asked about again; the outcome is written under the delivery it came in. */
  async function retryOne(r: PendingIntakeRecord): Promise<void> {
    const subject: Subject = {
      deliveryKey: r.deliveryKey,
      deliveryId: r.deliveryId,
      eventType: r.eventType,
      hash: r.payloadHash,
      receivedAt: new Date(r.receivedAt),
      comment: r.comment,
      triggerKey: r.key,
    };
    const w: Waiting = { bodySha256: r.bodySha256, command: r.command, source: r.source };
    if (r.review !== undefined) {
      // A review delivery: its review looked up again; its tasks carry their own triggers.
      await settleReview({ ...subject, triggerKey: null }, r.key, r.comment, r.review, w, await lookUpReview(reviewDeps, r.review, r.comment, r.bodySha256), true);
      return;
    }
    const verdict = await lookUp(r.comment, r.bodySha256, false);
    await settle(subject, r.comment, w, verdict, true);
  }

  let timer: NodeJS.Timeout | undefined;
  let pass: Promise<number> | null = null;
  let closed = false;

  function retryDue(): Promise<number> {
    // One pass at a time: a slow Gitea must not stack passes asking about the same comments.
    if (pass === null) {
      const current = retryPass();
      pass = current;
      const clear = () => {
        if (pass === current) pass = null;
      };
      // The caller hears of a failed pass; this chain only clears it (never an unhandled rejection).
      void current.then(clear, clear);
    }
    return pass;
  }

  async function retryPass(): Promise<number> {
    await Promise.resolve();
    let tried = 0;
    for (const r of dueRecords(await store.list<PendingIntakeRecord>(PENDING_INTAKE), now())) {
      if (closed) break;
      if (!scope.owns(r.comment.repoKey)) continue;
      tried += 1;
      await retryOne(r).catch((error: unknown) => options.logger?.warn({ key: r.key, err: error instanceof Error ? error.message : String(error) }, 'waiting comment not retried'));
    }
    return tried;
  }


  /**
   * A repository seen for the first time is registered under the name Gitea has for its id, when that
   * is the payload's name in another letter case. A name that differs otherwise (a rename, or an id
   * the payload made up) is left as the payload said: the id alone never moves a comment to another
   * repository's records.
   */
  async function registeredName(resolved: ResolvedComment): Promise<{ comment: NormalizedComment; repoMismatch: boolean }> {
    const c = resolved.comment;
    if (resolved.records.length > 0 || !options.repositoryName) return { comment: c, repoMismatch: false };
    const found = await withTimeout(options.repositoryName(c.repo.id), permissionTimeoutMs, 'repository lookup').catch(() => null);
    if (found === null) return { comment: c, repoMismatch: false };
    const repoKey = `${INSTANCE_ID}:${found.owner}/${found.name}`;
    // Another repository under this id: the payload's id is not its repository's.
    if (!sameRepoKey(repoKey, c.repoKey)) return { comment: c, repoMismatch: true };
    if (repoKey === c.repoKey || !isSafeName(found.owner) || !isSafeName(found.name)) return { comment: c, repoMismatch: false };
    return { comment: canonicalComment(c, { repoKey, owner: found.owner, name: found.name }), repoMismatch: false };
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
   * True when a write would be decided by an existing record rather than by the plan (the delivery
   * itself was looked up just before). Only a shortcut: the transaction re-checks all of it.
   */
  async function knownOutcome(reader: Reader, s: Subject): Promise<boolean> {
    if (s.triggerKey !== null && (await reader.get('comment_triggers', s.triggerKey)) !== undefined) return true;
    if (s.payloadTriggerKey != null && (await reader.get('comment_triggers', s.payloadTriggerKey)) !== undefined) return true;
    return s.comment !== null && anyDisabled((await resolveRepository(reader, s.comment)).records);
  }

  /** `null` only for a probe that found nothing to decide (the caller then goes on). */
  async function commit(s: Subject, plan: Plan, alsoInTx?: (tx: Tx) => Promise<void>): Promise<IntakeResponse | null> {
    const c = s.comment;
    const workspacePath =
      c && plan.kind === 'accept' ? workspacePathFor(options.workspaceRoot, c.instanceId, c.repo.owner, c.repo.name) : '';
    const outcome = await retriedOnUniqueViolation(() =>
      store.transact(async (tx): Promise<Outcome> => {
        await alsoInTx?.(tx);
        return writeOutcome(writeContext, tx, s, plan, workspacePath);
      }),
    );
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
    // A new task, or a stop's, a disabled repository's or a reader's one comment: the receipt outbox has a row to post.
    if (outcome.taskId !== undefined && (plan.kind === 'accept' || plan.kind === 'stop' || outcome.notice === true)) safely(() => options.onAccepted?.(outcome.taskId!, s.deliveryId));
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
    await store.transact(async (tx) =>
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
    await store.transact(async (tx) =>
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
    start() {
      if (timer !== undefined || closed) return;
      timer = setInterval(() => {
        retryDue().catch((error: unknown) => options.logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'waiting comments not read'));
      }, options.pendingPollMs ?? 1000);
      timer.unref();
    },
    retryDue,
    flush: () => security.flush(),
    async close() {
      closed = true;
      if (timer !== undefined) clearInterval(timer);
      await pass?.catch(() => undefined);
      await security.close();
    },
  };
}

/**
 * Another node committed a row this transaction checked for and then inserted (the same delivery or
 * comment, on PostgreSQL, which reads committed rows only): the transaction is run again and finds it.
 * Gitea does not retry a delivery answered 503, so failing here would lose the mention.
 */
async function retriedOnUniqueViolation<T>(run: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof UniqueViolationError) || attempt >= attempts) throw error;
    }
  }
}
