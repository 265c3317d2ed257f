// Screenshots and measurements of every machine's drawing on the visualizer page, for comparing
// layouts (docs/screenshots/layout/):
//   tsx scripts/layout-screenshots.ts <outDir>
// Starts the operators' API on 127.0.0.1 (test/support/api-harness.ts, a temp store), opens
// /visualizer in real Chromium (CHROMIUM_PATH) at 1280 px wide, and for each machine writes
// <machine>.png (the page as it lands, fitted to the panel; the window is made tall enough to show
// the whole drawing) and one line of measurements to metrics.json: labels over labels or states,
// states over states, labels far from their own line, edges running through a state that is not their end, edge crossings, nested
// states outside their parent, the drawing's size and scale.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { sessionKind } from '../src/sessions/session-actor.js';
import { taskKind } from '../src/tasks/task-actor.js';
import { ADMIN_TOKEN, startApiHarness } from '../test/support/api-harness.js';

const outDir = process.argv[2];
if (!outDir) {
  console.error('usage: tsx scripts/layout-screenshots.ts <outDir>');
  process.exit(2);
}
mkdirSync(resolve(outDir), { recursive: true });

export interface DrawingMetrics {
  machine: string;
  width: number;
  height: number;
  scale: number;
  fitted: boolean;
  states: number;
  edges: number;
  labelOverlaps: string[];
  stateOverlaps: string[];
  edgesThroughStates: string[];
  crossings: number;
  /** Edge labels more than 30 px from their own line: a reader cannot tell which line they name. */
  farLabels: string[];
  outsideParent: string[];
}

