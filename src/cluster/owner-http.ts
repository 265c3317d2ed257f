// The one hop a request about a repository makes to the node that owns it
// (docs/DESIGN-nodes-at-once.md step 5): a small node:http(s) client, no dependency. The request goes
// with the client's address signed with the cluster's key (src/http/forwarded-client.ts), exactly as
// the standby proxy signs it, so the owner's app knows it was forwarded once (and never forwards it
// again) and whose it is (the audit's source, the failed-login guard). The owner's answer comes back
// as status + JSON; an owner that cannot be reached is one 503 with Retry-After: nothing was recorded
// here (a command's sender may try again; a webhook is then handled where it arrived instead,
// src/cluster/forward-to-owner.ts).
import { request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { FORWARDED_HEADER, sameOriginTarget, signForwarded } from '../http/forwarded-client.js';
import type { OwnerTarget } from './repository-scope.js';

/** How long the owner has to answer, connection included (Gitea itself gives a delivery 5 s by default). */
export const DEFAULT_FORWARD_TIMEOUT_MS = 10_000;
/** What a client is told to wait before it tries again. */
export const RETRY_AFTER_SECONDS = 2;
/** An owner's answer larger than this is not read (the service's answers are a few hundred bytes). */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** An answer to give the client: status, JSON body, and the few headers that belong to it. */
export interface OwnerAnswer {
  status: number;
  body: Record<string, unknown>;
  headers?: Record<string, string>;
}

export interface ForwardLogger {
  warn(obj: Record<string, unknown>, msg?: string): void;
}

export interface ForwardOptions {
  /** This node's id (named in the answers it gives itself). */
  nodeId: string;
  /** The cluster's key (PostgresStore.forwardKey); undefined: nothing can be forwarded. */
  key: () => string | undefined;
  timeoutMs?: number;
  logger?: ForwardLogger;
}

export interface ForwardRequest {
  owner: OwnerTarget;
  method: string;
  /** The path and query as this node received it (`ctx.originalUrl`). */
  path: string;
  /** The request's client as this node sees it (`clientAddress(req)`). */
  client: string | undefined;
  /** The headers to send along (the caller picks them); host, content-length and the signed header are set here. */
  headers: OutgoingHttpHeaders;
  body: Buffer;
  /** For the log: what the request is about (a repoKey, a task). */
  about: Record<string, unknown>;
}

/** The owner's answer headers that go back to the client with its status and body. */
// x-ccweb-node: which node handled a delivery (src/intake/webhook-route.ts).
const ANSWER_HEADERS = ['retry-after', 'idempotent-replay', 'www-authenticate', 'x-ccweb-node'];

/** 503 with Retry-After: the owner could not be asked; nothing was recorded. */
export function ownerUnreachable(message: string): OwnerAnswer {
  return { status: 503, body: { error: 'owner_unreachable', message }, headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } };
}

type Exchange =
  | { ok: true; status: number; headers: IncomingHttpHeaders; body: Buffer }
  | { ok: false; reason: 'timeout' | 'unreachable' | 'answer_too_large'; code: string | null };

/** One request to `url`, its whole answer read, within `timeoutMs` (connection included). Never rejects. */
function exchange(url: URL, method: string, headers: OutgoingHttpHeaders, body: Buffer, timeoutMs: number): Promise<Exchange> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: Exchange) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const out = send(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) {
          finish({ ok: false, reason: 'answer_too_large', code: null });
          out.destroy();
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => finish({ ok: true, status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks, size) }));
      res.on('error', (error: NodeJS.ErrnoException) => finish({ ok: false, reason: 'unreachable', code: error.code ?? null }));
      res.on('aborted', () => finish({ ok: false, reason: 'unreachable', code: 'ECONNRESET' }));
    });
    const timer = setTimeout(() => {
      finish({ ok: false, reason: 'timeout', code: 'ETIMEDOUT' });
      out.destroy();
    }, timeoutMs);
    timer.unref?.();
    out.on('error', (error: NodeJS.ErrnoException) => finish({ ok: false, reason: 'unreachable', code: error.code ?? null }));
    out.end(body);
  });
}

/** The owner's JSON object, or undefined when its answer is none. */
function jsonObject(body: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body.toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Sends the request on to its owner (`owner.self` false) and gives back the owner's answer, or a
 * 503 naming the owner when it has no address, does not answer within the timeout or cannot be
 * connected to. The body goes byte for byte; the signature covers the method and the exact path the
 * owner receives.
 */
export async function forwardToOwner(options: ForwardOptions, req: ForwardRequest): Promise<OwnerAnswer> {
  const { owner } = req;
  const key = options.key();
  if (owner.url === null || key === undefined) {
    options.logger?.warn({ ...req.about, owner: owner.nodeId, reason: owner.url === null ? 'no_url' : 'no_key' }, 'cluster: the owner cannot be forwarded to');
    return ownerUnreachable(
      owner.url === null
        ? `node ${options.nodeId} does not handle this repository and its owner (node ${owner.nodeId}) registered no address; try again shortly`
        : `node ${options.nodeId} does not handle this repository and cannot forward to its owner (node ${owner.nodeId}) yet; try again shortly`,
    );
  }
  // Only a path goes on, and only to the owner's own origin (sameOriginTarget).
  let target: URL | undefined;
  try {
    target = sameOriginTarget(req.path, owner.url);
  } catch {
    return ownerUnreachable(`node ${options.nodeId} does not handle this repository and its owner's address (node ${owner.nodeId}) is not a URL`);
  }
  if (!target) return { status: 400, body: { error: 'bad_request', message: 'the request target must be a path' } };
  // Signed over what the owner receives as req.url (URL parsing may normalise the path).
  const sent = `${target.pathname}${target.search}`;
  const headers: OutgoingHttpHeaders = {
    ...req.headers,
    host: target.host,
    'content-length': String(req.body.length),
    [FORWARDED_HEADER]: signForwarded(key, req.client ?? 'unknown', req.method, sent),
  };
  const result = await exchange(target, req.method, headers, req.body, options.timeoutMs ?? DEFAULT_FORWARD_TIMEOUT_MS);
  if (!result.ok) {
    options.logger?.warn({ ...req.about, owner: owner.nodeId, reason: result.reason, code: result.code }, 'cluster: the owner did not answer');
    return ownerUnreachable(`node ${options.nodeId} does not handle this repository and its owner (node ${owner.nodeId}) does not answer; try again shortly`);
  }
  const body = jsonObject(result.body);
  if (body === undefined) {
    options.logger?.warn({ ...req.about, owner: owner.nodeId, status: result.status }, 'cluster: the owner answered no JSON');
    return { status: 502, body: { error: 'owner_bad_answer', message: `the owner (node ${owner.nodeId}) answered ${result.status} without a JSON body` } };
  }
  const back: Record<string, string> = {};
  for (const name of ANSWER_HEADERS) {
    const value = result.headers[name];
    if (typeof value === 'string') back[name] = value;
  }
  return { status: result.status, body, ...(Object.keys(back).length > 0 ? { headers: back } : {}) };
}
