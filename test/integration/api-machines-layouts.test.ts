// `GET /machines` serves the layouts `npm run visualize` computed (visualizer/exports/layouts.generated.ts)
// and runs ELK only for a machine whose graph changed since: ELK in the service blocks the event loop
// for seconds under load. The layout function is injected (a counting wrapper around the real ELK
// layout) only to count its calls; the child-process test runs the router exactly as the service does.
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import Koa from 'koa';
import { setup } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { createMachinesRouter, type MachinesRouterDeps } from '../../src/api/machines-router.js';
import { machineGraph, type MachineGraph } from '../../visualizer/graph/machine-graph.js';
import { layoutMachine, type MachineLayout } from '../../visualizer/graph/machine-layout.js';
import { allMachines } from '../../visualizer/graph/machine-registry.js';
import { PRECOMPUTED_LAYOUTS } from '../../visualizer/exports/layouts.generated.js';
import { graphHash } from '../../visualizer/precomputed-layouts.js';

const TOKEN = 'machines-layouts-test-token-0123456789';
const repoRoot = new URL('../..', import.meta.url).pathname;

interface Served {
  machines: { id: string; graph: MachineGraph; layout: MachineLayout }[];
}

const closers: (() => void)[] = [];
afterEach(() => closers.splice(0).forEach((close) => close()));

async function serve(deps: Partial<MachinesRouterDeps>): Promise<() => Promise<Served>> {
  const app = new Koa();
  app.use(createMachinesRouter({ store: {} as MachinesRouterDeps['store'], adminToken: TOKEN, ...deps }).routes());
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  closers.push(() => server.close());
  const { port } = server.address() as AddressInfo;
  return async () => {
    const res = await fetch(`http://127.0.0.1:${port}/api/gitea-workflow/machines`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    return (await res.json()) as Served;
  };
}

function countingElk() {
  const calls: string[] = [];
  const layout = (graph: MachineGraph) => {
    calls.push(graph.id);
    return layoutMachine(graph);
  };
  return { calls, layout };
}

function recordingLogger() {
  const warnings: { obj: Record<string, unknown>; msg?: string }[] = [];
  return {
    warnings,
    logger: {
      error: (obj: Record<string, unknown>, msg?: string) => void warnings.push({ obj, ...(msg !== undefined ? { msg } : {}) }),
      warn: (obj: Record<string, unknown>, msg?: string) => void warnings.push({ obj, ...(msg !== undefined ? { msg } : {}) }),
    },
  };
}

describe('GET /machines layouts', () => {
  it('serves every shipped machine its precomputed layout without running ELK; the JSON equals what ELK computes', async () => {
    const elk = countingElk();
    const log = recordingLogger();
    const get = await serve({ layout: elk.layout, logger: log.logger });
    const served = await get();
    expect(elk.calls).toEqual([]);
    expect(log.warnings).toEqual([]);
    expect(served.machines.map((m) => m.id)).toEqual(allMachines().map((m) => m.id));
    // The page receives the same JSON as when the service laid the machines out itself.
    for (const m of allMachines()) {
      const fresh = JSON.parse(JSON.stringify(await layoutMachine(machineGraph(m)))) as MachineLayout;
      expect(served.machines.find((s) => s.id === m.id)!.layout, m.id).toEqual(fresh);
    }
  }, 120_000);

  it('a fresh service process answers GET /machines without loading elkjs', async () => {
    // Node puts the CommonJS elkjs bundle into require.cache when anything imports it.
    const script = `
      import { createRequire } from 'node:module';
      import Koa from 'koa';
      import { createMachinesRouter } from './src/api/machines-router.ts';
      const app = new Koa();
      app.use(createMachinesRouter({ store: {}, adminToken: ${JSON.stringify(TOKEN)} }).routes());
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const res = await fetch('http://127.0.0.1:' + server.address().port + '/api/gitea-workflow/machines', { headers: { authorization: 'Bearer ${TOKEN}' } });
      const body = await res.json();
      server.close();
      const elkjs = Object.keys(createRequire(import.meta.url).cache).filter((k) => k.includes('elkjs'));
      console.log(JSON.stringify({ status: res.status, machines: body.machines.length, elkjs }));
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: repoRoot });
    const result = JSON.parse(stdout.trim().split('\n').pop()!) as { status: number; machines: number; elkjs: string[] };
    expect(result).toEqual({ status: 200, machines: allMachines().length, elkjs: [] });
  }, 120_000);

  it('a machine whose graph changed since the export is laid out by ELK, correctly, with one warning', async () => {
    // Same id as a shipped machine, another graph: what a developer has after editing repoLock
    // without running `npm run visualize`.
    const changed = setup({}).createMachine({
      id: 'repoLock',
      initial: 'free',
      states: { free: { on: { ACQUIRE: 'held' } }, held: { on: { RELEASE: 'free', EXPIRE: 'expired' } }, expired: {} },
    });
    const graph = machineGraph(changed);
    expect(PRECOMPUTED_LAYOUTS['repoLock']).toBeDefined();
    expect(graphHash(graph)).not.toBe(PRECOMPUTED_LAYOUTS['repoLock']!.graphHash);
    const shipped = allMachines().filter((m) => m.id !== 'repoLock');
    const elk = countingElk();
    const log = recordingLogger();
    const get = await serve({ machines: [...shipped, changed], layout: elk.layout, logger: log.logger });

    const served = await get();
    expect(elk.calls).toEqual(['repoLock']);
    const layout = served.machines.find((m) => m.id === 'repoLock')!.layout;
    expect(layout).toEqual(JSON.parse(JSON.stringify(await layoutMachine(graph))));
    expect(layout.nodes.map((n) => n.id).sort()).toEqual(['expired', 'free', 'held']);
    expect(layout.edges.flatMap((e) => e.edgeIds).sort()).toEqual(graph.edges.map((e) => e.id).sort());
    expect(log.warnings).toHaveLength(1);
    expect(log.warnings[0]!.obj).toEqual({ machines: ['repoLock'] });
    expect(log.warnings[0]!.msg).toContain('npm run visualize');

    await get();
    expect(elk.calls).toEqual(['repoLock']);
    expect(log.warnings).toHaveLength(1);
  }, 120_000);
});
