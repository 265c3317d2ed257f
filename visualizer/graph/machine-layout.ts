import type { GraphEdge, MachineGraph } from './machine-graph.js';

/**
 * A layered drawing of a statechart (the Sugiyama recipe, kept small), computed on the server so
 * the visualizer page and the SVG export draw the same picture with no layout library and no
 * browser: cycles are broken by reversing the edges that close them, states get the longest-path
 * layer, edges spanning several layers run through invisible waypoints so they bend around states,
 * a few barycenter sweeps reduce crossings, and labels are placed where they collide with nothing.
 * Compound states are drawn as boxes around their children.
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
const CHAR_W = 7.4;
const NODE_PAD = 26;
const GAP_X = 44;
const DUMMY_W = 14;
const GAP_Y = 96;
const MARGIN = 40;
const TOP = 84;
const LABEL_LINE = 13;
/** Edge labels are drawn at this size (visualizer page and SVG export). */
const LABEL_FONT = 10.5;

interface Item {
  id: string;
  w: number;
  dummy: boolean;
  layer: number;
  x: number;
}

interface Chain {
  key: string;
  s: string;
  t: string;
  group: GraphEdge[];
  reversed: boolean;
  /** Item ids from the upper end to the lower end, dummies included. */
  items: string[];
}

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export function layoutMachine(graph: MachineGraph): MachineLayout {
  const leaves = graph.nodes.filter((n) => n.type !== 'compound' && n.type !== 'parallel');
  const leafIds = new Set(leaves.map((n) => n.id));
  const firstLeaf = (id: string): string => {
    let cur = id;
    for (let i = 0; i < 32 && !leafIds.has(cur); i++) {
      const node = graph.nodes.find((n) => n.id === cur);
      const next = node?.initial ?? graph.nodes.find((n) => n.parent === cur)?.id;
      if (!next) break;
      cur = next;
    }
    return cur;
  };
  const groups = new Map<string, { s: string; t: string; group: GraphEdge[] }>();
  for (const e of graph.edges) {
    if (e.target === null) continue;
    const s = firstLeaf(e.source);
    const t = firstLeaf(e.target);
    if (!leafIds.has(s) || !leafIds.has(t)) continue;
    const key = `${s}>${t}`;
    const g = groups.get(key) ?? { s, t, group: [] };
    g.group.push(e);
    groups.set(key, g);
  }
  const start = graph.initial ? firstLeaf(graph.initial) : leaves[0]?.id;

  // Break cycles: an edge closing a cycle in a depth-first walk (document order) is reversed.
  const out = new Map<string, string[]>();
  for (const { s, t } of groups.values()) if (s !== t) out.set(s, [...(out.get(s) ?? []), t]);
  const back = new Set<string>();
  const seen = new Map<string, 'open' | 'done'>();
  const dfs = (id: string): void => {
    seen.set(id, 'open');
    for (const t of out.get(id) ?? []) {
      if (seen.get(t) === 'open') back.add(`${id}>${t}`);
      else if (!seen.has(t)) dfs(t);
    }
    seen.set(id, 'done');
  };
  if (start) dfs(start);
  for (const n of leaves) if (!seen.has(n.id)) dfs(n.id);

  const layer = new Map<string, number>(leaves.map((n) => [n.id, 0]));
  const down = [...groups.values()]
    .filter(({ s, t }) => s !== t)
    .map(({ s, t }) => (back.has(`${s}>${t}`) ? [t, s] : [s, t]) as [string, string]);
  for (let changed = true, n = 0; changed && n <= leaves.length; n++) {
    changed = false;
    for (const [u, v] of down) {
      if (layer.get(v)! < layer.get(u)! + 1) {
        layer.set(v, layer.get(u)! + 1);
        changed = true;
      }
    }
  }

  const items = new Map<string, Item>();
  for (const n of leaves) {
    items.set(n.id, { id: n.id, w: Math.max(90, n.key.length * CHAR_W + NODE_PAD), dummy: false, layer: layer.get(n.id)!, x: 0 });
  }
  // One chain of waypoints per (source, target) pair, so opposite directions get separate routes.
  const chains: Chain[] = [];
  for (const [key, { s, t, group }] of groups) {
    if (s === t) continue;
    const reversed = back.has(key);
    const [u, v] = reversed ? [t, s] : [s, t];
    const chain: Chain = { key, s, t, group, reversed, items: [u] };
    for (let l = layer.get(u)! + 1; l < layer.get(v)!; l++) {
      const id = `~${key}~${l}`;
      items.set(id, { id, w: DUMMY_W, dummy: true, layer: l, x: 0 });
      chain.items.push(id);
    }
    chain.items.push(v);
    chains.push(chain);
  }

  const layerCount = Math.max(0, ...[...items.values()].map((i) => i.layer)) + 1;
  const rows: string[][] = Array.from({ length: layerCount }, () => []);
  for (const item of items.values()) rows[item.layer]!.push(item.id);
  const up = new Map<string, string[]>();
  const below = new Map<string, string[]>();
  for (const c of chains) {
    for (let i = 0; i + 1 < c.items.length; i++) {
      const a = c.items[i]!;
      const b = c.items[i + 1]!;
      below.set(a, [...(below.get(a) ?? []), b]);
      up.set(b, [...(up.get(b) ?? []), a]);
    }
  }

  // Crossing reduction: barycenter sweeps, down then up.
  const rank = new Map<string, number>();
  const reindex = (): void => rows.forEach((r) => r.forEach((id, i) => rank.set(id, i)));
  reindex();
  for (let sweep = 0; sweep < 8; sweep++) {
    const downward = sweep % 2 === 0;
    for (let k = 1; k < layerCount; k++) {
      const li = downward ? k : layerCount - 1 - k;
      const row = rows[li]!;
      const bary = new Map<string, number>();
      for (const id of row) {
        const near = (downward ? up : below).get(id) ?? [];
        bary.set(id, near.length ? near.reduce((a, n) => a + rank.get(n)!, 0) / near.length : rank.get(id)!);
      }
      row.sort((a, b) => bary.get(a)! - bary.get(b)!);
      reindex();
    }
  }

  // Coordinates: pack each row, then pull every item towards its neighbours, keeping order and gaps.
  const gap = (a: Item, b: Item): number => (a.dummy || b.dummy ? 18 : GAP_X);
  for (const row of rows) {
    let x = 0;
    row.forEach((id, i) => {
      const item = items.get(id)!;
      if (i > 0) x += gap(items.get(row[i - 1]!)!, item);
      item.x = x;
      x += item.w;
    });
  }
  const center = (id: string): number => items.get(id)!.x + items.get(id)!.w / 2;
  for (let pass = 0; pass < 12; pass++) {
    const downward = pass % 2 === 0;
    for (let k = 0; k < layerCount; k++) {
      const row = rows[downward ? k : layerCount - 1 - k]!;
      const desired = row.map((id) => {
        const near = (downward ? up : below).get(id) ?? [];
        const item = items.get(id)!;
        return near.length ? near.reduce((a, n) => a + center(n), 0) / near.length - item.w / 2 : item.x;
      });
      const placed = placeRow(desired, row.map((id) => items.get(id)!.w), row.map((id, i) => (i ? gap(items.get(row[i - 1]!)!, items.get(id)!) : 0)));
      row.forEach((id, i) => (items.get(id)!.x = placed[i]!));
    }
  }
  const minX = Math.min(...[...items.values()].map((i) => i.x));
  for (const item of items.values()) item.x += MARGIN - minX;
  const first = draw(graph, start, leaves, items, chains, groups, layerCount);
  // Labels may stick out on the left: shift everything right and draw again.
  const overflow = Math.min(...first.placed.map((b) => b.x)) - MARGIN / 2;
  if (overflow >= 0) return first.layout;
  for (const item of items.values()) item.x -= overflow;
  return draw(graph, start, leaves, items, chains, groups, layerCount).layout;
}

