// A webhook goes to the node that owns its repository (issue 31, docs/DESIGN-nodes-at-once.md
// step 5): called by the webhook route (src/intake/webhook-route.ts, option `route`) once the whole
// body is read and before intake. The repository is read from the payload as intake reads it
// (extractPayload: JSON or a form's `payload=`; the same schema), and routed on its folded name, so
// `ACME/Widget` and `acme/widget` go to one node. Anything this cannot read (no repository, not
// JSON, an event intake does not take) stays here: intake answers it as it always did. The request
// goes on byte for byte with Gitea's headers; the signature is checked by the owner's intake, so no
// webhook secret is needed here. A request another node forwarded is never routed again (the route
// does not call this for it).
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { foldName } from '../domain/repository-identity.js';
import { classifyEvent } from '../webhook/classify.js';
import { payloadJson } from '../webhook/payload-json.js';
import { INSTANCE_ID, isValidDeliveryId, RepositorySchema } from '../webhook/normalize-comment.js';
import { reviewEventType } from '../webhook/review-event.js';
import { extractPayload } from '../webhook/verify-signature.js';
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
}

const RepositoryName = RepositorySchema.pick({ owner: true, name: true });

/**
 * The repoKey intake would give the delivery (`default:<owner>/<name>`, the payload's spelling), or
 * undefined when intake would not get as far as a repository: an event it does not take (a push), a
 * body that is not the JSON Gitea signed, no repository or an unsafe name in it.
 */
export function webhookRepoKey(rawBody: Buffer, headers: IncomingHttpHeaders, contentType: string | undefined): string | undefined {
  if (!classifyEvent(headers).ok && reviewEventType(headers) === null) return undefined;
  const extracted = extractPayload(rawBody, contentType);
  if ('error' in extracted) return undefined;
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
 * owns the repository or the payload names none; else the owner's answer, or 503 when it cannot be
 * had.
 */
export function routeWebhookToOwner(options: WebhookOwnerRouteOptions): (delivery: RoutedDelivery) => Promise<OwnerAnswer | undefined> {
  return async (delivery) => {
    const repoKey = webhookRepoKey(delivery.rawBody, delivery.headers, delivery.contentType);
    if (repoKey === undefined) return undefined;
    const folded = foldName(repoKey);
    let owner;
    try {
      owner = await options.scope.routeOf(folded);
    } catch (error) {
      options.logger?.warn({ repoKey: folded, err: error instanceof Error ? error.message : String(error) }, 'cluster: the owner of a webhook\'s repository is unknown');
      return {
        status: 503,
        body: { error: 'owner_unknown', message: `node ${options.nodeId} could not tell which node handles this repository; try again shortly` },
        headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
      };
    }
    if (owner.self) return undefined;
    const deliveryId = delivery.headers['x-gitea-delivery'];
    return forwardToOwner(options, {
      owner,
      method: 'POST',
      path: delivery.url,
      client: delivery.remoteAddress,
      headers: deliveryHeaders(delivery.headers),
      body: delivery.rawBody,
      about: { repoKey: folded, deliveryId: typeof deliveryId === 'string' && isValidDeliveryId(deliveryId) ? deliveryId : null },
    });
  };
}
