// What a standby answers while another node writes: every request goes on to the writer,
// so a load balancer may send anything to any node (webhooks, the API, the admin page, live events)
// and the writer answers it with its usual guarantees (a webhook is durable before its 202). The
// body passes through byte for byte, since webhook signatures cover it; the client's address goes
// with it, signed (forwarded-client.ts). `/healthz` is the standby's own: it is alive even when the
// writer is not. While no writer is known, or the writer cannot be reached, the answer is 503 with
// Retry-After: nothing was recorded, and the sender may try again.
import { request, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { acceptForwardedClient, clientAddress, FORWARDED_HEADER, sameOriginTarget, signForwarded, wasForwarded } from './forwarded-client.js';

export interface StandbyTarget {
  nodeId: string;
  url: string | null;
}

export interface StandbyProxyOptions {
  /** This node, for the answers it gives itself. */
  nodeId: string;
  /** The writer as last seen (the store's standby poll), or undefined while none is known. */
  writer: () => StandbyTarget | undefined;
  /** The cluster's key (known once the schema is migrated). */
  key: () => string | undefined;
  logger?: { warn(obj: Record<string, unknown>, msg?: string): void };
}

// Connection-scoped headers (RFC 9110 §7.6.1): they describe one hop, not the request.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'upgrade']);

function forwardable(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) out[name] = value;
  return out;
}

function answer(res: ServerResponse, status: number, body: Record<string, unknown>, retryAfter?: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...(retryAfter ? { 'retry-after': String(retryAfter) } : {}) });
  res.end(JSON.stringify(body));
}

export function standbyProxy(options: StandbyProxyOptions): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const key = options.key();
    acceptForwardedClient(req, key);
    const path = req.url ?? '/';
    if (req.method === 'GET' && (path === '/healthz' || path.startsWith('/healthz?'))) {
      answer(res, 200, { status: 'ok', role: 'standby', node: options.nodeId });
      return;
    }
    const writer = options.writer();
    // A request another standby forwarded here means the two disagree on who writes: say so, never loop.
    if (wasForwarded(req) || key === undefined || writer === undefined || writer.url === null) {
      req.resume();
      answer(res, 503, { error: 'standby', message: `node ${options.nodeId} is starting, or a standby that knows no writer to forward to yet; try again shortly` }, 2);
      return;
    }
    const target = sameOriginTarget(path, writer.url);
    if (!target) {
      req.resume();
      answer(res, 400, { error: 'bad_request', message: 'the request target must be a path' });
      return;
    }
    const headers = forwardable(req.headers);
    headers.host = target.host;
    headers[FORWARDED_HEADER] = signForwarded(key, clientAddress(req) ?? 'unknown', req.method ?? 'GET', path);
    const out = request(target, { method: req.method, headers }, (upstream) => {
      res.writeHead(upstream.statusCode ?? 502, forwardable(upstream.headers));
      upstream.pipe(res);
      upstream.on('error', () => res.destroy());
    });
    out.on('error', (error: NodeJS.ErrnoException) => {
      options.logger?.warn({ writer: writer.nodeId, code: error.code ?? null }, 'standby: the writer could not be reached');
      answer(res, 503, { error: 'writer_unreachable', message: `node ${options.nodeId} is a standby and the writer (${writer.nodeId}) does not answer; try again shortly` }, 2);
    });
    // The client went away (a live-events stream closed, a timeout): so does the request to the writer.
    res.on('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    req.pipe(out);
  };
}
