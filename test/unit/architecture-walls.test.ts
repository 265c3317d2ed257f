// The walls between the parts (.dependency-cruiser.mjs), enforced by the suite: dependency-cruiser's
// API cruises src/ and machines/ with those rules and the test lists every crossing. Small throwaway
// trees that cross each wall on purpose show that every rule still fires — a renamed folder or a
// resolver that stopped following imports would otherwise turn the wall test green for nothing.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterEach, describe, expect, it } from 'vitest';

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
  it('src/ and machines/ cross no wall', async () => {
    const { result, violations } = await cruiseWalls(repoRoot, ['src', 'machines']);
    // The cruise really walked the tree and followed imports (an empty cruise has no violations either).
    const sources = new Set(result.modules.map((m) => m.source));
    expect(sources).toContain('src/intake/accept-comment.ts');
    expect(sources).toContain('machines/task-lifecycle.ts');
    expect(result.summary.totalCruised).toBeGreaterThan(500);
    expect(violations, `walls crossed (each rule says why in .dependency-cruiser.mjs):\n${violations.join('\n')}`).toEqual([]);
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
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['src', 'machines'] }));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return dir;
  }

  async function violationsIn(files: Record<string, string>): Promise<string[]> {
    const dir = tree(files);
    const targets = ['src', 'machines'].filter((t) => Object.keys(files).some((f) => f.startsWith(`${t}/`)));
    // The tree links this checkout's node_modules, which the resolver follows to its real path; a
    // package is named by its folder (which file of it types resolve to is the package's business).
    const npm = /→ \S*node_modules\/((?:@[^/\s]+\/)?[^/\s]+)\/\S*/;
    return (await cruiseWalls(dir, targets)).violations.map((v) => v.replace(npm, '→ node_modules/$1')).sort();
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

  it('src/store/ may import itself, node builtins and lowdb only (not the domain, not another package)', async () => {
    const violations = await violationsIn({
      'src/store/ok.ts':
        "import { randomUUID } from 'node:crypto';\nimport { Low } from 'lowdb';\nimport { helper } from './helper.js';\nexport const ok = [randomUUID, Low, helper];\n",
      'src/store/helper.ts': 'export const helper = 1;\n',
      'src/store/bad.ts':
        "import { z } from 'zod';\nimport type { TaskRecord } from '../domain/records.js';\nexport const bad: [unknown, TaskRecord | null] = [z, null];\n",
      'src/domain/records.ts': 'export interface TaskRecord { taskId: string }\n',
    });
    expect(violations).toEqual([
      'store-only-itself-node-lowdb: src/store/bad.ts → node_modules/zod',
      'store-only-itself-node-lowdb: src/store/bad.ts → src/domain/records.ts',
    ]);
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
