// A webhook goes to the node that owns its repository (docs/DESIGN-nodes-at-once.md
// step 5): called by the webhook route (src/intake/webhook-route.ts, option `route`) once the whole
// body is read and before intake. The repository is read from the payload as intake reads it
// (extractPayload: JSON or a form's `payload=`; the same schema), and routed on its folded name, so
// `ACME/Widget` and `acme/widget` go to one node. Anything this cannot read (no repository, not
// JSON, an event intake does not take) stays here: intake answers it as it always did. The request
// goes on byte for byte with Gitea's headers. Only a delivery signed with the webhook secret is routed
// (an unsigned one stays here, where intake refuses it and counts it): anyone can reach the webhook
// URL, and routing takes a repository for a node. An owner that does not answer in time: the delivery
// is handled here after all (Gitea does not redeliver a failed delivery by itself, so a 503 would lose
// the mention); the task is durable here and its repository's owner claims it. A request another node
// forwarded is never routed again (the route does not call this for it).
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { foldName } from '../domain/repository-identity.js';
import { classifyEvent } from '../webhook/classify.js';
import { payloadJson } from '../webhook/payload-json.js';
import { INSTANCE_ID, isValidDeliveryId, RepositorySchema } from '../webhook/normalize-comment.js';
import { reviewEventType } from '../webhook/review-event.js';
import { extractPayload, verifySignature } from '../webhook/verify-signature.js';
import { sameOriginTarget } from '../http/forwarded-client.js';
import { forwardToOwner, RETRY_AFTER_SECONDS, type ForwardOptions, type OwnerAnswer } from './owner-http.js';
import type { RepositoryScope } from './repository-scope.js';

/** What the webhook route hands over (structurally its `WebhookDelivery`). */
export interface RoutedDelivery {
  rawBody: Buffer;
  headers: IncomingHttpHeaders;
  contentType: string | undefined;
  /** The path and query as received. */
  url: string;
  /** The client (the TCP peer, or the one a standby vouched for). */
  remoteAddress: string | undefined;
}

export interface WebhookOwnerRouteOptions extends ForwardOptions {
  scope: Pick<RepositoryScope, 'routeOf'>;
  /** The webhook secrets (CCWEB_WEBHOOK_SECRET): only a signed delivery is routed. */
  secrets: readonly string[];
}

const RepositoryName = RepositorySchema.pick({ owner: true, name: true });

/** Under Gitea's own delivery timeout (5 s, [webhook] DELIVER_TIMEOUT), so a silent owner leaves time to handle it here. */
const WEBHOOK_FORWARD_TIMEOUT_MS = 3_000;

/**
 * The repoKey intake would give the delivery (`default:<owner>/<name>`, the payload's spelling), or
 * undefined when intake would not get as far as a repository: an event it does not take (a push), a
 * body that is not the JSON Gitea signed, no repository or an unsafe name in it.
 */
export function webhookRepoKey(rawBody: Buffer, headers: IncomingHttpHeaders, contentType: string | undefined, secrets?: readonly string[]): string | undefined {
  if (!classifyEvent(headers).ok && reviewEventType(headers) === null) return undefined;
  const extracted = extractPayload(rawBody, contentType);
  if ('error' in extracted) return undefined;
  if (secrets !== undefined && !verifySignature(extracted.json, headers, secrets)) return undefined;
  const body = payloadJson(extracted.json);
  if (!body.ok || body.data === null || typeof body.data !== 'object') return undefined;
  const repo = RepositoryName.safeParse((body.data as { repository?: unknown }).repository);
  return repo.success ? `${INSTANCE_ID}:${repo.data.owner.login}/${repo.data.name}` : undefined;
}

/** The headers of a delivery that go with it: its type, Gitea's event, delivery and signature headers, the agent. */
export function deliveryHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (name === 'content-type' || name === 'user-agent' || name === 'authorization' || /^x-(gitea|gogs|hub|github)-/.test(name)) out[name] = value;
  }
  return out;
}

/**
 * The webhook route's `route` option: undefined (intake handles the delivery here) when this node
 * owns the repository, the payload names none or is not signed, or the owner cannot be reached;
 * else the owner's answer.
 */
export function routeWebhookToOwner(options: WebhookOwnerRouteOptions): (delivery: RoutedDelivery) => Promise<OwnerAnswer | undefined> {
  return async (delivery) => {
    const repoKey = webhookRepoKey(delivery.rawBody, delivery.headers, delivery.contentType, options.secrets);
    if (repoKey === undefined) return undefined;
    const folded = foldName(repoKey);
    let owner;
    try {
      owner = await options.scope.routeOf(folded);
    } catch (error) {
      // Handled here rather than refused: the task is durable here and its repository's owner claims it.
      options.logger?.warn({ repoKey: folded, err: error instanceof Error ? error.message : String(error) }, "cluster: the owner of a webhook's repository is unknown; the delivery is handled here");
      return undefined;
    }
    if (owner.self) return undefined;
    // A request target that is not a path on the owner: handled here, never sent where it points.
    if (owner.url !== null && URL.canParse(owner.url) && sameOriginTarget(delivery.url, owner.url) === undefined) return undefined;
    const deliveryId = delivery.headers['x-gitea-delivery'];
    const answer = await forwardToOwner({ ...options, timeoutMs: options.timeoutMs ?? WEBHOOK_FORWARD_TIMEOUT_MS }, {
      owner,
      method: 'POST',
      path: delivery.url,
      client: delivery.remoteAddress,
      headers: deliveryHeaders(delivery.headers),
      body: delivery.rawBody,
      about: { repoKey: folded, deliveryId: typeof deliveryId === 'string' && isValidDeliveryId(deliveryId) ? deliveryId : null },
    });
    // Not reached: handled here rather than lost (see the top of this file).
    if (answer.status === 503 && answer.body['error'] === 'owner_unreachable') {
      options.logger?.warn({ repoKey: folded, owner: owner.nodeId }, 'cluster: the owner did not answer; the delivery is handled here');
      return undefined;
    }
    return answer;
  };
}
