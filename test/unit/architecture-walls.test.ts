// The walls between the parts (.dependency-cruiser.mjs), enforced by the suite: dependency-cruiser's
// API cruises src/, machines/ and visualizer/ with those rules and the test lists every crossing; the
// folder walls it cannot state (no folder cycle, the arrows of src/README.md) are computed from the
// same cruise by scripts/folder-walls.mjs, as `npm run lint:walls` does. Small throwaway
// trees that cross each wall on purpose show that every rule still fires — a renamed folder or a
// resolver that stopped following imports would otherwise turn the wall test green for nothing.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterEach, describe, expect, it } from 'vitest';
import { folderWallViolations } from '../../scripts/folder-walls.mjs';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CONFIG = join(repoRoot, '.dependency-cruiser.mjs');

/** `rule: from → to`, and the loop for a cycle: what a reader needs to find and fix the import. */
function describeViolation(v: IViolation): string {
  const cycle = v.cycle?.length ? ` (cycle: ${[v.from, ...v.cycle.map((c) => c.name)].join(' → ')})` : '';
  return `${v.rule.name}: ${v.from} → ${v.to}${cycle}`;
}

/** Cruises `targets` (relative to `baseDir`) with the rules of .dependency-cruiser.mjs, as `npm run lint:walls` does. */
async function cruiseWalls(baseDir: string, targets: string[]): Promise<{ result: ICruiseResult; violations: string[] }> {
  const options = await extractDepcruiseOptions(CONFIG);
  const tsConfigFile = join(baseDir, 'tsconfig.json');
  const { output } = await cruise(
    targets,
    { ...options, baseDir, tsConfig: { fileName: tsConfigFile } },
    {},
    { tsConfig: extractTSConfig(tsConfigFile) },
  );
  if (typeof output === 'string') throw new Error('dependency-cruiser returned a report string, expected the cruise result');
  return { result: output, violations: output.summary.violations.map(describeViolation).sort() };
}

describe('the walls of the repository', () => {
  it('src/, machines/ and visualizer/ cross no wall', async () => {
    const { result, violations } = await cruiseWalls(repoRoot, ['src', 'machines', 'visualizer']);
    // The cruise really walked the tree and followed imports (an empty cruise has no violations either).
    const sources = new Set(result.modules.map((m) => m.source));
    expect(sources).toContain('src/intake/intake.ts');
    expect(sources).toContain('machines/task-lifecycle.ts');
    // visualizer/ itself is cruised, not only the parts src/ imports (the page is imported by no module).
    expect(sources).toContain('visualizer/page/visualizer.js');
    expect(result.summary.totalCruised).toBeGreaterThan(500);
    expect(violations, `walls crossed (each rule says why in .dependency-cruiser.mjs):\n${violations.join('\n')}`).toEqual([]);
    const folders = folderWallViolations(result, readFileSync(join(repoRoot, 'src', 'README.md'), 'utf8'));
    expect(folders, `folder walls crossed (scripts/folder-walls.mjs; the arrows are in src/README.md):\n${folders.join('\n')}`).toEqual([]);
  });
});

