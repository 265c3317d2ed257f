// The statechart layout (visualizer/graph/machine-layout.ts: elkjs places and routes, our code
// places the labels), checked on every machine of machines/index.ts and on a nested fixture:
// what a reader needs from the picture, measured on the layout's own boxes and paths.
import { describe, expect, it } from 'vitest';
import { createMachine } from 'xstate';
import { samplePath, textWidth, type Box } from '../../visualizer/graph/label-placement.js';
import { machineGraph, type MachineGraph } from '../../visualizer/graph/machine-graph.js';
import { layoutMachine, type LayoutNode, type MachineLayout } from '../../visualizer/graph/machine-layout.js';
import { allMachines } from '../../visualizer/graph/machine-registry.js';

/** Nested states two deep, transitions out of and into compound states, a loop and a targetless one. */
const nested = createMachine({
  id: 'nestedFixture',
  initial: 'idle',
  states: {
    idle: { on: { GO: 'work', PING: { actions: 'log' } } },
    work: {
      initial: 'fetch',
      on: { CANCEL: 'stopped', RESET: '.fetch' },
      states: {
        fetch: { on: { FETCHED: 'check', RETRY: 'fetch' } },
        check: {
          initial: 'lint',
          on: { FAILED: '#nestedFixture.work.fetch' },
          states: { lint: { on: { LINTED: 'test' } }, test: { on: { PASSED: '#nestedFixture.done' } } },
        },
      },
    },
    stopped: { on: { RESUME: 'work.check' } },
    done: { type: 'final' },
  },
});

const label = (l: string) => ({ w: textWidth(l, 10.5) + 6, h: 13 });
const inside = (a: Box, b: Box) => a.x >= b.x - 0.5 && a.y >= b.y - 0.5 && a.x + a.w <= b.x + b.w + 0.5 && a.y + a.h <= b.y + b.h + 0.5;
const overlap = (a: Box, b: Box) => Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x) > 0.5 && Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y) > 0.5;
const isBox = (n: LayoutNode) => n.type === 'compound' || n.type === 'parallel';

function problems(graph: MachineGraph, layout: MachineLayout): string[] {
  const found: string[] = [];
  const nodes = new Map(layout.nodes.map((n) => [n.id, n]));
  // Every state is drawn once, compound states as boxes around their descendants.
  expect(layout.nodes.map((n) => n.id).sort()).toEqual(graph.nodes.map((n) => n.id).sort());
  for (const g of graph.nodes) {
    const n = nodes.get(g.id)!;
    if (g.parent && !inside(n, nodes.get(g.parent)!)) found.push(`${g.id} outside its parent ${g.parent}`);
  }
  const states = layout.nodes.filter((n) => !isBox(n));
  for (let i = 0; i < states.length; i++) {
    for (let j = i + 1; j < states.length; j++) if (overlap(states[i]!, states[j]!)) found.push(`states ${states[i]!.id} × ${states[j]!.id}`);
  }
  // Sibling boxes (and a box and a state that is not inside it) do not overlap either.
  for (const a of layout.nodes.filter(isBox)) {
    for (const b of layout.nodes) {
      if (a === b || b.id.startsWith(`${a.id}.`) || a.id.startsWith(`${b.id}.`)) continue;
      if (overlap(a, b)) found.push(`box ${a.id} × ${b.id}`);
    }
  }
  // Every transition is drawn by exactly one line, each with its label line.
  const drawn = layout.edges.flatMap((e) => e.edgeIds);
  expect([...drawn].sort()).toEqual(graph.edges.map((e) => e.id).sort());
  // Label blocks: over no state, no compound state's name, no other label block, inside the drawing.
  const blocks = layout.edges.map((e) => ({
    e,
    box: { x: e.labelX, y: e.labelY, w: Math.max(...e.labels.map((l) => label(l).w)), h: e.labels.length * 13 },
  }));
  for (const [i, { e, box }] of blocks.entries()) {
    expect(e.labels).toHaveLength(e.edgeIds.length);
    for (const s of states) if (overlap(box, { x: s.x, y: s.y, w: s.w, h: s.h })) found.push(`label ${e.labels[0]} × state ${s.id}`);
    for (const b of layout.nodes.filter(isBox)) if (overlap(box, { x: b.x, y: b.y, w: textWidth(b.label, 11) + 16, h: 22 })) found.push(`label ${e.labels[0]} × name of ${b.id}`);
    for (const other of blocks.slice(i + 1)) if (overlap(box, other.box)) found.push(`label ${e.labels[0]} × label ${other.e.labels[0]}`);
    if (!inside(box, { x: 0, y: 44, w: layout.width, h: layout.height - 44 })) found.push(`label ${e.labels[0]} outside the drawing`);
  }
  // Each line runs from its source's frame to its target's frame (within a few px), inside the drawing.
  for (const e of layout.edges) {
    const pts = samplePath(e.path);
    const near = (p: [number, number], n: LayoutNode) => p[0] >= n.x - 3 && p[0] <= n.x + n.w + 3 && p[1] >= n.y - 3 && p[1] <= n.y + n.h + 3;
    if (!near(pts[0]!, nodes.get(e.source)!)) found.push(`${e.source}>${e.target} does not start at ${e.source}`);
    if (!near(pts[pts.length - 1]!, nodes.get(e.target)!)) found.push(`${e.source}>${e.target} does not end at ${e.target}`);
    if (pts.some(([x, y]) => x < 0 || y < 44 || x > layout.width || y > layout.height)) found.push(`${e.source}>${e.target} leaves the drawing`);
  }
  if (layout.initial) {
    const first = layout.nodes.find((n) => Math.abs(n.x + n.w / 2 - layout.initial!.x) < 0.2 && Math.abs(n.y - 24 - layout.initial!.y) < 0.2);
    if (!first) found.push('the initial marker points at no state');
  }
  return found;
}

