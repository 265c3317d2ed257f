// Usage, limits and provider rate limits for operators:
//   GET  /api/gitea-workflow/usage?days=7            sums per repository, per user and per day,
//                                                     the limits in force, the provider hold
//   POST /api/gitea-workflow/repos/:repoKey/limits   a per-repository override, audited, idempotent
//                                                     by requestId like every control request
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { ControlRequestRecord, RepositoryRecord } from '../domain/records.js';
import { findRepository } from '../domain/repository-identity.js';
import type { Store } from '../store/types.js';
import { repoOverride } from '../usage/limits.js';
import type { ProviderHold } from '../usage/provider-hold.js';
import { LIMIT_NAMES, limitsKey, type RepoLimitsRecord, type UsageLimits } from '../domain/usage-records.js';
import { limitsView, usageReport } from '../usage/usage-report.js';
import { requireAdminToken } from './admin-auth.js';
import { API_PREFIX } from './control-router.js';
import { ControlBody } from './control-schemas.js';
import { ApiError, handled, parseOr400, queryOf, readJsonBody, type ApiLogger } from './http-helpers.js';

export interface UsageRouterDeps {
  store: Store;
  adminToken: string;
  limits: UsageLimits;
  providerHold?: ProviderHold;
  now?: () => Date;
  logger?: ApiLogger;
}

const UsageQuery = z.strictObject({ days: z.coerce.number().int().min(1).max(90).default(7) });

const limitValue = z.number().int().min(1).max(1_000_000_000_000).nullable();
/** A field left out keeps the configured limit; `null` lifts it for this repository. */
const LimitsBody = ControlBody.extend({
  limits: z.strictObject(Object.fromEntries(LIMIT_NAMES.map((n) => [n, limitValue.optional()])) as Record<(typeof LIMIT_NAMES)[number], z.ZodOptional<typeof limitValue>>),
});

export function createUsageRouter(deps: UsageRouterDeps): Router {
  const { store } = deps;
  const now = deps.now ?? (() => new Date());
  const auth = requireAdminToken(deps.adminToken);
  const router = new Router({ prefix: API_PREFIX });
  const h = (fn: (ctx: Context) => Promise<void>) => handled(deps.logger, fn);

  router.get('/usage', auth, h(async (ctx) => {
    const q = parseOr400(UsageQuery, queryOf(ctx));
    await store.sync();
    ctx.body = {
      ...(await usageReport(store, now(), q.days)),
      limits: await limitsView(deps.limits, store),
      providerHold: deps.providerHold?.status(now().getTime()) ?? null,
    };
  }));

  router.post('/repos/:repoKey/limits', auth, h(async (ctx) => {
    const req = parseOr400(LimitsBody, await readJsonBody(ctx));
    const requested = String(ctx.params['repoKey']);
    const action = 'control.repo_limits';
    const answer = await store.transact(async (tx) => {
      const prior = await tx.get<ControlRequestRecord>('control_requests', req.requestId);
      if (prior) {
        if (prior.action !== action || prior.target !== requested) throw new ApiError(409, { error: 'request_id_conflict' });
        return { ...prior.response, replayed: true };
      }
      // Any letter case names the repository (Gitea's rule); the override is kept under the stored
      // key, which is the one intake's quota check asks for.
      const repo = findRepository(requested, await tx.list<RepositoryRecord>('repositories'));
      const repoKey = repo?.repoKey ?? requested;
      const before = await repoOverride(tx, repoKey);
      let response: { status: number; body: Record<string, unknown> };
      if (!repo) {
        response = { status: 404, body: { error: 'repo_not_found' } };
      } else {
        const at = now().toISOString();
        const next: RepoLimitsRecord = {
          key: limitsKey(repoKey),
          repoKey,
          limits: { ...(before?.limits ?? {}), ...req.limits },
          updatedBy: `admin:${req.operator}`,
          updatedAt: at,
          version: (before?.version ?? 0) + 1,
        };
        await tx.put('usage', next.key, next);
        response = { status: 200, body: { ok: true, repoKey, limits: next.limits, version: next.version } };
      }
      await tx.appendAudit({
        action,
        actor: `admin:${req.operator}`,
        level: 'security',
        errorCode: response.status === 200 ? null : 'repo_not_found',
        metadata: { repoKey, requestId: req.requestId, reason: req.reason, status: response.status, before: before?.limits ?? null, after: response.status === 200 ? response.body['limits'] : null },
      });
      await tx.insert<ControlRequestRecord>('control_requests', req.requestId, {
        requestId: req.requestId,
        operator: req.operator,
        action,
        target: requested,
        reason: req.reason,
        response,
        createdAt: now().toISOString(),
      });
      return { ...response, replayed: false };
    });
    if (answer.replayed) ctx.set('idempotent-replay', 'true');
    ctx.status = answer.status;
    ctx.body = answer.body;
  }));

  return router;
}
