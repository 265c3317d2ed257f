// Webhook intake (spec §5.1): one signed Gitea delivery in, at most one durable queued task out.
//
// verify → parse → dispatch: content type → signature (401, security audit only) → event headers
// and delivery id (400) → delivery dedup → the first handler of the table that takes the delivery
// (mention-handler.ts, review-handler.ts; none: ignored `unsupported_event`). A handler normalises
// (400), filters, reads what the payload claims back from Gitea with the author's permission, and
// ends in ONE transaction (intake-kit.ts `commit`) that re-checks every uniqueness rule and writes the
// outcome: that re-check is what makes 50 concurrent identical posts yield one task; the checks
// before it only spare Gitea's lookups for requests already known to be repeats. A payload Gitea
// contradicts is refused (confirm-comment.ts); a lookup that fails for a passing reason leaves the
// delivery waiting in `pending_intake` (pending-intake.ts), asked again by this file's loop through
// the handler that owns it until Gitea decides.
//
// Every answer that reports a stored outcome is given only after that outcome is durable: a write
// resolves once it is committed, and a repeat is answered after an audit write, which the store
// commits after everything it is answering about.
import { EVERY_REPOSITORY } from '../domain/repository-scope.js';
import { StoreError } from '../store/types.js';
import { safeValue } from './security-events.js';
import { classifyEvent } from '../webhook/classify.js';
import { getHeader } from '../webhook/headers.js';
import { INSTANCE_ID, isValidDeliveryId } from '../webhook/normalize-comment.js';
import { extractPayload, verifySignature } from '../webhook/verify-signature.js';
import type { IntakeHandler } from './intake-handler.js';
import { createIntakeKit, type Waiting } from './intake-kit.js';
import type { Intake, IntakeOptions, IntakeRequest } from './intake-options.js';
import { payloadHash } from './intake-records.js';
import { STORE_UNAVAILABLE, UNAUTHORIZED, UNSUPPORTED_MEDIA_TYPE, type IntakeResponse } from './intake-response.js';
import type { Subject } from './intake-types.js';
import { createMentionHandler } from './mention-handler.js';
import { PENDING_INTAKE, dueRecords, type PendingIntakeRecord } from './pending-intake.js';
import { createReviewHandler } from './review-handler.js';

export { COMMENT_NOT_CONFIRMED } from './intake-kit.js';
export type { Intake, IntakeLogger, IntakeOptions, IntakeRequest } from './intake-options.js';

const EVENT_TYPE = /^[a-z_]{1,64}$/;

export function createIntake(options: IntakeOptions): Intake {
  const { store, secrets } = options;
  const kit = createIntakeKit(options);
  const { now, security, commit, invalidPayload } = kit;
  const scope = options.scope ?? EVERY_REPOSITORY;
  /** What a delivery can be, in the order asked: reviews only when Gitea's review API is given. */
  const handlers: IntakeHandler[] = [...(options.reviewOnGitea ? [createReviewHandler(kit, options.reviewOnGitea)] : []), createMentionHandler(kit)];

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
    const handler = handlers.find((h) => h.takes(headers));
    if (handler === undefined) return (await commit(subject, { kind: 'ignored', reason: 'unsupported_event' }))!;
    return handler.handle(request, subject, json);
  }

  /** One waiting delivery asked about again, by the handler it belongs to. */
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
    const handler = handlers.find((h) => h.owns(r));
    if (handler === undefined) throw new Error(`no handler for waiting delivery ${r.key} (its kind is not handled by this service's settings)`);
    await handler.retry(r, subject, w);
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


  function auditBadSignature(request: IntakeRequest, reason: string): Promise<void> {
    return security.record(reason === 'invalid_form' ? 'invalid_form' : 'invalid_signature', request.remoteAddress, {
      deliveryId: safeValue(getHeader(request.headers, 'x-gitea-delivery')),
      userAgent: safeValue(getHeader(request.headers, 'user-agent')),
      event: safeValue(getHeader(request.headers, 'x-gitea-event')),
      bodyBytes: request.rawBody.length,
    });
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
