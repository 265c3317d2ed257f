import Router from '@koa/router';
import type { AnyStateMachine } from 'xstate';
import type { ActorRecord, ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { requireAdminToken } from './admin-auth.js';
import { API_PREFIX } from './control-router.js';
import { ActorListQuery } from './control-schemas.js';
import { ApiError, handled, parseOr400, queryOf, type ApiLogger } from './http-helpers.js';
import { machineGraph, type MachineGraph } from '../../visualizer/graph/machine-graph.js';
import { layoutMachine, type MachineLayout } from '../../visualizer/graph/machine-layout.js';
import { allMachines, exportName } from '../../visualizer/graph/machine-registry.js';
import { PRECOMPUTED_LAYOUTS } from '../../visualizer/exports/layouts.generated.js';
import { graphHash, type PrecomputedLayout } from '../../visualizer/precomputed-layouts.js';
import { actorSummary } from './task-queries.js';

export interface MachinesRouterDeps {
  store: Store;
  adminToken: string;
  /** Defaults to every machine `machines/index.ts` exports. */
  machines?: AnyStateMachine[];
  /** `warn` (when the logger has it) tells that the committed layouts are stale. */
  logger?: ApiLogger & { warn?(obj: Record<string, unknown>, msg?: string): void };
  /** Layouts computed at export time, by machine id. Defaults to visualizer/exports/layouts.generated.ts. */
  precomputedLayouts?: Readonly<Record<string, PrecomputedLayout>>;
  /** Lays out a graph with no matching precomputed layout. Defaults to ELK (`layoutMachine`). */
  layout?: (graph: MachineGraph) => Promise<MachineLayout>;
  /** This node's live actors (`GET /actor-system`). */
  runtime?: Pick<ActorRuntime, 'tree'>;
}

export interface MachineView {
  id: string;
  name: string;
  graph: MachineGraph;
  layout: MachineLayout;
}

/**
 * What the visualizer draws: each machine's statechart serialized from its definition with a
 * layout (`GET /machines`), the actors of a kind (`GET /actors?kind=`), one actor with its path
 * so far from the audit log's `<kind>.transition` events (`GET /actors/:actorId`), and the actors
 * live on this node as the tree of its actor system (`GET /actor-system`).
 */
export function createMachinesRouter(deps: MachinesRouterDeps): Router {
  const { store } = deps;
  const auth = requireAdminToken(deps.adminToken);
  const machines = deps.machines ?? allMachines();
  const precomputed = deps.precomputedLayouts ?? PRECOMPUTED_LAYOUTS;
  const layout = deps.layout ?? layoutMachine;
  // Served from the layouts `npm run visualize` computed: ELK would block the event loop for
  // seconds (webhooks wait, lease heartbeats run late). ELK runs here only for a machine whose
  // graph changed since, on the first request, and once per router (the views are kept).
  let views: Promise<MachineView[]> | null = null;
  const machineViews = (): Promise<MachineView[]> =>
    (views ??= (async () => {
      const laidOutNow: string[] = [];
      const list = await Promise.all(
        machines.map(async (m) => {
          const graph = machineGraph(m);
          const stored = precomputed[m.id];
          if (stored && stored.graphHash === graphHash(graph)) return { id: m.id, name: exportName(m.id), graph, layout: stored.layout };
          laidOutNow.push(m.id);
          return { id: m.id, name: exportName(m.id), graph, layout: await layout(graph) };
        }),
      );
      if (laidOutNow.length) {
        (deps.logger?.warn ?? deps.logger?.error)?.call(
          deps.logger,
          { machines: laidOutNow.sort() },
          'visualizer: no precomputed layout for these machine graphs (changed since `npm run visualize`?); laid out with ELK in the service. Run `npm run visualize` and commit visualizer/exports/.',
        );
      }
      return list;
    })().catch((err: unknown) => {
      views = null;
      throw err;
    }));
  const router = new Router({ prefix: API_PREFIX });
  const h = (fn: Parameters<typeof handled>[1]) => handled(deps.logger, fn);

  router.get('/machines', auth, h(async (ctx) => {
    ctx.body = { machines: await machineViews() };
  }));

  router.get('/actor-system', auth, h(async (ctx) => {
    if (!deps.runtime) throw new ApiError(404, { error: 'actor_system_not_here' });
    ctx.body = { root: deps.runtime.tree() };
  }));

  router.get('/actors', auth, h(async (ctx) => {
    const q = parseOr400(ActorListQuery, queryOf(ctx));
    await store.sync();
    const list = q.kind ? await store.byIndex<ActorRecord>('actors', 'kind', q.kind) : await store.list<ActorRecord>('actors');
    const items = [...list]
      .sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0))
      .slice(0, q.limit)
      .map(actorSummary);
    const all = await store.list<ActorRecord>('actors');
    // Which actor kind runs which machine, so the page can switch its actor filter with the drawing.
    const machineKinds: Record<string, string> = {};
    for (const a of all) machineKinds[a.machineId] ??= a.kind;
    ctx.body = { items, kinds: [...new Set(all.map((a) => a.kind))].sort(), machineKinds };
  }));

  router.get('/actors/:actorId', auth, h(async (ctx) => {
    await store.sync();
    const actorId = String(ctx.params['actorId']);
    const actor = await store.get<ActorRecord>('actors', actorId);
    if (!actor) throw new ApiError(404, { error: 'actor_not_found' });
    const path = (await store.audit({ actorId }))
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
