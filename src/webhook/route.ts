// The only Koa-aware file of intake: reads the raw body (no body parser — the signature is over the
// exact bytes), enforces the size limit while reading, and hands the bytes to intake.
import Router, { type RouterContext } from '@koa/router';
import type { IncomingMessage } from 'node:http';
import type { Intake } from '../intake/accept-comment.js';
import { PAYLOAD_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, type IntakeResponse } from '../intake/intake-response.js';
import { mediaType } from './verify-signature.js';

export const DEFAULT_WEBHOOK_PATH = '/api/gitea/webhook';
export const DEFAULT_WEBHOOK_MAX_BYTES = 2 * 1024 * 1024;

const SUPPORTED_TYPES = new Set(['application/json', 'application/x-www-form-urlencoded']);

export interface WebhookRouterOptions {
  intake: Pick<Intake, 'handle'>;
  path?: string;
  maxBytes?: number;
}

type ReadResult = { ok: true; body: Buffer } | { ok: false; reason: 'too_large' };

/**
 * Reads at most `maxBytes`. Once the limit is passed it stops listening (the rest is never
 * buffered) and leaves the stream paused; the caller answers 413 and closes the connection.
 */
function readRawBody(req: IncomingMessage, maxBytes: number): Promise<ReadResult> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const cleanup = () => {
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
      Number.isFinite(declared) && declared > maxBytes ? { ok: false, reason: 'too_large' } : await readRawBody(ctx.req, maxBytes);
    if (!read.ok) {
      // Closing is what stops the upload: keep-alive would make Node read (and discard) the rest.
      ctx.set('Connection', 'close');
      send(ctx, PAYLOAD_TOO_LARGE);
      return;
    }
    send(
      ctx,
      await options.intake.handle({
        rawBody: read.body,
        headers: ctx.req.headers,
        contentType,
        remoteAddress: ctx.req.socket.remoteAddress,
      }),
    );
  });

  return router;
}
