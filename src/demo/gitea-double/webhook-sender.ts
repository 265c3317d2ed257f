/**
 * Sends comment webhooks the way Gitea 1.26 does (services/webhook/deliver.go; compared with real
 * deliveries in test/integration/gitea-double-vs-real.test.ts):
 * the same headers, hex HMAC-SHA256 over the exact bytes, Go's JSON escaping of `<>&`, a 5 s timeout,
 * no automatic retry, and Replay = a new delivery UUID with a byte-identical body.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { request } from 'node:http';

export interface CommentWebhookInput {
  action?: 'created' | 'edited' | 'deleted';
  issue: Record<string, unknown>;
  comment: Record<string, unknown>;
  repository: Record<string, unknown>;
  sender: Record<string, unknown>;
  isPull: boolean;
  pullRequest?: Record<string, unknown> | null;
  /** On `edited`: `{body: {from}}`. */
  changes?: Record<string, unknown> | null;
}

export interface Delivery {
  deliveryId: string;
  eventType: 'issue_comment' | 'pull_request_comment';
  body: Buffer;
  status: number | null;
  responseBody: string;
  error: string | null;
  sentAt: number;
  durationMs: number;
}

/** Go's encoding/json escapes these three characters; the bytes Gitea signs contain the escapes. */
export function goJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
}

export function buildCommentPayload(input: CommentWebhookInput): Buffer {
  // Field order as modules/structs/hook.go declares it; pull_request is omitted when empty.
  const payload: Record<string, unknown> = { action: input.action ?? 'created', issue: input.issue };
  if (input.pullRequest) payload.pull_request = input.pullRequest;
  payload.comment = input.comment;
  if (input.changes) payload.changes = input.changes;
  payload.repository = input.repository;
  payload.sender = input.sender;
  payload.is_pull = input.isPull;
  return Buffer.from(goJson(payload), 'utf8');
}

export interface WebhookSender {
  send(input: CommentWebhookInput): Promise<Delivery>;
  /** Gitea's manual Replay: a new delivery UUID, the same body bytes. */
  replay(deliveryId: string): Promise<Delivery>;
  readonly deliveries: Delivery[];
}

/** `url` may be a function: the hook's target can change (a service restarting on a new port) while Replay keeps working. */
export function createWebhookSender(options: { url: string | (() => string); secret: string | (() => string); timeoutMs?: number }): WebhookSender {
  const deliveries: Delivery[] = [];
  const timeoutMs = options.timeoutMs ?? 5_000;

  function deliver(body: Buffer, eventType: Delivery['eventType']): Promise<Delivery> {
    const deliveryId = randomUUID();
    const secret = typeof options.secret === 'function' ? options.secret() : options.secret;
    const url = typeof options.url === 'function' ? options.url() : options.url;
    const sig256 = createHmac('sha256', secret).update(body).digest('hex');
    const sig1 = createHmac('sha1', secret).update(body).digest('hex');
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      'User-Agent': 'Go-http-client/1.1',
      'Content-Length': String(body.length),
      'X-Gitea-Delivery': deliveryId,
      'X-Gitea-Event': 'issue_comment',
      'X-Gitea-Event-Type': eventType,
      'X-Gitea-Signature': sig256,
      'X-Gitea-Hook-Installation-Target-Type': 'repository',
      'X-Gogs-Delivery': deliveryId,
      'X-Gogs-Event': 'issue_comment',
      'X-Gogs-Event-Type': eventType,
      'X-Gogs-Signature': sig256,
      'X-Hub-Signature': `sha1=${sig1}`,
      'X-Hub-Signature-256': `sha256=${sig256}`,
      'X-GitHub-Delivery': deliveryId,
      'X-GitHub-Event': 'issue_comment',
      'X-GitHub-Event-Type': eventType,
      'X-GitHub-Hook-Installation-Target-Type': 'repository',
      // Go's HTTP client adds it (and decompresses a gzip answer transparently).
      'Accept-Encoding': 'gzip',
    };
    const started = Date.now();
    const delivery: Delivery = { deliveryId, eventType, body, status: null, responseBody: '', error: null, sentAt: started, durationMs: 0 };
    deliveries.push(delivery);
    return new Promise((resolve) => {
      const req = request(url, { method: 'POST', headers, timeout: timeoutMs }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          delivery.status = res.statusCode ?? null;
          delivery.responseBody = text;
          delivery.durationMs = Date.now() - started;
          resolve(delivery);
        });
      });
      // Gitea gives up after DELIVER_TIMEOUT and never retries by itself.
      req.on('timeout', () => req.destroy(new Error('delivery timed out')));
      req.on('error', (err) => {
        delivery.error = err.message;
        delivery.durationMs = Date.now() - started;
        resolve(delivery);
      });
      req.end(body);
    });
  }

  return {
    deliveries,
    send(input) {
      return deliver(buildCommentPayload(input), input.isPull ? 'pull_request_comment' : 'issue_comment');
    },
    replay(deliveryId) {
      const original = deliveries.find((d) => d.deliveryId === deliveryId);
      if (!original) throw new Error(`no delivery ${deliveryId}`);
      return deliver(original.body, original.eventType);
    },
  };
}
