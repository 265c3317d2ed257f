import type { MachineGraph } from './graph/machine-graph.js';
import type { MachineLayout } from './graph/machine-layout.js';

/**
 * A standalone SVG of a machine from its layout: no fonts to fetch, no scripts, styles inline so
 * the file renders the same in a browser, a README and an image viewer.
 */
export function renderSvg(graph: MachineGraph, layout: MachineLayout): string {
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${layout.width}" height="${layout.height}" viewBox="0 0 ${layout.width} ${layout.height}" font-family="ui-sans-serif, system-ui, sans-serif">`,
    `<title>${esc(graph.id)} statechart</title>`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="20" y="28" font-size="16" font-weight="600" fill="#222">${esc(graph.id)}</text>`,
  );
  if (graph.description) out.push(`<text x="20" y="46" font-size="11" fill="#666">${esc(truncate(graph.description, Math.max(40, Math.floor((layout.width - 40) / 5.6))))}</text>`);
  const graphNodes = new Map(graph.nodes.map((n) => [n.id, n]));
  for (const n of layout.nodes.filter((n) => n.type === 'compound' || n.type === 'parallel')) {
    out.push(`<g class="compound" data-state="${esc(n.id)}"><rect x="${n.x}" y="${n.y}" width="${n.w}" height="${n.h}" rx="10" fill="#f7f7fb" stroke="#aab" stroke-dasharray="4 3"/><text x="${n.x + 8}" y="${n.y + 15}" font-size="11" fill="#556">${esc(n.label)}</text></g>`);
  }
  if (layout.initial) {
    out.push(`<circle cx="${layout.initial.x}" cy="${layout.initial.y}" r="5" fill="#333"/>`);
    out.push(`<path d="${layout.initial.path}" stroke="#333" fill="none" stroke-width="1.4" marker-end="url(#arrow)"/>`);
  }
  for (const e of layout.edges) {
    const color = e.kind === 'back' ? '#8a6d3b' : '#555';
    out.push(`<g class="edge" data-source="${esc(e.source)}" data-target="${esc(e.target)}">`);
    out.push(`<path d="${e.path}" stroke="${color}" fill="none" stroke-width="1.2" marker-end="url(#arrow)"/>`);
    e.labels.forEach((label, i) => {
      out.push(`<text x="${r(e.labelX)}" y="${r(e.labelY + 10 + i * 13)}" font-size="10.5" fill="#333" paint-order="stroke" stroke="#fff" stroke-width="3">${esc(label)}</text>`);
    });
    out.push('</g>');
  }
  for (const n of layout.nodes.filter((n) => n.type !== 'compound' && n.type !== 'parallel')) {
    const final = n.type === 'final';
    const invokes = graphNodes.get(n.id)?.invokes ?? [];
    out.push(`<g class="state" data-state="${esc(n.id)}">`);
    out.push(`<rect x="${n.x}" y="${n.y}" width="${n.w}" height="${n.h}" rx="8" fill="${final ? '#eef6ee' : '#eef2fb'}" stroke="${final ? '#4a7f4a' : '#47639e'}" stroke-width="${final ? 2.4 : 1.4}"/>`);
    out.push(`<text x="${r(n.x + n.w / 2)}" y="${r(n.y + n.h / 2 + 4.5)}" font-size="13" text-anchor="middle" fill="#111">${esc(n.label)}</text>`);
    if (invokes.length) {
      out.push(`<text x="${r(n.x + n.w / 2)}" y="${r(n.y + n.h + 12)}" font-size="9.5" text-anchor="middle" fill="#6a4">invoke ${esc(invokes.map((i) => i.src).join(', '))}</text>`);
    }
    out.push('</g>');
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function r(n: number): number {
  return Math.round(n * 10) / 10;
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
