// Failed admin authentications are limited per client and recorded: anyone who can reach the API can
// try hundreds of admin tokens a second. A Koa middleware in front of the operators' API: every 401
// it sees counts against the client (TCP peer); after `maxFailures` within `windowMs` the client gets
// 429 (with Retry-After) for every request — right token or not — until its window ends, so guessing
// is slow whatever the token length. Each failure is counted into the aggregated, expiring security
// events (security-events.ts); memory is bounded by `maxClients`.
import type { Context, Next } from 'koa';
import type { SecurityEvents } from '../intake/security-events.js';
import { clientAddress } from '../http/client-address.js';

export interface AuthFailureGuardOptions {
  /** Path prefixes guarded, e.g. `/api/gitea-workflow`. */
  prefixes: readonly string[];
  /** Default 10. */
  maxFailures?: number;
  /** Default 60 s. */
  windowMs?: number;
  /** Clients tracked at most (the oldest window is dropped first). Default 10,000. */
  maxClients?: number;
  securityEvents?: Pick<SecurityEvents, 'record'>;
  now?: () => number;
}

export function authFailureGuard(options: AuthFailureGuardOptions): (ctx: Context, next: Next) => Promise<void> {
  const maxFailures = options.maxFailures ?? 10;
  const windowMs = options.windowMs ?? 60_000;
  const maxClients = options.maxClients ?? 10_000;
  const now = options.now ?? Date.now;
  const clients = new Map<string, { failures: number; windowStart: number }>();

  return async (ctx, next) => {
    if (!options.prefixes.some((p) => ctx.path === p || ctx.path.startsWith(`${p}/`))) return next();
    const client = clientAddress(ctx.req) ?? 'unknown';
    const at = now();
    let entry = clients.get(client);
    if (entry !== undefined && at - entry.windowStart >= windowMs) {
      clients.delete(client);
      entry = undefined;
    }
    if (entry !== undefined && entry.failures >= maxFailures) {
      ctx.status = 429;
      ctx.set('Retry-After', String(Math.max(1, Math.ceil((entry.windowStart + windowMs - at) / 1000))));
      ctx.set('cache-control', 'no-store');
      ctx.body = { error: 'too_many_failed_authentications' };
      return;
    }
    await next();
    if (ctx.status !== 401) return;
    if (entry === undefined) {
      entry = { failures: 0, windowStart: at };
      clients.set(client, entry);
      while (clients.size > maxClients) clients.delete(clients.keys().next().value!);
    }
    entry.failures += 1;
    await options.securityEvents?.record('admin_unauthorized', client, {
      path: ctx.path.slice(0, 128),
      method: ctx.method,
      userAgent: (ctx.get('user-agent') || '').replace(/[^\x21-\x7e ]/g, '?').slice(0, 128) || null,
    });
  };
}
