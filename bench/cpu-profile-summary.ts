// Sums a V8 .cpuprofile (`node --cpu-prof`) per function: self and inclusive samples within a time
// window, as markdown tables. Used by bench/profile-webhook.ts.
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Where a frame lives: `src/...:line`, `koa/lib/...:line` for a package, `node:...` for Node's own. */
function location(frame: ProfileNode['callFrame']): string {
  if (frame.url === '') return '';
  let path = frame.url.startsWith('file://') ? fileURLToPath(frame.url) : frame.url;
  const nm = path.lastIndexOf('/node_modules/');
  if (nm !== -1) path = path.slice(nm + '/node_modules/'.length);
  else if (path.startsWith('/')) path = relative(repoRoot, path);
  // tsx hands V8 transformed code without line structure for some files: no line then.
  return frame.lineNumber > 0 ? `${path}:${frame.lineNumber + 1}` : path;
}

function frameKey(frame: ProfileNode['callFrame']): string {
  return `${frame.functionName || '(anonymous)'}\u0000${location(frame)}`;
}

export interface Row {
  name: string;
  where: string;
  self: number;
  total: number;
}

/** Self and inclusive sample counts per function, for samples taken in [from, to]. */
export function summarize(profile: CpuProfile, from: number, to: number): { rows: Row[]; samples: number; idle: number } {
  const parent = new Map<number, number>();
  const byId = new Map<number, ProfileNode>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const rows = new Map<string, Row>();
  const row = (frame: ProfileNode['callFrame']): Row => {
    const key = frameKey(frame);
    let r = rows.get(key);
    if (!r) rows.set(key, (r = { name: frame.functionName || '(anonymous)', where: location(frame), self: 0, total: 0 }));
    return r;
  };
  let t = profile.startTime;
  let samples = 0;
  let idle = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]!;
    if (t < from || t > to) continue;
    const leaf = byId.get(profile.samples[i]!)!;
    samples += 1;
    if (leaf.callFrame.functionName === '(idle)') {
      idle += 1;
      continue;
    }
    row(leaf.callFrame).self += 1;
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      const key = frameKey(frame);
      if (seen.has(key)) continue;
      seen.add(key);
      row(frame).total += 1;
    }
  }
  return { rows: [...rows.values()], samples, idle };
}

export const us = (n: number) => n.toFixed(1);

export function table(title: string, rows: Row[], field: 'self' | 'total', busy: number, perRequest: number, top: number): string[] {
  const sorted = rows
    .filter((r) => !['(root)', '(program)', '(garbage collector)'].includes(r.name) || field === 'self')
    .sort((a, b) => b[field] - a[field])
    .slice(0, top);
  return [
    `${title}`,
    '',
    `| ${field === 'self' ? 'self' : 'inclusive'} % of busy | µs / request | function | where |`,
    '|---:|---:|---|---|',
    ...sorted.map((r) => `| ${((100 * r[field]) / busy).toFixed(1)} | ${us((r[field] / busy) * perRequest)} | \`${r.name}\` | ${r.where} |`),
    '',
  ];
}

