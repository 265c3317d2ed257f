import type { GraphEdge, MachineGraph } from './graph/machine-graph.js';

/** Mermaid `stateDiagram-v2` of a machine graph (nested states as `state x { … }`). */
export function mermaidDiagram(graph: MachineGraph): string {
  const lines: string[] = ['---', `title: ${graph.id}`, '---', 'stateDiagram-v2'];
  const id = (path: string): string => path.replace(/[^A-Za-z0-9_]/g, '__');
  const children = (parent: string | null) => graph.nodes.filter((n) => n.parent === parent);
  const emit = (parent: string | null, initial: string | null, indent: string): void => {
    if (initial) lines.push(`${indent}[*] --> ${id(initial)}`);
    for (const n of children(parent)) {
      if (n.key !== id(n.id)) lines.push(`${indent}state "${n.key}" as ${id(n.id)}`);
      if (n.type === 'compound' || n.type === 'parallel') {
        lines.push(`${indent}state ${id(n.id)} {`);
        emit(n.id, n.initial, `${indent}  `);
        lines.push(`${indent}}`);
      }
      if (n.type === 'final') lines.push(`${indent}${id(n.id)} --> [*]`);
    }
  };
  emit(null, graph.initial, '  ');
  for (const e of graph.edges) {
    lines.push(`  ${id(e.source)} --> ${id(e.target ?? e.source)} : ${label(e)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Mermaid ends a label at a newline and treats `:` and `;` specially: keep to safe characters. */
function label(e: GraphEdge): string {
  const text = e.guard ? `${e.label} [${e.guard}]` : e.label;
  return (e.target === null ? `${text} (no change)` : text).replace(/[:;#\n\r]/g, ' ').replace(/\s+/g, ' ').trim();
}
