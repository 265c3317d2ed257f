// The only Koa-aware file of intake: reads the raw body (no body parser — the signature is over the
// exact bytes), enforces the size limit and the body deadline while reading, and hands the bytes to
// intake. Nothing reaches intake before the whole body is here, so a cut body loses nothing accepted.
// In intake/, next to what it calls: webhook/ reads a delivery as Gitea sends it and
// imports nothing of intake, so intake/ → webhook/ is the one arrow between them.
import Router, { type RouterContext } from '@koa/router';
import type { IncomingMessage } from 'node:http';
import type { Intake } from './intake.js';
import { PAYLOAD_TOO_LARGE, REQUEST_TIMEOUT, UNSUPPORTED_MEDIA_TYPE, type IntakeResponse } from './intake-response.js';
import { mediaType } from '../webhook/verify-signature.js';
import { clientAddress } from '../http/client-address.js';

export const DEFAULT_WEBHOOK_PATH = '/api/gitea/webhook';
/** The answer's header naming the node that handled a delivery (several nodes). */
export const NODE_HEADER = 'x-ccweb-node';
export const DEFAULT_WEBHOOK_MAX_BYTES = 2 * 1024 * 1024;
export const DEFAULT_WEBHOOK_BODY_TIMEOUT_MS = 30_000;

const SUPPORTED_TYPES = new Set(['application/json', 'application/x-www-form-urlencoded']);

export interface WebhookRouterOptions {
  intake: Pick<Intake, 'handle'>;
  path?: string;
  maxBytes?: number;
  /** The whole body must arrive within this (CCWEB_HTTP_BODY_TIMEOUT_SECONDS); later → 408. */
  bodyTimeoutMs?: number;
  /**
   * Named in every answer as `X-Ccweb-Node` (several nodes): which node handled the delivery, as
   * Gitea's delivery history shows it.
   */
  nodeId?: string;
}

type ReadResult = { ok: true; body: Buffer } | { ok: false; reason: 'too_large' | 'timeout' };

/**
 * Reads at most `maxBytes` within `timeoutMs`. Once the limit is passed or the deadline is reached
 * it stops listening (the rest is never buffered) and leaves the stream paused; the caller answers
 * 413 or 408 and closes the connection. The deadline is for the whole body, not between chunks: a
 * client trickling a byte a second never goes idle, and that is the client to stop.
 */
function readRawBody(req: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<ReadResult> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const timer = setTimeout(() => {
      cleanup();
      req.pause();
      resolve({ ok: false, reason: 'timeout' });
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total > maxBytes) {
        cleanup();
        req.pause();
        resolve({ ok: false, reason: 'too_large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve({ ok: true, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total) });
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onAborted = () => {
      cleanup();
      reject(Object.assign(new Error('request aborted'), { status: 400, expose: false }));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

function send(ctx: RouterContext, response: IntakeResponse): void {
  ctx.status = response.status;
  ctx.body = response.body;
}

export function createWebhookRouter(options: WebhookRouterOptions): Router {
  const path = options.path ?? DEFAULT_WEBHOOK_PATH;
  const maxBytes = options.maxBytes ?? DEFAULT_WEBHOOK_MAX_BYTES;
  const bodyTimeoutMs = options.bodyTimeoutMs ?? DEFAULT_WEBHOOK_BODY_TIMEOUT_MS;
  const router = new Router();

  router.post(path, async (ctx) => {
    const contentType = ctx.get('content-type') || undefined;
    const encoding = ctx.get('content-encoding').trim().toLowerCase();
    const type = mediaType(contentType);
    if (type === undefined || !SUPPORTED_TYPES.has(type) || (encoding !== '' && encoding !== 'identity')) {
      ctx.set('Connection', 'close');
      send(ctx, UNSUPPORTED_MEDIA_TYPE);
      return;
    }
    const declared = Number(ctx.get('content-length') || Number.NaN);
    const read: ReadResult =
      Number.isFinite(declared) && declared > maxBytes ? { ok: false, reason: 'too_large' } : await readRawBody(ctx.req, maxBytes, bodyTimeoutMs);
    if (!read.ok) {
      // Closing is what stops the upload: keep-alive would make Node read (and discard) the rest.
      ctx.set('Connection', 'close');
      send(ctx, read.reason === 'timeout' ? REQUEST_TIMEOUT : PAYLOAD_TOO_LARGE);
      return;
    }
    if (options.nodeId !== undefined) ctx.set(NODE_HEADER, options.nodeId);
    send(ctx, await options.intake.handle({ rawBody: read.body, headers: ctx.req.headers, contentType, remoteAddress: clientAddress(ctx.req) }));
  });

  return router;
}
