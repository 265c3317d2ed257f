// Failed authentications and refused mentions for operators:
//   GET /api/gitea-workflow/security-events?from=&to=&category=&kind=&source=&page=&pageSize=
// the aggregated `security_events` records, newest window first, the open window with its counts so
// far: category `authentication` (bad webhook signatures, wrong admin tokens; one record per kind,
// source and FAILED_AUTH_WINDOW_MS, src/intake/security-events.ts) and category `mention` (someone
// without write access mentioned the bot; one record per author and UTC day,
// src/intake/rejected-mentions.ts). Security-level audit events (refused agent tool calls, control
// actions) are in `GET /audit?level=security`.
import Router from '@koa/router';
import type { Context } from 'koa';
import { SECURITY_EVENTS, type SecurityEventRecord, type SecurityEvents } from '../intake/security-events.js';
import { PENDING_INTAKE, type PendingIntakeRecord } from '../intake/pending-intake.js';
import type { Store } from '../store/types.js';
import { requireAdminToken } from './admin-auth.js';
import { API_PREFIX } from './control-router.js';
import { SecurityEventsQuery } from './control-schemas.js';
import { handled, parseOr400, queryOf, type ApiLogger } from './http-helpers.js';
import { securityEventsPage } from './security-event-queries.js';

export interface SecurityRouterDeps {
  store: Store;
  adminToken: string;
  /** The sink the service counts into; without it only stored counts are shown. */
  securityEvents?: Partial<Pick<SecurityEvents, 'current'>>;
  now?: () => Date;
  logger?: ApiLogger;
}

export function createSecurityRouter(deps: SecurityRouterDeps): Router {
  const { store } = deps;
  const now = deps.now ?? (() => new Date());
  const auth = requireAdminToken(deps.adminToken);
  const router = new Router({ prefix: API_PREFIX });
  const h = (fn: (ctx: Context) => Promise<void>) => handled(deps.logger, fn);

  router.get('/security-events', auth, h(async (ctx) => {
    const q = parseOr400(SecurityEventsQuery, queryOf(ctx));
    await store.sync();
    const live = deps.securityEvents?.current?.() ?? [];
    ctx.body = securityEventsPage(await store.list<SecurityEventRecord>(SECURITY_EVENTS), live, q, now().getTime());
  }));

  router.get('/pending-intake', auth, h(async (ctx) => {
    await store.sync();
    const records = (await store.list<PendingIntakeRecord>(PENDING_INTAKE)).slice().sort((a, b) => a.receivedAt.localeCompare(b.receivedAt));
    ctx.body = {
      total: records.length,
      waiting: records.filter((r) => r.state === 'waiting').length,
      gaveUp: records.filter((r) => r.state === 'gave_up').length,
      // No text is stored for a waiting comment; what identifies it is enough.
      items: records.map((r) => ({
        key: r.key,
        state: r.state,
        deliveryId: r.deliveryId,
        repoKey: r.comment.repoKey,
        resourceKey: r.comment.resourceKey,
        commentId: r.comment.comment.id,
        commentUrl: r.comment.comment.htmlUrl,
        author: r.comment.actor.login,
        command: r.command,
        bodyChars: r.bodyChars,
        receivedAt: r.receivedAt,
        attempts: r.attempts,
        lastAttemptAt: r.lastAttemptAt,
        nextAttemptAt: r.nextAttemptAt,
        lastError: r.lastError,
      })),
    };
  }));

  return router;
}
