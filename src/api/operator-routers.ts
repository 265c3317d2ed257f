import type Router from '@koa/router';
import type { AnyStateMachine } from 'xstate';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { createControlRouter } from './control-router.js';
import type { ApiLogger } from './http-helpers.js';
import { createLiveEvents, type LiveEvents } from './live-events.js';
import { createMachinesRouter } from './machines-router.js';
import { createStaticPagesRouter } from './static-pages.js';
import { controlOf } from './task-queries.js';

export interface OperatorDeps {
  store: Store;
  runtime: ActorRuntime;
  adminToken: string;
  onControlChanged?: () => void;
  onAbortRequested?: (taskId: string) => void;
  now?: () => Date;
  logger?: ApiLogger;
  machines?: AnyStateMachine[];
}

export interface OperatorRouters {
  /** Mount all of them: control/query API, live events, machines, and the two pages. */
  routers: Router[];
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
    live,
    close: () => live.close(),
  };
}
