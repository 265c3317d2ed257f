import type Router from '@koa/router';
import type { AnyStateMachine } from 'xstate';
import type Koa from 'koa';
import type { SecurityEvents } from '../intake/security-events.js';
import { authFailureGuard } from './auth-failure-guard.js';
import { API_PREFIX, createControlRouter, type ControlRouterDeps } from './control-router.js';
import { createLiveEvents, type LiveEvents } from './live-events.js';
import { createMachinesRouter } from './machines-router.js';
import { createStaticPagesRouter } from './static-pages.js';
import { controlOf } from './task-queries.js';

export interface OperatorDeps extends ControlRouterDeps {
  machines?: AnyStateMachine[];
  /** Where failed admin authentications are counted (aggregated, expiring). */
  securityEvents?: Pick<SecurityEvents, 'record'>;
  /** Failed admin authentications per client and minute before 429. Default 10. */
  maxAuthFailures?: number;
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
    onControlChanged: () => {
      const c = controlOf(deps.store);
      live.publish('control', { globalPaused: c.globalPaused, updatedBy: c.updatedBy, updatedAt: c.updatedAt });
      deps.onControlChanged?.();
    },
  });
  return {
    routers: [control, live.router, createMachinesRouter(deps), createStaticPagesRouter()],
    middleware: [authFailureGuard({ prefixes: [API_PREFIX], ...(deps.maxAuthFailures !== undefined ? { maxFailures: deps.maxAuthFailures } : {}), ...(deps.securityEvents ? { securityEvents: deps.securityEvents } : {}) })],
    live,
    close: () => live.close(),
  };
}
