import Router from '@koa/router';
import type { AnyStateMachine } from 'xstate';
import type { ActorRecord } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { requireAdminToken } from './admin-auth.js';
import { API_PREFIX } from './control-router.js';
import { ActorListQuery } from './control-schemas.js';
import { ApiError, handled, parseOr400, queryOf, type ApiLogger } from './http-helpers.js';
import { machineGraph, type MachineGraph } from '../../visualizer/graph/machine-graph.js';
import { layoutMachine, type MachineLayout } from '../../visualizer/graph/machine-layout.js';
import { allMachines, exportName } from '../../visualizer/graph/machine-registry.js';
import { actorSummary } from './task-queries.js';

export interface MachinesRouterDeps {
  store: Store;
  adminToken: string;
  /** Defaults to every machine `machines/index.ts` exports. */
  machines?: AnyStateMachine[];
  logger?: ApiLogger;
}

export interface MachineView {
  id: string;
  name: string;
  graph: MachineGraph;
  layout: MachineLayout;
}

/**
 * What the visualizer draws: each machine's statechart serialized from its definition with a
 * layout (`GET /machines`), the actors of a kind (`GET /actors?kind=`), and one actor with its path
 * so far from the audit log's `<kind>.transition` events (`GET /actors/:actorId`).
 */
export function createMachinesRouter(deps: MachinesRouterDeps): Router {
  const { store } = deps;
  const auth = requireAdminToken(deps.adminToken);
  const machines = deps.machines ?? allMachines();
  // Laid out on the first request, not at start-up: the layout costs CPU (layoutMachine caches it
  // per machine definition), and only operators opening the visualizer need it.
  let views: Promise<MachineView[]> | null = null;
  const machineViews = (): Promise<MachineView[]> =>
    (views ??= Promise.all(
      machines.map(async (m) => {
        const graph = machineGraph(m);
        return { id: m.id, name: exportName(m.id), graph, layout: await layoutMachine(graph) };
      }),
    ).catch((err: unknown) => {
      views = null;
      throw err;
    }));
  const router = new Router({ prefix: API_PREFIX });
  const h = (fn: Parameters<typeof handled>[1]) => handled(deps.logger, fn);

  router.get('/machines', auth, h(async (ctx) => {
    ctx.body = { machines: await machineViews() };
  }));

  router.get('/actors', auth, h(async (ctx) => {
    const q = parseOr400(ActorListQuery, queryOf(ctx));
    await store.sync();
    const list = q.kind ? store.byIndex<ActorRecord>('actors', 'kind', q.kind) : store.list<ActorRecord>('actors');
    const items = [...list]
      .sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0))
      .slice(0, q.limit)
      .map(actorSummary);
    const all = store.list<ActorRecord>('actors');
    // Which actor kind runs which machine, so the page can switch its actor filter with the drawing.
    const machineKinds: Record<string, string> = {};
    for (const a of all) machineKinds[a.machineId] ??= a.kind;
    ctx.body = { items, kinds: [...new Set(all.map((a) => a.kind))].sort(), machineKinds };
  }));

  router.get('/actors/:actorId', auth, h(async (ctx) => {
    await store.sync();
    const actorId = String(ctx.params['actorId']);
    const actor = store.get<ActorRecord>('actors', actorId);
    if (!actor) throw new ApiError(404, { error: 'actor_not_found' });
    const path = store
      .audit({ actorId })
      .filter((e) => e.action === `${actor.kind}.transition`)
      .map((e) => ({
        seq: e.seq,
        timestamp: e.timestamp,
        from: e.fromState ?? null,
        to: e.toState ?? null,
        stateVersion: e.stateVersion ?? null,
        by: e.actor,
        event: (e.metadata?.['event'] as { type?: unknown } | undefined)?.type ?? null,
      }));
    const context = (actor.snapshot as { context?: unknown } | null)?.context ?? null;
    ctx.body = { actor: actorSummary(actor), context, path };
  }));

  return router;
}
