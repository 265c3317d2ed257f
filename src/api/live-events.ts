import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import type { AuditEvent } from '../store/types.js';
import { bearerToken, requireAdminToken, tokenMatches, unauthorized } from './admin-auth.js';
import { API_PREFIX } from './control-router.js';
import { handled, type ApiLogger } from './http-helpers.js';

/**
 * Server-sent events for the admin page and the visualizer: every durable transition of every
 * actor (`runtime.onTransition`), plus `control` events when an operator changes pause/repo state.
 *
 * Authentication: `Authorization: Bearer <admin token>`, or — because a browser's EventSource
 * cannot set headers — a stream ticket: `POST /events/ticket` (bearer) returns a random ticket that
 * is valid once, for 30 s, and only opens a stream. The admin token itself never goes into a URL,
 * where it would end up in access logs, proxies and browser history.
 */
export interface LiveEventsDeps {
  runtime: ActorRuntime;
  adminToken: string;
  now?: () => Date;
  logger?: ApiLogger;
  ticketTtlMs?: number;
  heartbeatMs?: number;
  /**
   * Several nodes at work (CCWEB_CLUSTER_MODE=active): the audit events of the other nodes' commits,
   * as this node applies them. Their transitions join the stream, so each node's live view shows the
   * whole cluster's.
   */
  auditFromOtherNodes?: (listener: (events: AuditEvent[]) => void) => () => void;
  /**
   * Several nodes behind one URL: the cluster's key. A ticket is then signed with it (its expiry and
   * a nonce) rather than kept in this node's memory, so a browser that got it from one node opens
   * its stream on whichever node the load balancer picks; each node still admits it once.
   */
  ticketKey?: () => string | undefined;
}

export interface LiveTransition {
  actorId: string;
  kind: string;
  taskId: string | null;
  from: string | null;
  to: string;
  stateVersion: number;
  by: string;
  event: string | null;
  time: string;
}

export interface LiveEvents {
  router: Router;
  /** Sends an event to every open stream (e.g. `control` after a pause). */
  publish(type: string, data: Record<string, unknown>): void;
  /** Number of open streams. */
  clients(): number;
  /** Ends every stream and stops listening (shutdown: open streams would keep the server alive). */
  close(): void;
}

const MAX_TICKETS = 1000;

interface Client {
  write(frame: string): void;
  end(): void;
}