describe('each wall fires on a deliberate breach', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** A throwaway tree shaped like the repository: the given files, this repository's packages, a NodeNext tsconfig. */
  function tree(files: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-walls-'));
    dirs.push(dir);
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const compilerOptions = { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, verbatimModuleSyntax: true, noEmit: true };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['src', 'machines', 'visualizer'] }));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return dir;
  }

  async function violationsIn(files: Record<string, string>): Promise<string[]> {
    const dir = tree(files);
    const targets = ['src', 'machines', 'visualizer'].filter((t) => Object.keys(files).some((f) => f.startsWith(`${t}/`)));
    // The tree links this checkout's node_modules, which the resolver follows to its real path; a
    // package is named by its folder (which file of it types resolve to is the package's business).
    const npm = /→ \S*node_modules\/((?:@[^/\s]+\/)?[^/\s]+)\/\S*/;
    return (await cruiseWalls(dir, targets)).violations.map((v) => v.replace(npm, '→ node_modules/$1')).sort();
  }

  /** The folder walls' breaches in a throwaway tree (its file rules must pass), against `readme` as src/README.md. */
  async function folderViolationsIn(files: Record<string, string>, readme: string | null): Promise<string[]> {
    const dir = tree(files);
    const { result, violations } = await cruiseWalls(dir, ['src']);
    expect(violations).toEqual([]);
    return folderWallViolations(result, readme);
  }

  it('machines/ may import xstate and itself, nothing else (no node, no src/, no other package)', async () => {
    const violations = await violationsIn({
      'machines/ok.ts': "import { setup } from 'xstate';\nimport { other } from './other.js';\nexport const m = [setup, other];\n",
      'machines/other.ts': 'export const other = 1;\n',
      'machines/bad.ts':
        "import path from 'node:path';\nimport { z } from 'zod';\nimport type { Thing } from '../src/thing.js';\nexport const bad: [unknown, unknown, Thing | null] = [path, z, null];\n",
      'src/thing.ts': 'export interface Thing { a: number }\n',
    });
    expect(violations).toEqual([
      'machines-only-xstate: machines/bad.ts → node_modules/zod',
      'machines-only-xstate: machines/bad.ts → path',
      'machines-only-xstate: machines/bad.ts → src/thing.ts',
    ]);
  });

  it('src/store/ may import itself, the data directory\'s lock, node builtins and its engines only (not the domain, not another package)', async () => {
    const violations = await violationsIn({
      'src/store/ok.ts':
        "import { randomUUID } from 'node:crypto';\nimport pg from 'pg';\nimport { helper } from './helper.js';\nimport { lock } from '../data-dir/lock.js';\nexport const ok = [randomUUID, pg, helper, lock];\n",
      'src/store/helper.ts': 'export const helper = 1;\n',
      'src/data-dir/lock.ts': 'export const lock = 1;\n',
      'src/store/bad.ts':
        "import { z } from 'zod';\nimport { Low } from 'lowdb';\nimport type { TaskRecord } from '../domain/records.js';\nexport const bad: [unknown, unknown, TaskRecord | null] = [z, Low, null];\n",
      'src/domain/records.ts': 'export interface TaskRecord { taskId: string }\n',
    });
    expect(violations).toEqual([
      'store-only-itself-node-engines: src/store/bad.ts → node_modules/lowdb',
      'store-only-itself-node-engines: src/store/bad.ts → node_modules/zod',
      'store-only-itself-node-engines: src/store/bad.ts → src/domain/records.ts',
    ]);
  });

  it('visualizer/graph/ may import xstate, elkjs, machines/ and itself, nothing else (no node, no src/, no other package)', async () => {
    const violations = await violationsIn({
      'machines/m.ts': "import { setup } from 'xstate';\nexport const m = setup;\n",
      'visualizer/graph/ok.ts':
        "import type { AnyStateMachine } from 'xstate';\nimport type { ELK } from 'elkjs/lib/elk.bundled.js';\nimport { m } from '../../machines/m.js';\nimport { other } from './other.js';\n" +
        'export const ok: [AnyStateMachine | null, ELK | null, unknown, number] = [null, null, m, other];\n' +
        "export const elk = () => import('elkjs/lib/elk.bundled.js');\n",
      'visualizer/graph/other.ts': 'export const other = 1;\n',
      'visualizer/graph/bad.ts':
        "import { createHash } from 'node:crypto';\nimport { z } from 'zod';\nimport type { Store } from '../../src/store/types.js';\n" +
        'export const bad: [unknown, unknown, Store | null] = [createHash, z, null];\n',
      'visualizer/export.ts': "import { createHash } from 'node:crypto';\nimport { ok } from './graph/ok.js';\nexport const fine = [createHash, ok];\n",
      'src/store/types.ts': 'export interface Store { a: number }\n',
    });
    expect(violations).toEqual([
      'visualizer-graph-only-xstate-elkjs-machines: visualizer/graph/bad.ts → crypto',
      'visualizer-graph-only-xstate-elkjs-machines: visualizer/graph/bad.ts → node_modules/zod',
      'visualizer-graph-only-xstate-elkjs-machines: visualizer/graph/bad.ts → src/store/types.ts',
    ]);
  });

  it('neither machines/ nor src/store/ imports the visualizer (type-only imports included)', async () => {
    const violations = await violationsIn({
      'visualizer/graph/g.ts': 'export type G = number;\nexport const g = 1;\n',
      'visualizer/v.ts': 'export const v = 1;\n',
      'machines/bad.ts': "import { g } from '../visualizer/graph/g.js';\nexport const bad = g;\n",
      'src/store/bad.ts': "import type { G } from '../../visualizer/graph/g.js';\nimport { v } from '../../visualizer/v.js';\nexport const bad: [G, number] = [1, v];\n",
      'src/api/ok.ts': "import { v } from '../../visualizer/v.js';\nexport const ok = v;\n",
    });
    expect(violations).toEqual([
      'machines-only-xstate: machines/bad.ts → visualizer/graph/g.ts',
      'nothing-below-imports-visualizer: machines/bad.ts → visualizer/graph/g.ts',
      'nothing-below-imports-visualizer: src/store/bad.ts → visualizer/graph/g.ts',
      'nothing-below-imports-visualizer: src/store/bad.ts → visualizer/v.ts',
      'platform-imports-no-part: src/store/bad.ts → visualizer/graph/g.ts',
      'platform-imports-no-part: src/store/bad.ts → visualizer/v.ts',
      'store-only-itself-node-engines: src/store/bad.ts → visualizer/graph/g.ts',
      'store-only-itself-node-engines: src/store/bad.ts → visualizer/v.ts',
    ]);
  });

  it('the platform (store, runtime, domain, config, gitea, http) imports no part, type-only imports included; its folders import each other', async () => {
    const violations = await violationsIn({
      'src/usage/u.ts': 'export type U = number;\n',
      'src/messages/m.ts': 'export const m = 1;\n',
      'src/main.ts': 'export const main = 1;\n',
      'visualizer/v.ts': 'export const v = 1;\n',
      'src/store/s.ts': 'export const s = 1;\n',
      'src/domain/bad.ts': "import type { U } from '../usage/u.js';\nexport type Bad = U;\n",
      'src/config/bad.ts': "import { m } from '../messages/m.js';\nexport const bad = m;\n",
      'src/gitea/bad.ts': "import { main } from '../main.js';\nexport const bad = main;\n",
      'src/http/bad.ts': "import { v } from '../../visualizer/v.js';\nexport const bad = v;\n",
      'src/runtime/ok.ts': "import { s } from '../store/s.js';\nimport { d } from '../domain/ok.js';\nexport const ok = [s, d];\n",
      'src/domain/ok.ts': "import type { M } from '../../machines/m.js';\nexport const d: M = 1;\n",
      'machines/m.ts': 'export type M = number;\nexport const run = 1;\n',
      'src/runtime/bad.ts': "import { run } from '../../machines/m.js';\nexport const bad = run;\n",
      'src/runtime/both.ts': "import type { M } from '../../machines/m.js';\nimport { run } from '../../machines/m.js';\nexport const both: M = run;\n",
      'src/usage/ok.ts': "import { d } from '../domain/ok.js';\nexport const ok = d;\n",
    });
    expect(violations).toEqual([
      'platform-imports-no-part: src/config/bad.ts → src/messages/m.ts',
      'platform-imports-no-part: src/domain/bad.ts → src/usage/u.ts',
      'platform-imports-no-part: src/gitea/bad.ts → src/main.ts',
      'platform-imports-no-part: src/http/bad.ts → visualizer/v.ts',
      'platform-machines-types-only: src/runtime/bad.ts → machines/m.ts',
      'platform-machines-types-only: src/runtime/both.ts → machines/m.ts',
    ]);
  });

  it('no two folders import each other, directly or through others, from subfolders and by `import type` too; one folder\'s own subfolders may', async () => {
    const violations = await folderViolationsIn(
      {
        'src/a/x.ts': "import type { Y } from '../b/sub/y.js';\nexport type X = Y;\n",
        'src/a/v.ts': 'export const v = 1;\n',
        'src/b/sub/y.ts': 'export type Y = number;\n',
        'src/b/z.ts': "import { w } from '../c/w.js';\nexport const z = w;\n",
        'src/c/w.ts': "import { v } from '../a/v.js';\nexport const w = v;\n",
        'src/d/ok.ts': "import { v } from '../a/v.js';\nexport const ok = v;\n",
        'src/e/p.ts': "import type { Q } from './sub/q.js';\nexport type P = Q;\nexport const p = 1;\n",
        'src/e/sub/q.ts': "import type { p } from '../p.js';\nexport type Q = typeof p;\n",
        'src/f/one.ts': "import type { T } from '../g/two.js';\nexport type One = T;\nexport const one = 1;\n",
        'src/g/two.ts': "import type { one } from '../f/one.js';\nexport type T = typeof one;\n",
      },
      null,
    );
    expect(violations).toEqual([
      'folder-cycle: a/, b/, c/ import each other: a/ → b/ (src/a/x.ts → src/b/sub/y.ts); b/ → c/ (src/b/z.ts → src/c/w.ts); c/ → a/ (src/c/w.ts → src/a/v.ts)',
      'folder-cycle: f/, g/ import each other: f/ → g/ (src/f/one.ts → src/g/two.ts); g/ → f/ (src/g/two.ts → src/f/one.ts)',
    ]);
  });

  it("the arrows src/README.md states hold: 'never imports' and 'imports only' (itself, node and packages aside)", async () => {
    // Made-up folders, so that no rule of .dependency-cruiser.mjs applies: only the map's arrows.
    const readme = [
      '# map',
      '',
      '## Arrows (checked)',
      '',
      'Prose between the lines is not read.',
      '- `ingest/` `hook/` never import `engine/`',
      '- `panel/` imports only `core/`',
      '',
      '## Next',
      '- `engine/` never imports `panel/` (outside the section: not an arrow)',
    ].join('\n');
    const violations = await folderViolationsIn(
      {
        'src/engine/c.ts': "import { d } from '../core/d.js';\nexport const c = d;\n",
        'src/core/d.ts': "import { z } from 'zod';\nexport const d = z;\n",
        'src/disk/s.ts': 'export const s = 1;\n',
        'src/ingest/ok.ts': "import { d } from '../core/d.js';\nexport const ok = d;\n",
        'src/hook/bad.ts': "import type { c } from '../engine/c.js';\nexport type Bad = typeof c;\n",
        'src/panel/ok.ts': "import { d } from '../core/d.js';\nimport { createHash } from 'node:crypto';\nimport { other } from './other.js';\nexport const ok = [d, createHash, other];\n",
        'src/panel/other.ts': 'export const other = 1;\n',
        'src/panel/bad.ts': "import { s } from '../disk/s.js';\nexport const bad = s;\n",
        'src/panel/worse.ts': "import { c } from '../engine/c.js';\nexport const worse = c;\n",
      },
      readme,
    );
    expect(violations).toEqual([
      'readme-arrow: src/README.md:6 (`ingest/` `hook/` never import `engine/`): src/hook/bad.ts → src/engine/c.ts',
      'readme-arrow: src/README.md:7 (`panel/` imports only `core/`): src/panel/bad.ts → src/disk/s.ts',
      'readme-arrow: src/README.md:7 (`panel/` imports only `core/`): src/panel/worse.ts → src/engine/c.ts',
    ]);
    // A line of the section the check cannot read is an error, not an arrow silently skipped; so is a map without the section.
    await expect(folderViolationsIn({ 'src/a/a.ts': 'export const a = 1;\n' }, '## Arrows\n- `a/` should not import `b/`\n')).rejects.toThrow(/cannot read/);
    await expect(folderViolationsIn({ 'src/a/a.ts': 'export const a = 1;\n' }, '# map\n')).rejects.toThrow(/no "## Arrows" section/);
  });

  it('intake (src/intake/, src/webhook/) imports neither Codex/sessions, workspace, scheduler nor executor — type-only imports included', async () => {
    const targets = ['codex/c', 'sessions/s', 'workspace/w', 'scheduler/q', 'executor/e'];
    const files: Record<string, string> = {
      'src/domain/d.ts': 'export const d = 1;\n',
      'src/intake/ok.ts': "import { d } from '../domain/d.js';\nexport const ok = d;\n",
      'src/intake/bad.ts':
        targets.map((t, i) => `import type { T${i} } from '../${t}.js';`).join('\n') +
        `\nexport type Bad = ${targets.map((_, i) => `T${i}`).join(' | ')};\n`,
      'src/webhook/bad.ts': "import { c } from '../codex/c.js';\nexport const bad = c;\n",
    };
    targets.forEach((t, i) => (files[`src/${t}.ts`] = `export type T${i} = number;\nexport const ${t.split('/')[1]} = ${i};\n`));
    const violations = await violationsIn(files);
    expect(violations).toEqual(
      [
        ...targets.map((t) => `intake-not-execution: src/intake/bad.ts → src/${t}.ts`),
        'intake-not-execution: src/webhook/bad.ts → src/codex/c.ts',
      ].sort(),
    );
  });

  it('Codex and sessions never import intake', async () => {
    const violations = await violationsIn({
      'src/intake/i.ts': 'export const i = 1;\n',
      'src/codex/bad.ts': "import { i } from '../intake/i.js';\nexport const bad = i;\n",
      'src/sessions/bad.ts': "import type { i } from '../intake/i.js';\nexport type Bad = typeof i;\n",
    });
    expect(violations).toEqual([
      'codex-not-intake: src/codex/bad.ts → src/intake/i.ts',
      'codex-not-intake: src/sessions/bad.ts → src/intake/i.ts',
    ]);
  });

  it('the API never imports Codex internals (the sessions are its way in)', async () => {
    const violations = await violationsIn({
      'src/codex/c.ts': 'export const c = 1;\n',
      'src/sessions/s.ts': 'export const s = 1;\n',
      'src/api/ok.ts': "import { s } from '../sessions/s.js';\nexport const ok = s;\n",
      'src/api/bad.ts': "import { c } from '../codex/c.js';\nexport const bad = c;\n",
    });
    expect(violations).toEqual(['api-not-codex: src/api/bad.ts → src/codex/c.ts']);
  });

  it('nothing that ships (src/, machines/, visualizer/) imports test/, type-only imports included', async () => {
    const violations = await violationsIn({
      'test/support/sandbox/sandbox-environment.ts': 'export type Env = number;\nexport const start = 1;\n',
      'src/cli/demo.ts': "import { start } from '../../test/support/sandbox/sandbox-environment.js';\nexport const demo = start;\n",
      'machines/bad.ts': "import type { Env } from '../test/support/sandbox/sandbox-environment.js';\nexport type Bad = Env;\n",
      'visualizer/bad.ts': "import { start } from '../test/support/sandbox/sandbox-environment.js';\nexport const bad = start;\n",
    });
    expect(violations).toEqual([
      'machines-only-xstate: machines/bad.ts → test/support/sandbox/sandbox-environment.ts',
      'nothing-ships-test-code: machines/bad.ts → test/support/sandbox/sandbox-environment.ts',
      'nothing-ships-test-code: src/cli/demo.ts → test/support/sandbox/sandbox-environment.ts',
      'nothing-ships-test-code: visualizer/bad.ts → test/support/sandbox/sandbox-environment.ts',
    ]);
  });

  it('src/demo/ is started by the CLI only, and imports none of the service', async () => {
    const violations = await violationsIn({
      'src/demo/sandbox.ts': "import { d } from '../domain/d.js';\nexport const sandbox = d;\n",
      'src/demo/ok.ts': "import { sandbox } from './sandbox.js';\nexport const ok = sandbox;\n",
      'src/domain/d.ts': 'export const d = 1;\n',
      'src/cli/demo.ts': "import { ok } from '../demo/ok.js';\nexport const demo = ok;\n",
      'src/service/bad.ts': "import type { ok } from '../demo/ok.js';\nexport type Bad = typeof ok;\n",
    });
    expect(violations).toEqual([
      'demo-imports-no-part: src/demo/sandbox.ts → src/domain/d.ts',
      'demo-only-under-cli: src/service/bad.ts → src/demo/ok.ts',
    ]);
  });

  it('a cycle of value imports is refused; one closed by an `import type` (erased at run time) is not', async () => {
    const violations = await violationsIn({
      'src/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
      'src/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
      'src/c.ts': "import type { D } from './d.js';\nexport interface C { d: D | null }\nexport const c = 1;\n",
      'src/d.ts': "import { c } from './c.js';\nexport interface D { c: typeof c }\n",
    });
    expect(violations).toEqual([
      'no-runtime-cycle: src/a.ts → src/b.ts (cycle: src/a.ts → src/b.ts → src/a.ts)',
    ]);
  });

  it('an import the cruiser cannot resolve is refused (it would pass every wall unseen)', async () => {
    const violations = await violationsIn({
      'src/intake/bad.ts': "import { gone } from '../sessions/gone.js';\nexport const bad = gone;\n",
    });
    expect(violations).toEqual(['resolvable: src/intake/bad.ts → ../sessions/gone.js']);
  });
});
