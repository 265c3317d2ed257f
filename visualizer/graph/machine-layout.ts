import type { ELK as ElkEngine, ElkExtendedEdge, ElkNode, ElkPoint } from 'elkjs/lib/elk.bundled.js';
import { labelBlock, placeLabels, textWidth, type Box } from './label-placement.js';
import type { GraphEdge, MachineGraph } from './machine-graph.js';

/**
 * A layered drawing of a statechart, computed on the server so the visualizer page and the SVG
 * export draw the same picture and the browser needs no layout code. The Eclipse Layout Kernel's
 * layered algorithm (elkjs) places the states and routes the transitions: cycle breaking, layering,
 * crossing minimisation, spline routing, and nested states inside their parent
 * (`hierarchyHandling: INCLUDE_CHILDREN`). Labels are placed afterwards (label-placement.ts).
 */
export interface MachineLayout {
  width: number;
  height: number;
  nodes: LayoutNode[];
  edges: LayoutEdge[];
  initial: { x: number; y: number; path: string } | null;
}

export interface LayoutNode {
  id: string;
  label: string;
  type: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface LayoutEdge {
  /** The graph edges drawn by this line (parallel transitions share one line, one label line each). */
  edgeIds: string[];
  source: string;
  target: string;
  path: string;
  labels: string[];
  /** Top-left corner of the label block. */
  labelX: number;
  labelY: number;
  kind: 'forward' | 'back' | 'self';
}

const NODE_H = 34;
const NODE_PAD = 26;
const STATE_FONT = 13;
/** The `invoke …` line drawn under a state (visualizer page and SVG export). */
const INVOKE_FONT = 9.5;
const INVOKE_H = 15;
const MARGIN = 40;
/** How far a loop reaches right of its state. */
const LOOP_W = 30;
/** Room above the first state: the page and the SVG export keep the top 44 px for a title. */
const TOP = 84;
/** Room inside a compound state's box for its name. */
const BOX_PAD = '[top=30,left=14,bottom=14,right=14]';

const LAYOUT_OPTIONS: Record<string, string> = {
  'elk.algorithm': 'layered',
  'elk.direction': 'DOWN',
  'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
  'elk.edgeRouting': 'SPLINES',
  // Depth-first from the initial state: the happy path runs down, returns run up.
  'elk.layered.cycleBreaking.strategy': 'DEPTH_FIRST',
  // Straight vertical runs for long transitions keep the task machine narrow (about 1,100 px).
  'elk.layered.nodePlacement.strategy': 'LINEAR_SEGMENTS',
  // Room between layers for the label blocks placed afterwards.
  'elk.layered.spacing.nodeNodeBetweenLayers': '80',
  'elk.spacing.nodeNode': '24',
  'elk.spacing.edgeNode': '12',
  'elk.spacing.edgeEdge': '10',
  'elk.json.shapeCoords': 'ROOT',
  'elk.json.edgeCoords': 'ROOT',
};

/** The same machine definition gives the same graph: lay it out once per process (ELK costs CPU). */
const cache = new Map<string, Promise<MachineLayout>>();

export function layoutMachine(graph: MachineGraph): Promise<MachineLayout> {
  const key = JSON.stringify(graph);
  let layout = cache.get(key);
  if (!layout) {
    layout = computeLayout(graph);
    cache.set(key, layout);
    layout.catch(() => cache.delete(key));
  }
  return layout;
}

interface Line {
  key: string;
  s: string;
  t: string;
  group: GraphEdge[];
  labels: string[];
}

/**
 * One line per (source, target) pair. A transition from a compound state leaves its box (it
 * applies in every child); one into a compound state ends at the child it enters (its initial
 * state, recursively); a targetless transition (actions only) is a loop on its state.
 */
export function transitionLines(graph: MachineGraph): Line[] {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const lines = new Map<string, Line>();
  for (const e of graph.edges) {
    const t = e.target === null ? e.source : enteredLeaf(graph, e.target);
    const key = `${e.source}>${t}`;
    const line = lines.get(key) ?? { key, s: e.source, t, group: [], labels: [] };
    line.group.push(e);
    line.labels.push(e.guard ? `${e.label} [${e.guard}]` : e.label);
    lines.set(key, line);
  }
  return [...lines.values()].filter((l) => byId.has(l.s) && byId.has(l.t));
}

function isBox(type: string | undefined): boolean {
  return type === 'compound' || type === 'parallel';
}

/** The atomic state a transition into `id` ends in: a compound state's initial child, recursively. */
export function enteredLeaf(graph: MachineGraph, id: string): string {
  let cur = id;
  for (let i = 0; i < 32; i++) {
    const node = graph.nodes.find((n) => n.id === cur);
    if (!node || !isBox(node.type)) break;
    const next = node.initial ?? graph.nodes.find((n) => n.parent === cur)?.id;
    if (!next) break;
    cur = next;
  }
  return cur;
}

let engine: Promise<ElkEngine> | null = null;

/**
 * ELK is loaded on first use, not when the service starts (about 1.5 MB of JavaScript). The bundled
 * build runs the layout in this thread: no worker file to ship or start.
 */
function elk(): Promise<ElkEngine> {
  engine ??= import('elkjs/lib/elk.bundled.js').then((m) => {
    // A CommonJS module seen from ESM: tsc types the default import as the module object (whose
    // `default` is the class); Node hands over module.exports, the class, which carries `default` too.
    const ELK = m.default.default;
    return new ELK();
  });
  return engine;
}

async function computeLayout(graph: MachineGraph): Promise<MachineLayout> {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  /** The drawn width of a state whose ELK box also holds its loop. */
  const widths = new Map<string, number>();
  const invokeText = (id: string): string | null => {
    const invokes = byId.get(id)?.invokes ?? [];
    return invokes.length ? `invoke ${invokes.map((i) => i.src).join(', ')}` : null;
  };
  const lines = transitionLines(graph);

  // A loop is drawn beside its state's right edge with its label after it; the state's box in ELK
  // is widened by that much, and its lines attach to ports over the state itself.
  const loopRoom = new Map<string, number>();
  for (const line of lines) if (line.s === line.t && !isBox(byId.get(line.s)?.type)) loopRoom.set(line.s, LOOP_W + 6 + labelBlock(line.labels).w);
  const start = graph.initial ? enteredLeaf(graph, graph.initial) : undefined;
  /**
   * The ELK graph. `seen`: where a first pass put each state's centre; with it, each line at a state
   * with a loop gets a port on the side facing its other end, ordered by that end's x.
   */
  const elkGraph = (seen?: Map<string, { x: number; y: number }>): ElkNode => {
    const elkNodes = new Map<string, ElkNode>();
    for (const n of graph.nodes) {
      const invoke = invokeText(n.id);
      // An atomic state's box includes the `invoke …` line under it, so nothing is placed over it.
      const w = Math.ceil(Math.max(90, textWidth(n.key, STATE_FONT) + NODE_PAD, invoke ? textWidth(invoke, INVOKE_FONT) + 8 : 0));
      const room = loopRoom.get(n.id);
      const ports = room && seen ? { ports: [], layoutOptions: { 'elk.portConstraints': 'FIXED_POS' } } : {};
      elkNodes.set(
        n.id,
        isBox(n.type)
          ? { id: n.id, children: [], layoutOptions: { 'elk.padding': BOX_PAD } }
          : { id: n.id, width: w + (room ?? 0), height: NODE_H + (invoke ? INVOKE_H : 0), ...ports },
      );
      if (room) widths.set(n.id, w);
    }
    const root: ElkNode = { id: '__root', layoutOptions: LAYOUT_OPTIONS, children: [], edges: [] };
    if (start && !byId.get(start)?.parent) elkNodes.get(start)!.layoutOptions = { ...elkNodes.get(start)!.layoutOptions, 'elk.layered.layering.layerConstraint': 'FIRST' };
    for (const n of graph.nodes) (n.parent ? elkNodes.get(n.parent)?.children ?? root.children! : root.children!).push(elkNodes.get(n.id)!);
    const order = new Map<string, number>();
    const end = (id: string, other: string, key: string, outgoing: boolean): string => {
      const node = elkNodes.get(id)!;
      const [me, them] = [seen?.get(id), seen?.get(other)];
      if (!node.ports || !me || !them) return id;
      const side = them.y < me.y - 1 ? 'NORTH' : them.y > me.y + 1 ? 'SOUTH' : outgoing ? 'SOUTH' : 'NORTH';
      const port = `${key}@${id}`;
      node.ports.push({ id: port, width: 1, height: 1, y: side === 'NORTH' ? -1 : node.height!, layoutOptions: { 'elk.port.side': side } });
      order.set(port, them.x);
      return port;
    };
    for (const line of lines) {
      if (line.s === line.t) continue;
      const edge: ElkExtendedEdge = { id: line.key, sources: [end(line.s, line.t, line.key, true)], targets: [end(line.t, line.s, line.key, false)] };
      root.edges!.push(edge);
    }
    // Ports spread evenly over the drawn state, not over the room kept for its loop.
    for (const [id, w] of widths) {
      const ports = elkNodes.get(id)!.ports ?? [];
      for (const side of [-1, elkNodes.get(id)!.height!]) {
        const list = ports.filter((p) => p.y === side).sort((a, b) => order.get(a.id)! - order.get(b.id)!);
        list.forEach((p, i) => (p.x = (w * (i + 1)) / (list.length + 1)));
      }
    }
    return root;
  };
  const centres = (laid: ElkNode): Map<string, { x: number; y: number }> => {
    const out = new Map<string, { x: number; y: number }>();
    const walk = (n: ElkNode): void => {
      for (const c of n.children ?? []) {
        out.set(c.id, { x: c.x! + (widths.get(c.id) ?? c.width!) / 2, y: c.y! + c.height! / 2 });
        walk(c);
      }
    };
    walk(laid);
    return out;
  };
  const engine = await elk();
  // States with loops need a second pass (ports on the side facing each line's other end).
  const firstPass = await engine.layout(elkGraph());
  const out = loopRoom.size ? await engine.layout(elkGraph(centres(firstPass))) : firstPass;

  const placedNodes = new Map<string, ElkNode>();
  const walk = (n: ElkNode): void => {
    for (const c of n.children ?? []) {
      placedNodes.set(c.id, c);
      walk(c);
    }
  };
  walk(out);
  const nodes: LayoutNode[] = graph.nodes.map((n) => {
    const p = placedNodes.get(n.id)!;
    return { id: n.id, label: n.key, type: n.type, x: p.x!, y: p.y!, w: widths.get(n.id) ?? p.width!, h: isBox(n.type) ? p.height! : NODE_H };
  });
  const nodeById = new Map(nodes.map((n) => [n.id, n]));
  const edges: LayoutEdge[] = [];
  for (const e of out.edges ?? []) {
    const line = lines.find((l) => l.key === e.id)!;
    const section = e.sections?.[0];
    if (!section) throw new Error(`ELK routed no path for ${e.id}`);
    const points = [section.startPoint, ...(section.bendPoints ?? []), section.endPoint];
    // A line leaving or entering the bottom of a state with an `invoke …` line (inside the box ELK
    // placed) is carried on to the state's frame.
    const frameBelow = (id: string, p: ElkPoint): ElkPoint | null => {
      const n = nodeById.get(id)!;
      return invokeText(id) && !isBox(n.type) && Math.abs(p.y - (n.y + NODE_H + INVOKE_H)) < 1 ? { x: p.x, y: n.y + NODE_H } : null;
    };
    const up = points[points.length - 1]!.y < points[0]!.y;
    const path = pathThrough(points, frameBelow(line.s, points[0]!), frameBelow(line.t, points[points.length - 1]!));
    edges.push({ edgeIds: line.group.map((g) => g.id), source: line.s, target: line.t, path, labels: line.labels, labelX: 0, labelY: 0, kind: up ? 'back' : 'forward' });
  }
  const leaves = nodes.filter((n) => !isBox(n.type));
  const obstacles: Box[] = leaves.map((n) => ({ x: n.x - 3, y: n.y - 3, w: n.w + 6, h: n.h + 6 + (invokeText(n.id) ? INVOKE_H : 0) }));
  // Compound names sit in the top band of their box.
  for (const n of nodes.filter((n) => isBox(n.type))) obstacles.push({ x: n.x, y: n.y, w: textWidth(n.label, 11) + 16, h: 22 });
  for (const line of lines.filter((l) => l.s === l.t)) {
    const n = nodeById.get(line.s)!;
    const x = n.x + n.w;
    const cy = n.y + (isBox(n.type) ? 20 : NODE_H / 2);
    const block = labelBlock(line.labels);
    const label = { x: x + LOOP_W + 4, y: cy - block.h / 2, ...block };
    obstacles.push(label);
    edges.push({
      edgeIds: line.group.map((g) => g.id),
      source: line.s,
      target: line.s,
      path: `M ${x} ${cy - 9} C ${x + LOOP_W} ${cy - 30} ${x + LOOP_W} ${cy + 30} ${x} ${cy + 9}`,
      labels: line.labels,
      labelX: label.x,
      labelY: label.y,
      kind: 'self',
    });
  }
  const loose = edges.filter((e) => e.kind !== 'self');
  const spots = placeLabels(loose, obstacles, { x: 0, y: -30, w: out.width!, h: out.height! + 30 });
  loose.forEach((e, i) => {
    e.labelX = spots[i]![0];
    e.labelY = spots[i]![1];
  });

  // Move everything so the drawing (labels included) starts at MARGIN, the first state at TOP.
  const minX = Math.min(...nodes.map((n) => n.x), ...edges.map((e) => e.labelX));
  const minY = Math.min(0, ...edges.map((e) => e.labelY + 30));
  const dx = MARGIN - minX;
  const dy = TOP - minY;
  for (const n of nodes) Object.assign(n, { x: r(n.x + dx), y: r(n.y + dy), w: r(n.w), h: r(n.h) });
  for (const e of edges) Object.assign(e, { path: shiftPath(e.path, dx, dy), labelX: r(e.labelX + dx), labelY: r(e.labelY + dy) });
  const right = Math.max(...nodes.map((n) => n.x + n.w), ...edges.map((e) => e.labelX + labelBlock(e.labels).w));
  const bottom = Math.max(...nodes.map((n) => n.y + n.h + (invokeText(n.id) ? INVOKE_H : 0)), ...edges.map((e) => e.labelY + labelBlock(e.labels).h));
  const first = start ? nodeById.get(start) : undefined;
  return {
    width: Math.ceil(right + MARGIN),
    height: Math.ceil(bottom + MARGIN),
    // Compound states first, so they are drawn behind their children.
    nodes: [...nodes.filter((n) => isBox(n.type)), ...leaves],
    edges,
    initial: first
      ? { x: r(first.x + first.w / 2), y: r(first.y - 24), path: `M ${r(first.x + first.w / 2)} ${r(first.y - 20)} L ${r(first.x + first.w / 2)} ${r(first.y)}` }
      : null,
  };
}

/** ELK's spline sections are a start point and cubic Bézier control points in threes. */
function pathThrough(points: ElkPoint[], lead: ElkPoint | null, tail: ElkPoint | null): string {
  const [first, ...rest] = points;
  let d = lead ? `M ${lead.x} ${lead.y} L ${first!.x} ${first!.y}` : `M ${first!.x} ${first!.y}`;
  if (rest.length % 3 === 0) {
    for (let i = 0; i < rest.length; i += 3) d += ` C ${rest.slice(i, i + 3).map((p) => `${p.x} ${p.y}`).join(' ')}`;
  } else {
    for (const p of rest) d += ` L ${p.x} ${p.y}`;
  }
  return tail ? `${d} L ${tail.x} ${tail.y}` : d;
}

function shiftPath(d: string, dx: number, dy: number): string {
  let n = 0;
  return d.replace(/-?\d+(?:\.\d+)?(?:e-?\d+)?/g, (v) => String(r(Number(v) + (n++ % 2 === 0 ? dx : dy))));
}

function r(n: number): number {
  return Math.round(n * 10) / 10;
}