export function createLiveEvents(deps: LiveEventsDeps): LiveEvents {
  const now = deps.now ?? (() => new Date());
  const ttl = deps.ticketTtlMs ?? 30_000;
  const heartbeatMs = deps.heartbeatMs ?? 15_000;
  const auth = requireAdminToken(deps.adminToken);
  const tickets = new Map<string, number>();
  /** Signed tickets admitted on this node, with their expiry: each opens one stream. */
  const used = new Map<string, number>();
  const streams = new Set<Client>();
  let nextId = 0;

  const write = (type: string, data: unknown): void => {
    nextId += 1;
    const frame = `id: ${nextId}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const s of streams) s.write(frame);
  };

  const fromHere = deps.runtime.onTransition((n: TransitionNotice) => write('transition', toLive(n, now())));
  const fromOthers = deps.auditFromOtherNodes?.((events) => {
    for (const e of events) {
      const t = liveFromAudit(e);
      if (t) write('transition', t);
    }
  });
  const unsubscribe = () => {
    fromHere();
    fromOthers?.();
  };
  const heartbeat = setInterval(() => {
    for (const s of streams) s.write(': ping\n\n');
  }, heartbeatMs);
  heartbeat.unref();

  const router = new Router({ prefix: API_PREFIX });

  router.post('/events/ticket', auth, handled(deps.logger, async (ctx) => {
    const at = Date.now();
    for (const [t, exp] of tickets) if (exp <= at) tickets.delete(t);
    if (tickets.size >= MAX_TICKETS) {
      ctx.status = 429;
      ctx.body = { error: 'too_many_tickets' };
      return;
    }
    const key = deps.ticketKey?.();
    const ticket = key !== undefined ? signedTicket(key, at + ttl) : randomBytes(32).toString('base64url');
    if (key === undefined) tickets.set(ticket, at + ttl);
    ctx.body = { ticket, expiresAt: new Date(at + ttl).toISOString() };
  }));

  router.get('/events', async (ctx: Context) => {
    if (!admitted(ctx)) {
      unauthorized(ctx);
      return;
    }
    ctx.req.socket.setTimeout(0);
    ctx.req.socket.setNoDelay(true);
    ctx.req.socket.setKeepAlive(true);
    // The stream outlives the request handler: write to the socket's response directly, so Koa
    // neither buffers it nor reports a client's disconnect as an error.
    ctx.respond = false;
    const res = ctx.res;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    const client: Client = { write: (frame) => void res.write(frame), end: () => res.end() };
    streams.add(client);
    const drop = () => {
      streams.delete(client);
    };
    res.on('close', drop);
    res.on('error', drop);
    res.write('retry: 3000\n: connected\n\n');
  });

  const admitted = (ctx: Context): boolean => {
    const token = bearerToken(ctx);
    if (token !== null) return tokenMatches(token, deps.adminToken);
    const ticket = typeof ctx.query['ticket'] === 'string' ? ctx.query['ticket'] : null;
    if (!ticket) return false;
    const key = deps.ticketKey?.();
    // Signed (several nodes): issued by any node; `used` holds the ones admitted here, until they expire.
    if (key !== undefined && ticket.startsWith(SIGNED_PREFIX)) {
      const exp = signedTicketExpiry(key, ticket);
      const at = Date.now();
      for (const [t, until] of used) if (until <= at) used.delete(t);
      if (exp === undefined || exp <= at || used.has(ticket)) return false;
      used.set(ticket, exp);
      return true;
    }
    const exp = tickets.get(ticket);
    tickets.delete(ticket);
    return exp !== undefined && exp > Date.now();
  };

  return {
    router,
    publish: write,
    clients: () => streams.size,
    close: () => {
      unsubscribe();
      clearInterval(heartbeat);
      for (const s of streams) s.end();
      streams.clear();
    },
  };
}

const SIGNED_PREFIX = 's1.';

const ticketMac = (key: string, payload: string) => createHmac('sha256', key).update(`ccweb-events-ticket\n${payload}`).digest('base64url');

/** `s1.<expiry ms>.<nonce>.<mac>`: any node with the cluster's key can check it. */
function signedTicket(key: string, expiresAt: number): string {
  const payload = `${expiresAt}.${randomBytes(18).toString('base64url')}`;
  return `${SIGNED_PREFIX}${payload}.${ticketMac(key, payload)}`;
}

function signedTicketExpiry(key: string, ticket: string): number | undefined {
  const parts = ticket.slice(SIGNED_PREFIX.length).split('.');
  if (parts.length !== 3 || !/^\d{1,16}$/.test(parts[0]!)) return undefined;
  const payload = `${parts[0]}.${parts[1]}`;
  const expected = Buffer.from(ticketMac(key, payload));
  const given = Buffer.from(parts[2]!);
  return expected.length === given.length && timingSafeEqual(expected, given) ? Number(parts[0]) : undefined;
}

/** A transition another node committed, from its `<kind>.transition` audit event; null for any other event. */
export function liveFromAudit(e: AuditEvent): LiveTransition | null {
  if (!e.action.endsWith('.transition') || typeof e.actorId !== 'string' || typeof e.toState !== 'string' || typeof e.stateVersion !== 'number') return null;
  const event = (e.metadata?.['event'] as { type?: unknown } | undefined)?.type;
  return {
    actorId: e.actorId,
    kind: e.action.slice(0, -'.transition'.length),
    taskId: e.taskId ?? null,
    from: e.fromState ?? null,
    to: e.toState,
    stateVersion: e.stateVersion,
    by: e.actor,
    event: typeof event === 'string' ? event : null,
    time: e.timestamp,
  };
}

function toLive(n: TransitionNotice, at: Date): LiveTransition {
  return {
    actorId: n.actorId,
    kind: n.kind,
    taskId: n.taskId,
    from: n.fromState,
    to: n.toState,
    stateVersion: n.stateVersion,
    by: n.by,
    event: n.event?.type ?? null,
    time: at.toISOString(),
  };
}
