import Router from '@koa/router';
import type { Context } from 'koa';
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import type { AuditEvent, Store } from '../store/types.js';
import { storeStreamTickets } from './stream-tickets.js';
import { bearerToken, requireAdminToken, tokenMatches, unauthorized } from './admin-auth.js';
import { API_PREFIX } from './control-router.js';
import { handled, type ApiLogger } from './http-helpers.js';

/**
 * Server-sent events for the admin page and the visualizer: every durable transition of every
 * actor (`runtime.onTransition`), plus `control` events when an operator changes pause/repo state.
 *
 * Authentication: `Authorization: Bearer <admin token>`, or — because a browser's EventSource
 * cannot set headers — a stream ticket: `POST /events/ticket` (bearer) returns a random ticket that
 * is valid once, for 30 s, on any node of the store, and only opens a stream. The admin token itself never goes into a URL,
 * where it would end up in access logs, proxies and browser history.
 */
export interface LiveEventsDeps {
  runtime: ActorRuntime;
  /** Where stream tickets are kept (stream-tickets.ts): any node sharing it honours them. */
  store: Store;
  adminToken: string;
  now?: () => Date;
  logger?: ApiLogger;
  ticketTtlMs?: number;
  heartbeatMs?: number;
  /**
   * Several nodes on one database: every node's committed audit events, this one's included
   * (audit-follower.ts). The stream's transitions then come from them rather than from this node's
   * runtime, so each node's live view shows every node's work. Followed only while a stream is open:
   * otherwise every node would read every other node's events for nobody. `ready` resolves true once
   * events committed from then on will be delivered, false if following could not start.
   */
  auditFeed?: (listener: (events: AuditEvent[]) => void) => { stop: () => void; ready: Promise<boolean> };
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
  const tickets = storeStreamTickets(deps.store, { ttlMs: ttl, max: MAX_TICKETS });
  const streams = new Set<Client>();
  let nextId = 0;

  const write = (type: string, data: unknown): void => {
    nextId += 1;
    const frame = `id: ${nextId}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const s of streams) s.write(frame);
  };

  /** Starts the feed of transitions for the streams; resolves once it is live. */
  const follow = (): { stop: () => void; ready: Promise<boolean> } => {
    if (!deps.auditFeed) return { stop: deps.runtime.onTransition((n: TransitionNotice) => write('transition', toLive(n, now()))), ready: Promise.resolve(true) };
    return deps.auditFeed((events) => {
      for (const e of events) {
        const t = liveFromAudit(e);
        if (t) write('transition', t);
      }
    });
  };
  let feed: ReturnType<typeof follow> | null = null;
  const heartbeat = setInterval(() => {
    for (const s of streams) s.write(': ping\n\n');
  }, heartbeatMs);
  heartbeat.unref();

  const router = new Router({ prefix: API_PREFIX });

  router.post('/events/ticket', auth, handled(deps.logger, async (ctx) => {
    const issued = await tickets.issue(await deps.store.clockMs());
    if (!issued) {
      ctx.status = 429;
      ctx.body = { error: 'too_many_tickets' };
      return;
    }
    ctx.body = { ticket: issued.ticket, expiresAt: new Date(issued.expiresAt).toISOString() };
  }));

  router.get('/events', async (ctx: Context) => {
    if (!(await admitted(ctx))) {
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
    const current = (feed ??= follow());
    const drop = () => {
      if (!streams.delete(client) || streams.size > 0) return;
      feed?.stop();
      feed = null;
    };
    res.on('close', drop);
    res.on('error', drop);
    // Told "connected" once every transition committed from here on will reach it.
    if (!(await current.ready)) {
      // The feed could not start (the database did not answer): the stream ends and the client opens a
      // new one after `retry`, with a new feed.
      if (feed === current) feed = null;
      streams.delete(client);
      res.end('retry: 3000\n\n');
      return;
    }
    res.write('retry: 3000\n: connected\n\n');
  });

  const admitted = async (ctx: Context): Promise<boolean> => {
    const token = bearerToken(ctx);
    if (token !== null) return tokenMatches(token, deps.adminToken);
    const ticket = typeof ctx.query['ticket'] === 'string' ? ctx.query['ticket'] : null;
    if (!ticket) return false;
    return tickets.redeem(ticket, await deps.store.clockMs());
  };

  return {
    router,
    publish: write,
    clients: () => streams.size,
    close: () => {
      feed?.stop();
      feed = null;
      clearInterval(heartbeat);
      for (const s of streams) s.end();
      streams.clear();
    },
  };
}

/** A committed transition, from its `<kind>.transition` audit event; null for any other event. */
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