function draw(
  graph: MachineGraph,
  start: string | undefined,
  leaves: MachineGraph['nodes'],
  items: Map<string, Item>,
  chains: Chain[],
  groups: Map<string, { s: string; t: string; group: GraphEdge[] }>,
  layerCount: number,
): { layout: MachineLayout; placed: Box[] } {
  const center = (id: string): number => items.get(id)!.x + items.get(id)!.w / 2;

  const y = (l: number): number => TOP + l * (NODE_H + GAP_Y);
  const nodes = new Map<string, LayoutNode>();
  for (const n of leaves) {
    const item = items.get(n.id)!;
    nodes.set(n.id, { id: n.id, label: n.key, type: n.type, x: r(item.x), y: y(item.layer), w: r(item.w), h: NODE_H });
  }

  // Ports: the edges leaving (or entering) one side of a state are spread along that side.
  const ports = new Map<string, { key: string; toward: number }[]>();
  const addPort = (node: string, side: 'top' | 'bottom', key: string, toward: number): void => {
    const list = ports.get(`${node}|${side}`) ?? [];
    list.push({ key, toward });
    ports.set(`${node}|${side}`, list);
  };
  for (const c of chains) {
    const upper = c.items[0]!;
    const lower = c.items[c.items.length - 1]!;
    addPort(upper, 'bottom', c.key, center(c.items[1]!));
    addPort(lower, 'top', c.key, center(c.items[c.items.length - 2]!));
  }
  const portX = (node: string, side: 'top' | 'bottom', key: string): number => {
    const list = [...(ports.get(`${node}|${side}`) ?? [])].sort((a, b) => a.toward - b.toward);
    const n = nodes.get(node)!;
    const i = list.findIndex((p) => p.key === key);
    if (list.length <= 1) return n.x + n.w / 2;
    const span = Math.min(n.w * 0.7, list.length * 14);
    return n.x + n.w / 2 - span / 2 + (span * i) / (list.length - 1);
  };

  const obstacles: Box[] = [...nodes.values()].map((n) => ({ x: n.x - 2, y: n.y - 2, w: n.w + 4, h: n.h + 4 }));
  // The `invoke …` line drawn under a state (9.5 px text) is in the way of labels too.
  for (const g of leaves) {
    const n = nodes.get(g.id);
    if (!n || !g.invokes.length) continue;
    const w = textWidth(`invoke ${g.invokes.map((i) => i.src).join(', ')}`, 9.5);
    obstacles.push({ x: n.x + n.w / 2 - w / 2 - 2, y: n.y + n.h + 1, w: w + 4, h: 15 });
  }
  const placed: Box[] = [];
  const edges: LayoutEdge[] = [];
  for (const c of chains) {
    const points: [number, number][] = c.items.map((id, i) => {
      if (i === 0) return [portX(id, 'bottom', c.key), y(items.get(id)!.layer) + NODE_H];
      if (i === c.items.length - 1) return [portX(id, 'top', c.key), y(items.get(id)!.layer)];
      return [center(id), y(items.get(id)!.layer) + NODE_H / 2];
    });
    if (c.reversed) points.reverse();
    const labels = c.group.map(labelOf);
    const label = placeLabel(points, labels, obstacles, placed);
    edges.push({
      edgeIds: c.group.map((e) => e.id),
      source: c.s,
      target: c.t,
      path: smoothPath(points),
      labels,
      labelX: r(label.x),
      labelY: r(label.y),
      kind: c.reversed ? 'back' : 'forward',
    });
  }
  for (const [key, { s, group }] of groups) {
    if (group[0] === undefined || key !== `${s}>${s}`) continue;
    const n = nodes.get(s)!;
    const x = n.x + n.w;
    const cy = n.y + n.h / 2;
    const labels = group.map(labelOf);
    const box = { x: x + 30, y: cy - (labels.length * LABEL_LINE) / 2, w: labelWidth(labels), h: labels.length * LABEL_LINE };
    placed.push(box);
    edges.push({
      edgeIds: group.map((e) => e.id),
      source: s,
      target: s,
      path: `M ${r(x)} ${r(cy - 9)} C ${r(x + 34)} ${r(cy - 30)} ${r(x + 34)} ${r(cy + 30)} ${r(x)} ${r(cy + 9)}`,
      labels,
      labelX: r(box.x),
      labelY: r(box.y),
      kind: 'self',
    });
  }

  // Compound states: boxes around their descendants (listed first, so drawn behind them).
  const boxes: LayoutNode[] = [];
  for (const c of graph.nodes.filter((n) => n.type === 'compound' || n.type === 'parallel')) {
    const inside = [...nodes.values()].filter((n) => n.id.startsWith(`${c.id}.`));
    if (!inside.length) continue;
    const x1 = Math.min(...inside.map((n) => n.x)) - 12;
    const y1 = Math.min(...inside.map((n) => n.y)) - 24;
    const x2 = Math.max(...inside.map((n) => n.x + n.w)) + 12;
    const y2 = Math.max(...inside.map((n) => n.y + n.h)) + 12;
    boxes.push({ id: c.id, label: c.key, type: c.type, x: x1, y: y1, w: x2 - x1, h: y2 - y1 });
  }

  const right = Math.max(
    ...[...nodes.values()].map((n) => n.x + n.w),
    ...placed.map((b) => b.x + b.w),
    ...[...items.values()].map((i) => i.x + i.w),
  );
  const bottom = Math.max(y(layerCount - 1) + NODE_H, ...placed.map((b) => b.y + b.h));
  const first = start ? nodes.get(start) : undefined;
  const layout: MachineLayout = {
    width: Math.ceil(right + MARGIN),
    height: Math.ceil(bottom + MARGIN),
    nodes: [...boxes, ...nodes.values()],
    edges,
    initial: first
      ? {
          x: r(first.x + first.w / 2),
          y: first.y - 24,
          path: `M ${r(first.x + first.w / 2)} ${first.y - 20} L ${r(first.x + first.w / 2)} ${first.y}`,
        }
      : null,
  };
  return { layout, placed };
}

