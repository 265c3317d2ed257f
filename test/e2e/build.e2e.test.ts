// The production build (`npm run build`: tsc + scripts/build-copy-assets.mjs) compiles, and the
// compiled service starts and serves its API and pages: what `ccweb-gitea serve` runs when dist/ is
// current. Built into dist-test/ so that a dist/ other tests or the bin may be using is left alone.
// The sandbox Gitea stand-in only lets the compiled service start (it asks GET /api/v1/user); the
// service against a real Gitea: real-gitea.e2e.test.ts.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/codex-harness.js';
import { startSandboxEnvironment, type SandboxEnvironment } from '../../src/demo/sandbox-environment.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';

const BUILD_DIR = 'dist-test';
let env: SandboxEnvironment | undefined;
let proc: ServiceProcess | undefined;
const root = mkdtempSync(join(tmpdir(), 'ccweb-build-'));

afterAll(async () => {
  await proc?.stop();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(join(repoRoot, BUILD_DIR), { recursive: true, force: true });
});

describe('production build', () => {
  it('compiles, and the compiled service starts and answers /healthz, the admin page, the visualizer and the API', async () => {
    const buildEnv = { ...process.env, CCWEB_BUILD_DIR: BUILD_DIR };
    const script = join(repoRoot, 'scripts', 'build-copy-assets.mjs');
    execFileSync(process.execPath, [script, '--clean'], { cwd: repoRoot, env: buildEnv });
    execFileSync(process.execPath, [join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json', '--outDir', BUILD_DIR], { cwd: repoRoot, env: buildEnv });
    execFileSync(process.execPath, [script], { cwd: repoRoot, env: buildEnv });
    // What the compiled code loads beside itself at runtime.
    for (const rel of ['src/mcp-gate/entry.mjs', 'src/api/admin-page/index.html', 'visualizer/page', 'src/codex/protocol/VERSION', '.build-stamp']) {
      expect(existsSync(join(repoRoot, BUILD_DIR, rel)), rel).toBe(true);
    }

    env = await startSandboxEnvironment(root);
    proc = await startServiceProcess({ ...env.env }, { compiled: true, buildDir: BUILD_DIR, timeoutMs: 60_000 });
    expect((await fetch(`${proc.url}/healthz`)).status).toBe(200);
    const admin = await fetch(`${proc.url}/admin`);
    expect([admin.status, (await admin.text()).toLowerCase()]).toEqual([200, expect.stringContaining('<html')]);
    const overview = await fetch(`${proc.url}/api/gitea-workflow/overview`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
    expect(overview.status).toBe(200);
    expect(await overview.json()).toMatchObject({ queued: 0, archivedTasks: 0 });
    // The visualizer: its page (copied asset) and the statecharts with their layouts (visualizer/graph/,
    // compiled beside src/ because the API imports it).
    const visualizer = await fetch(`${proc.url}/visualizer`);
    expect([visualizer.status, (await visualizer.text()).toLowerCase()]).toEqual([200, expect.stringContaining('<html')]);
    const machines = await fetch(`${proc.url}/api/gitea-workflow/machines`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
    expect(machines.status).toBe(200);
    const task = ((await machines.json()) as { machines: Array<{ id: string; layout: { nodes: unknown[]; edges: unknown[] } }> }).machines.find((m) => m.id === 'task');
    expect(task?.layout.nodes.length).toBeGreaterThan(10);
    expect(task?.layout.edges.length).toBeGreaterThan(10);
    // Served from the layouts `npm run visualize` computed (compiled from visualizer/exports/layouts.generated.ts),
    // not laid out by ELK in the service, which warns when it has to.
    expect(existsSync(join(repoRoot, BUILD_DIR, 'visualizer/exports/layouts.generated.js'))).toBe(true);
    expect(proc.lines.filter((l) => l.includes('no precomputed layout'))).toEqual([]);
  }, 120_000);
});