const h = await startApiHarness([taskKind(), sessionKind()]);
const browser = await chromium.launch({ executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium', args: ['--no-sandbox', '--headless=new'] });
const all: DrawingMetrics[] = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  // tsx (esbuild) wraps named inner functions in __name(); `measure` runs in the page, which lacks it.
  await page.addInitScript('window.__name = (f) => f');
  await page.goto(`${h.url}/admin`);
  await page.fill('#token', ADMIN_TOKEN);
  await page.fill('#operator', 'screenshots');
  await page.click('#sign-in');
  await page.waitForSelector('#tasks');
  await page.goto(`${h.url}/visualizer`);
  await page.waitForSelector('#chart svg[data-machine]');
  const ids = await page.$$eval('.machines button', (bs) => bs.map((b) => b.getAttribute('data-machine')!));
  for (const id of ids) {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.click(`.machines button[data-machine="${id}"]`);
    await page.waitForSelector(`#chart svg[data-machine="${id}"]`);
    // Tall enough for the whole fitted drawing (the panel's max-height follows the window).
    const svgHeight = await page.$eval('#chart svg', (s) => Number(s.getAttribute('height')));
    await page.setViewportSize({ width: 1280, height: Math.max(800, svgHeight + 220) });
    await page.waitForTimeout(250); // the page re-fits 100 ms after a resize
    const m = await page.$eval('#chart svg', measure, id);
    all.push(m);
    await page.screenshot({ path: join(outDir, `${id}.png`) });
    console.log(`${id}: ${m.width}×${m.height} scale ${m.scale} · label overlaps ${m.labelOverlaps.length} · state overlaps ${m.stateOverlaps.length} · edges through states ${m.edgesThroughStates.length} · crossings ${m.crossings} · labels >30px from their line ${m.farLabels.length} · outside parent ${m.outsideParent.length}`);
  }
  writeFileSync(join(outDir, 'metrics.json'), `${JSON.stringify(all, null, 2)}\n`);
} finally {
  await browser.close();
  await h.close();
}

/** Runs in the page: geometry of the drawn SVG, in screen pixels. */
function measure(root: SVGSVGElement, machine: string): DrawingMetrics {
  const box = (e: Element) => e.getBoundingClientRect();
  const overlap = (a: DOMRect, b: DOMRect, by = 0.5) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > by && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > by;
  const texts = [...root.querySelectorAll('text')].filter((t) => t.textContent?.trim()).map((t) => ({ t: t.textContent!, r: box(t), g: t.closest('g') }));
  const states = [...root.querySelectorAll('g.state')].map((g) => ({ id: g.getAttribute('data-state')!, r: box(g.querySelector('rect')!), g }));
  const compounds = [...root.querySelectorAll('g.compound')].map((g) => ({ id: g.getAttribute('data-state')!, r: box(g.querySelector('rect')!) }));
  const labelOverlaps: string[] = [];
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) if (overlap(texts[i]!.r, texts[j]!.r)) labelOverlaps.push(`"${texts[i]!.t}" × "${texts[j]!.t}"`);
    for (const s of states) if (s.g !== texts[i]!.g && overlap(texts[i]!.r, s.r)) labelOverlaps.push(`"${texts[i]!.t}" × state ${s.id}`);
  }
  const stateOverlaps: string[] = [];
  for (let i = 0; i < states.length; i++) for (let j = i + 1; j < states.length; j++) if (overlap(states[i]!.r, states[j]!.r)) stateOverlaps.push(`${states[i]!.id} × ${states[j]!.id}`);
  // Edges as polylines sampled along their path, in screen pixels.
  const ctm = root.getScreenCTM()!;
  const edges = [...root.querySelectorAll('g.edge')].map((g) => {
    const path = g.querySelector('path') as SVGPathElement;
    const len = path.getTotalLength();
    const n = Math.max(8, Math.ceil(len / 6));
    const pts: [number, number][] = [];
    for (let k = 0; k <= n; k++) {
      const p = path.getPointAtLength((len * k) / n).matrixTransform(ctm);
      pts.push([p.x, p.y]);
    }
    return { source: g.getAttribute('data-source')!, target: g.getAttribute('data-target')!, pts, labels: [...g.querySelectorAll('text')].map((t) => ({ t: t.textContent!, r: box(t) })) };
  });
  const farLabels: string[] = [];
  for (const e of edges) {
    for (const l of e.labels) {
      const d = Math.min(...e.pts.map(([x, y]) => Math.hypot(Math.max(l.r.left - x, 0, x - l.r.right), Math.max(l.r.top - y, 0, y - l.r.bottom))));
      if (d > 30) farLabels.push(`"${l.t}" ${Math.round(d)}px from ${e.source}>${e.target}`);
    }
  }
  const edgesThroughStates: string[] = [];
  for (const e of edges) {
    for (const s of states) {
      if (s.id === e.source || s.id === e.target) continue;
      const inside = e.pts.some(([x, y]) => x > s.r.left + 2 && x < s.r.right - 2 && y > s.r.top + 2 && y < s.r.bottom - 2);
      if (inside) edgesThroughStates.push(`${e.source}>${e.target} through ${s.id}`);
    }
  }
  const cross = (a: [number, number], b: [number, number], c: [number, number], d: [number, number]) => {
    const o = (p: [number, number], q: [number, number], r: [number, number]) => Math.sign((q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]));
    return o(a, b, c) * o(a, b, d) < 0 && o(c, d, a) * o(c, d, b) < 0;
  };
  let crossings = 0;
  for (let i = 0; i < edges.length; i++) {
    for (let j = i + 1; j < edges.length; j++) {
      const A = edges[i]!.pts;
      const B = edges[j]!.pts;
      let found = false;
      for (let p = 0; p + 1 < A.length && !found; p++) for (let q = 0; q + 1 < B.length && !found; q++) if (cross(A[p]!, A[p + 1]!, B[q]!, B[q + 1]!)) found = true;
      if (found) crossings++;
    }
  }
  const outsideParent: string[] = [];
  for (const s of [...states, ...compounds]) {
    const parentId = s.id.includes('.') ? s.id.slice(0, s.id.lastIndexOf('.')) : null;
    const parent = parentId ? compounds.find((c) => c.id === parentId) : undefined;
    if (parentId && (!parent || s.r.left < parent.r.left || s.r.right > parent.r.right || s.r.top < parent.r.top || s.r.bottom > parent.r.bottom)) outsideParent.push(s.id);
  }
  const chart = document.getElementById('chart')!;
  return {
    machine,
    width: Number(root.getAttribute('width')),
    height: Number(root.getAttribute('height')),
    scale: Number(root.dataset['scale']),
    fitted: Number(root.getAttribute('width')) <= chart.clientWidth,
    states: states.length,
    edges: edges.length,
    labelOverlaps,
    stateOverlaps,
    edgesThroughStates,
    crossings,
    farLabels,
    outsideParent,
  };
}