/**
 * Positions for one row, in order, each as close as possible (least squares) to its desired x
 * with at least `gaps[i]` between item i-1 and item i: an isotonic regression, solved exactly by
 * pooling adjacent violators, so a crowded row spreads evenly around where its items want to be.
 */
function placeRow(desired: number[], widths: number[], gaps: number[]): number[] {
  const offset: number[] = [];
  let acc = 0;
  desired.forEach((_, i) => {
    if (i > 0) acc += widths[i - 1]! + gaps[i]!;
    offset.push(acc);
  });
  const blocks: { sum: number; n: number }[] = [];
  for (let i = 0; i < desired.length; i++) {
    blocks.push({ sum: desired[i]! - offset[i]!, n: 1 });
    while (blocks.length > 1 && blocks[blocks.length - 2]!.sum / blocks[blocks.length - 2]!.n > blocks[blocks.length - 1]!.sum / blocks[blocks.length - 1]!.n) {
      const last = blocks.pop()!;
      blocks[blocks.length - 1]!.sum += last.sum;
      blocks[blocks.length - 1]!.n += last.n;
    }
  }
  const out: number[] = [];
  for (const b of blocks) for (let k = 0; k < b.n; k++) out.push(b.sum / b.n + offset[out.length]!);
  return out;
}

