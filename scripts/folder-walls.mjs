// The walls dependency-cruiser cannot state, computed from its cruise result: no cycle
// between folders (`src/<folder>/`, `machines/`, `visualizer/`; type-only imports count — an
// `import type` ties two folders together as much as a value import), and the arrows src/README.md
// states in its "Arrows" section hold. Used by `npm run lint:walls` (run as a script, after
// depcruise's own rules) and by test/unit/architecture-walls.test.ts (imported), so both fail alike.
import { readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder a cruised module belongs to, as src/README.md names it: `webhook/` for src/webhook/…,
 * `../machines/`, `../visualizer/`; a file directly in src/ (main.ts) is its own node; anything
 * else (node_modules, builtins) is outside the walls (null).
 */
export function folderOf(path) {
  let m = /^src\/([^/]+)\//.exec(path);
  if (m) return `${m[1]}/`;
  if (/^src\/[^/]+$/.test(path)) return path.slice('src/'.length);
  m = /^(machines|visualizer)\//.exec(path);
  return m ? `../${m[1]}/` : null;
}

/**
 * from folder → to folder → the imports that make that arrow (`file → file`), every dependency type
 * included, each folder's own imports left out.
 */
export function folderGraph(modules) {
  const graph = new Map();
  for (const module of modules) {
    const from = folderOf(module.source);
    if (!from) continue;
    for (const dep of module.dependencies) {
      const to = dep.couldNotResolve ? null : folderOf(dep.resolved);
      if (!to || to === from) continue;
      if (!graph.has(from)) graph.set(from, new Map());
      const arrows = graph.get(from);
      if (!arrows.has(to)) arrows.set(to, []);
      arrows.get(to).push(`${module.source} → ${dep.resolved}`);
    }
  }
  return graph;
}

/** The folders that reach each other (strongly connected components of more than one folder), sorted. */
function stronglyConnected(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return components.sort((a, b) => a[0].localeCompare(b[0]));
}

/**
 * One line per group of folders that import each other, directly or through others, with every
 * arrow inside the group and one import that makes it (where a reader starts to cut the loop).
 */
export function folderCycles(graph) {
  return stronglyConnected(graph).map((component) => {
    const inside = new Set(component);
    const arrows = [];
    for (const from of component) {
      for (const [to, imports] of [...(graph.get(from) ?? new Map())].sort(([a], [b]) => a.localeCompare(b))) {
        if (inside.has(to)) arrows.push(`${from} → ${to} (${imports[0]}${imports.length > 1 ? ` and ${imports.length - 1} more` : ''})`);
      }
    }
    return `folder-cycle: ${component.join(', ')} import each other: ${arrows.join('; ')}`;
  });
}

/** The folders a line of the Arrows section names (`intake/`, `../machines/`), in order. */
function namedFolders(text) {
  return [...text.matchAll(/`((?:\.\.\/)?[a-z][a-z0-9-]*\/)`/g)].map((m) => m[1]);
}

/**
 * The arrows src/README.md states, from its "## Arrows" section: each `- ` line is either
 * "<folders> never import(s) <folders>" or "<folders> import(s) only <folders>" (besides
 * themselves, node builtins and npm packages). Anything else in the section is a mistake in the map.
 */
export function readmeArrows(markdown) {
  const section = /^## Arrows\b[^\n]*\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(markdown);
  if (!section) throw new Error('src/README.md has no "## Arrows" section (the arrows the wall test checks)');
  const arrows = [];
  const firstLine = markdown.slice(0, section.index).split('\n').length + 1;
  for (const [i, line] of section[1].split('\n').entries()) {
    if (!line.startsWith('- ')) continue;
    const m = /^- (.*?)\b(never imports?|imports? only)\b(.*)$/.exec(line);
    const from = m ? namedFolders(m[1]) : [];
    const to = m ? namedFolders(m[3]) : [];
    if (!m || from.length === 0 || to.length === 0) {
      throw new Error(`src/README.md, Arrows: cannot read "${line}" (write "- \`a/\` never imports \`b/\`" or "- \`a/\` imports only \`b/\`")`);
    }
    arrows.push({ line: firstLine + i, text: line.slice(2), from, only: m[2].includes('only'), to });
  }
  return arrows;
}

/** Each import that breaks an arrow of the map, as `readme-arrow: src/README.md:<line> (<its words>): <from file> → <to file>`. */
export function arrowBreaches(graph, arrows) {
  const out = [];
  for (const arrow of arrows) {
    for (const from of arrow.from) {
      for (const [to, imports] of graph.get(from) ?? []) {
        const allowed = arrow.only ? arrow.to.includes(to) || arrow.from.includes(to) : !arrow.to.includes(to);
        const words = arrow.text.length > 72 ? `${arrow.text.slice(0, 71)}…` : arrow.text;
        if (!allowed) for (const i of imports) out.push(`readme-arrow: src/README.md:${arrow.line} (${words}): ${i}`);
      }
    }
  }
  return out.sort();
}

/** Every breach of the folder walls in a cruise result, given src/README.md's text (null: no map to check). */
export function folderWallViolations(result, readme) {
  const graph = folderGraph(result.modules);
  return [...folderCycles(graph), ...(readme === null ? [] : arrowBreaches(graph, readmeArrows(readme)))];
}

// As a script (`npm run lint:walls`): cruise as the wall test does, print each breach, fail on any.
// (argv[1] as typed; the module's URL is the real path: compared as real paths, a symlinked checkout runs too.)
if (process.argv[1] && realpathSync(fileURLToPath(import.meta.url)) === realpathSync(process.argv[1])) {
  const { cruise } = await import('dependency-cruiser');
  const { default: extractDepcruiseOptions } = await import('dependency-cruiser/config-utl/extract-depcruise-options');
  const { default: extractTSConfig } = await import('dependency-cruiser/config-utl/extract-ts-config');
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  process.chdir(root);
  const options = await extractDepcruiseOptions(join(root, '.dependency-cruiser.mjs'));
  const tsConfigFile = join(root, 'tsconfig.json');
  const { output } = await cruise(['src', 'machines', 'visualizer'], { ...options, tsConfig: { fileName: tsConfigFile } }, {}, { tsConfig: extractTSConfig(tsConfigFile) });
  const violations = folderWallViolations(output, readFileSync(join(root, 'src', 'README.md'), 'utf8'));
  for (const v of violations) console.error(`  error ${v}`);
  if (violations.length > 0) {
    console.error(`\nx ${violations.length} folder wall(s) crossed (scripts/folder-walls.mjs; the arrows are in src/README.md, "Arrows")`);
    process.exit(1);
  }
  console.log(`✔ no folder cycle; the arrows of src/README.md hold (${output.modules.length} modules)`);
}
