import type Router from '@koa/router';
import type { AnyStateMachine } from 'xstate';
import type Koa from 'koa';
import type { SecurityEvents } from '../intake/security-events.js';
import { authFailureGuard } from './auth-failure-guard.js';
import { API_PREFIX, createControlRouter, type ControlRouterDeps } from './control-router.js';
import { createLiveEvents, type LiveEvents, type LiveEventsDeps } from './live-events.js';
import { createMachinesRouter } from './machines-router.js';
import { createSecurityRouter } from './security-router.js';
import { createStaticPagesRouter } from './static-pages.js';
import { controlOf } from './task-queries.js';
import { createUsageRouter } from './usage-router.js';
import type { ProviderHold } from '../usage/provider-hold.js';
import type { UsageLimits } from '../domain/usage-records.js';

export interface OperatorDeps extends ControlRouterDeps, Pick<LiveEventsDeps, 'auditFeed'> {
  machines?: AnyStateMachine[];
  /** Where failed admin authentications are counted (aggregated, expiring); `current` shows the open window on GET /security-events. */
  securityEvents?: Pick<SecurityEvents, 'record'> & Partial<Pick<SecurityEvents, 'current'>>;
  /** Failed admin authentications per client and minute before 429. Default 10. */
  maxAuthFailures?: number;
  /** The configured limits (src/usage/), shown by `GET /usage`; none when absent. */
  limits?: UsageLimits;
  providerHold?: ProviderHold;
}

export interface OperatorRouters {
  /** Mount all of them: control/query API, live events, machines, and the two pages. */
  routers: Router[];
  /** Mount before the routers: limits failed admin authentications per client (auth-failure-guard.ts). */
  middleware: Koa.Middleware[];
  live: LiveEvents;
  /** Ends open event streams (call before `server.close()`). */
  close(): void;
}

/** Everything the operators' view serves, wired together, for the app to mount in one call. */
export function createOperatorRouters(deps: OperatorDeps): OperatorRouters {
  const live = createLiveEvents(deps);
  const control = createControlRouter({
    ...deps,
    onControlChanged: async () => {
      const c = await controlOf(deps.store);
      live.publish('control', { globalPaused: c.globalPaused, updatedBy: c.updatedBy, updatedAt: c.updatedAt });
      await deps.onControlChanged?.();
    },
  });
  return {
    middleware: [authFailureGuard({ prefixes: [API_PREFIX], ...(deps.maxAuthFailures !== undefined ? { maxFailures: deps.maxAuthFailures } : {}), ...(deps.securityEvents ? { securityEvents: deps.securityEvents } : {}) })],
    routers: [
      control,
      live.router,
      createMachinesRouter(deps),
      createUsageRouter({
        store: deps.store,
        adminToken: deps.adminToken,
        limits: deps.limits ?? {},
        ...(deps.providerHold ? { providerHold: deps.providerHold } : {}),
        ...(deps.now ? { now: deps.now } : {}),
        ...(deps.logger ? { logger: deps.logger } : {}),
      }),
      createSecurityRouter({
        store: deps.store,
        adminToken: deps.adminToken,
        ...(deps.securityEvents ? { securityEvents: deps.securityEvents } : {}),
        ...(deps.now ? { now: deps.now } : {}),
        ...(deps.logger ? { logger: deps.logger } : {}),
      }),
      createStaticPagesRouter(),
    ],
    live,
    close: () => live.close(),
  };
}