function labelOf(e: GraphEdge): string {
  return e.guard ? `${e.label} [${e.guard}]` : e.label;
}

function labelWidth(labels: string[]): number {
  return Math.max(0, ...labels.map((l) => textWidth(l, LABEL_FONT))) + 6;
}

/**
 * The width of a line of sans-serif text, per character class (ems of common sans faces, rounded
 * up): event names are mostly capitals, which a flat average under-estimated, so labels that were
 * "placed where they collide with nothing" still overlapped on screen.
 */
export function textWidth(text: string, fontPx: number): number {
  let em = 0;
  for (const ch of text) {
    if (/[A-Z]/.test(ch)) em += ch === 'M' || ch === 'W' ? 0.9 : 0.72;
    else if (/[a-z]/.test(ch)) em += ch === 'm' || ch === 'w' ? 0.85 : /[ijlft]/.test(ch) ? 0.36 : 0.6;
    else if (/[0-9]/.test(ch)) em += 0.64;
    else if (ch === ' ') em += 0.32;
    else if (ch === '_') em += 0.52;
    else em += 0.4;
  }
  return em * fontPx;
}

/** A smooth curve through the points, vertical at each of them (edges run between layers). */
function smoothPath(points: [number, number][]): string {
  const [x0, y0] = points[0]!;
  let d = `M ${r(x0)} ${r(y0)}`;
  for (let i = 1; i < points.length; i++) {
    const [ax, ay] = points[i - 1]!;
    const [bx, by] = points[i]!;
    const dy = (by - ay) / 2;
    d += ` C ${r(ax)} ${r(ay + dy)} ${r(bx)} ${r(by - dy)} ${r(bx)} ${r(by)}`;
  }
  return d;
}

function bezierPoint(a: [number, number], b: [number, number], t: number): [number, number] {
  const dy = (b[1] - a[1]) / 2;
  const u = 1 - t;
  const bx = u * u * u * a[0] + 3 * u * u * t * a[0] + 3 * u * t * t * b[0] + t * t * t * b[0];
  const by = u * u * u * a[1] + 3 * u * u * t * (a[1] + dy) + 3 * u * t * t * (b[1] - dy) + t * t * t * b[1];
  return [bx, by];
}

/** The first spot along the edge (middle segments first) where the label block hits nothing. */
function placeLabel(points: [number, number][], labels: string[], obstacles: Box[], placed: Box[]): { x: number; y: number } {
  const w = labelWidth(labels);
  const h = labels.length * LABEL_LINE;
  const segments = points.slice(1).map((p, i) => [points[i]!, p] as const);
  const mid = (segments.length - 1) / 2;
  const order = segments.map((_, i) => i).sort((a, b) => Math.abs(a - mid) - Math.abs(b - mid));
  const candidates: Box[] = [];
  for (const si of order) {
    const [a, b] = segments[si]!;
    for (const t of [0.5, 0.38, 0.62, 0.27, 0.73, 0.18, 0.82]) {
      const [px, py] = bezierPoint(a, b, t);
      candidates.push({ x: px + 5, y: py - h / 2, w, h }, { x: px - w - 5, y: py - h / 2, w, h });
    }
  }
  const hits = (c: Box): number =>
    [...obstacles, ...placed].reduce((n, o) => n + (c.x < o.x + o.w && o.x < c.x + c.w && c.y < o.y + o.h && o.y < c.y + c.h ? 1 : 0), 0);
  let best = candidates[0]!;
  let bestHits = Infinity;
  for (const c of candidates) {
    const n = hits(c);
    if (n < bestHits) {
      best = c;
      bestHits = n;
      if (n === 0) break;
    }
  }
  placed.push(best);
  return { x: best.x, y: best.y };
}

function r(n: number): number {
  return Math.round(n * 10) / 10;
}