describe('machine layout', () => {
  it.each(allMachines().map((m) => [m.id, m] as const))('%s: no overlaps, every transition drawn end to end, labels inside the drawing', async (_id, machine) => {
    const graph = machineGraph(machine);
    const layout = await layoutMachine(graph);
    expect(problems(graph, layout)).toEqual([]);
  });

  it('nested states: children inside their parents, lines out of a box and into the child a transition enters', async () => {
    const graph = machineGraph(nested);
    expect(graph.nodes.filter((n) => n.type === 'compound').map((n) => n.id)).toEqual(['work', 'work.check']);
    const layout = await layoutMachine(graph);
    expect(problems(graph, layout)).toEqual([]);
    const line = (s: string, t: string) => layout.edges.find((e) => e.source === s && e.target === t);
    // A transition of a compound state leaves its box; entering a compound state ends at its initial child.
    expect(line('work', 'stopped')?.labels).toEqual(['CANCEL']);
    expect(line('idle', 'work.fetch')?.labels).toEqual(['GO']);
    expect(line('stopped', 'work.check.lint')?.labels).toEqual(['RESUME']);
    // A self-transition and a targetless transition are loops on their state.
    expect(line('work.fetch', 'work.fetch')).toMatchObject({ kind: 'self', labels: ['RETRY'] });
    expect(line('idle', 'idle')).toMatchObject({ kind: 'self', labels: ['PING'] });
    // The boxes: work.check within work, drawn before (behind) the states.
    const order = layout.nodes.map((n) => n.id);
    expect(order.indexOf('work')).toBeLessThan(order.indexOf('work.check'));
    expect(order.indexOf('work.check')).toBeLessThan(order.indexOf('work.check.lint'));
  });

  it('lays a machine out once per definition (the API and the exports share the result)', async () => {
    const graph = machineGraph(nested);
    const a = layoutMachine(graph);
    expect(layoutMachine(JSON.parse(JSON.stringify(graph)) as MachineGraph)).toBe(a);
    const changed = { ...graph, edges: graph.edges.slice(1) };
    expect(layoutMachine(changed)).not.toBe(a);
    expect((await layoutMachine(changed)).edges.flatMap((e) => e.edgeIds)).not.toContain(graph.edges[0]!.id);
  });
});
