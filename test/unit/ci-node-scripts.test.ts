// The two scripts CI's second Node run relies on (scripts/install-node.mjs, scripts/vitest-summary.mjs),
// run as CI runs them: as processes. Offline only; fetching a real Node build is CI's own job.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = mkdtempSync(join(tmpdir(), 'ccweb-ci-node-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function run(script: string, args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [join('scripts', script), ...args], {
    encoding: 'utf8',
    // A registry nobody listens on: should a check fail open, the script errors fast instead of downloading.
    env: { ...process.env, npm_config_registry: 'http://127.0.0.1:9/', npm_config_fetch_retries: '0', ...env },
    timeout: 30_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('scripts/vitest-summary.mjs', () => {
  const report = (name: string, passed: number, failed: number, pending: number, todo: number) => {
    const file = join(root, name);
    writeFileSync(
      file,
      JSON.stringify({ numPassedTests: passed, numFailedTests: failed, numPendingTests: pending, numTodoTests: todo }),
    );
    return file;
  };

  it('prints one line per run and the total as the last line', () => {
    const a = report('a.json', 10, 1, 2, 1);
    const b = report('b.json', 7, 0, 0, 0);
    const r = run('vitest-summary.mjs', [`node 20=${a}`, `node 24=${b}`]);
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'real gitea-mcp: 0 tests in 0 files',
      'vitest: 10 passed, 1 failed, 3 skipped (node 20)',
      'vitest: 7 passed, 0 failed, 0 skipped (node 24)',
      'vitest: 17 passed, 1 failed, 3 skipped',
    ]);
  });

  it('a run without a report counts as a failure in the total', () => {
    const a = report('c.json', 4, 0, 0, 0);
    const r = run('vitest-summary.mjs', [`node 20=${a}`, `node 24=${join(root, 'missing.json')}`]);
    const lines = r.stdout.trim().split('\n');
    expect(lines[1]).toBe('vitest: 4 passed, 0 failed, 0 skipped (node 20)');
    expect(lines).toContain('vitest: 0 passed, 1 failed, 0 skipped (node 24)');
    expect(lines.at(-1)).toBe('vitest: 4 passed, 1 failed, 0 skipped');
  });

  it('counts the tests tagged with the real gitea-mcp tag (in a describe or test title) once over all runs, with their files', () => {
    const tagged = (name: string, files: Record<string, Array<{ ancestorTitles: string[]; title: string; status: string }>>) => {
      const file = join(root, name);
      const testResults = Object.entries(files).map(([f, tests]) => ({
        name: join(process.cwd(), f),
        assertionResults: tests.map((t) => ({ ...t, fullName: [...t.ancestorTitles, t.title].join(' ') })),
      }));
      writeFileSync(file, JSON.stringify({ numPassedTests: 3, numFailedTests: 0, numPendingTests: 0, numTodoTests: 0, testResults }));
      return file;
    };
    const files = {
      'test/integration/b.test.ts': [
        { ancestorTitles: ['sessions [real gitea-mcp]'], title: 'one', status: 'passed' },
        { ancestorTitles: ['sessions [real gitea-mcp]'], title: 'two', status: 'failed' },
      ],
      'test/e2e/a.e2e.test.ts': [{ ancestorTitles: ['e2e'], title: 'runs a turn [real gitea-mcp]', status: 'passed' }],
      'test/unit/c.test.ts': [{ ancestorTitles: ['pure'], title: 'no binary', status: 'passed' }],
    };
    const r = run('vitest-summary.mjs', [`node 20=${tagged('t20.json', files)}`, `node 24=${tagged('t24.json', files)}`]);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe('real gitea-mcp: 3 tests in 2 files (test/e2e/a.e2e.test.ts, test/integration/b.test.ts)');
    expect(lines.slice(1)).toEqual([
      'vitest: 3 passed, 0 failed, 0 skipped (node 20)',
      'vitest: 3 passed, 0 failed, 0 skipped (node 24)',
      'vitest: 6 passed, 0 failed, 0 skipped',
    ]);
  });

  it('refuses an argument that is not label=file', () => {
    const r = run('vitest-summary.mjs', ['just-a-file.json']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('"just-a-file.json" is not <label>=<report.json>');
  });
});

describe('scripts/install-node.mjs (offline paths)', () => {
  it('rejects a malformed CCWEB_CI_NODE_VERSION with the key and the fix, before any download', () => {
    const r = run('install-node.mjs', [], { CCWEB_CI_NODE_VERSION: '24.x', XDG_CACHE_HOME: join(root, 'cache-bad') });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('CCWEB_CI_NODE_VERSION="24.x" is not a version like');
    expect(r.stderr).toContain('unset it to use the pinned version');
  });

  it('is idempotent: a cached build that reports the wanted version is reused and its bin dir printed', () => {
    // This very node stands in for a cached build: the script only trusts what `<bin>/node --version` says.
    const version = process.version.slice(1);
    const cache = join(root, 'cache-ok');
    const bin = join(cache, 'ccweb-gitea', 'node', version, 'bin');
    mkdirSync(bin, { recursive: true });
    symlinkSync(process.execPath, join(bin, 'node'));
    const r = run('install-node.mjs', [], { CCWEB_CI_NODE_VERSION: version, XDG_CACHE_HOME: cache });
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toBe(bin);
    expect(r.stderr).toContain(`already at v${version}`);
    expect(execFileSync(join(bin, 'node'), ['--version'], { encoding: 'utf8' }).trim()).toBe(process.version);
  });
});
