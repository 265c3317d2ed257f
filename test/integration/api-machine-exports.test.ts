import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AnyStateMachine } from 'xstate';
import { machineGraph } from '../../visualizer/graph/machine-graph.js';
import { allMachines, exportName } from '../../visualizer/graph/machine-registry.js';
import { buildExports, writeExports } from '../../visualizer/export-machines.js';

const edgeKey = (e: { source: string; target: string | null; event: string; guard: string | null }) =>
  `${e.source} -${e.event}${e.guard ? `[${e.guard}]` : ''}-> ${e.target ?? '∅'}`;

describe('machine exports (npm run visualize)', () => {
  const machines = allMachines();

  it('covers every machine machines/index.ts exports', async () => {
    expect(machines.map((m) => m.id)).toEqual(expect.arrayContaining(['task', 'repoLock', 'session', 'replyVerifier']));
    expect((await buildExports()).map((e) => e.machineId)).toEqual(machines.map((m) => m.id));
  });

  it('writes <machine>.{stately.ts,mmd,svg}; the Stately code re-creates the same statechart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-viz-'));
    try {
      await writeExports(dir);
      const files = readdirSync(dir).sort();
      for (const m of machines) {
        for (const ext of ['stately.ts', 'mmd', 'svg']) expect(files).toContain(`${exportName(m.id)}.${ext}`);
        // The editor's import is code: evaluate it and compare the machine it builds with the original.
        const mod = (await import(pathToFileURL(join(dir, `${exportName(m.id)}.stately.ts`)).href)) as { machine: AnyStateMachine };
        const original = machineGraph(m);
        const imported = machineGraph(mod.machine);
        expect(imported.nodes.map((n) => [n.id, n.type, n.initial])).toEqual(original.nodes.map((n) => [n.id, n.type, n.initial]));
        expect(imported.edges.map(edgeKey)).toEqual(original.edges.map(edgeKey));
        expect(imported.initial).toBe(original.initial);
        const code = readFileSync(join(dir, `${exportName(m.id)}.stately.ts`), 'utf8');
        expect(code).toContain('createMachine(');
        expect(code).not.toMatch(/=>|function\s*\(/);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the Mermaid diagram has every state and every transition; the SVG every state', async () => {
    for (const e of await buildExports()) {
      const graph = machineGraph(machines.find((m) => m.id === e.machineId)!);
      expect(e.mermaid.startsWith('---\n')).toBe(true);
      expect(e.mermaid).toContain('stateDiagram-v2');
      expect(e.mermaid).toContain(`[*] --> ${graph.initial}`);
      const transitions = e.mermaid.split('\n').filter((l) => / --> /.test(l) && !l.includes('[*]'));
      expect(transitions).toHaveLength(graph.edges.length);
      for (const edge of graph.edges) {
        expect(e.mermaid).toContain(`  ${edge.source} --> ${edge.target ?? edge.source} : `);
      }
      for (const n of graph.nodes) expect(e.svg).toContain(`data-state="${n.id}"`);
      expect(e.svg.match(/<g\b/g)?.length).toBe(e.svg.match(/<\/g>/g)?.length);
      expect(e.svg.trim().endsWith('</svg>')).toBe(true);
    }
  });

  it('the committed exports in visualizer/exports are up to date (run `npm run visualize` after changing a machine)', async () => {
    const dir = join(import.meta.dirname, '../../visualizer/exports');
    for (const e of await buildExports()) {
      for (const [ext, text] of [['stately.ts', e.stately], ['mmd', e.mermaid], ['svg', e.svg]] as const) {
        const file = join(dir, `${e.name}.${ext}`);
        expect(readFileSync(file, 'utf8'), `${file} is stale: run npm run visualize`).toBe(text);
      }
    }
  });
});
