// A start on a Node older than the supported 22/24 LTS prints one warning line and still starts;
// doctor's node check warns for exactly the versions serve warns about, saying what it should be.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runDoctor } from '../../src/cli/doctor.js';
import { checkNode } from '../../src/cli/doctor-setup-checks.js';
import { nodeVersionWarning } from '../../src/service/node-version.js';

const root = join(import.meta.dirname, '..', '..');

describe('the Node version warning', () => {
  it('warns on Node 20 and older, never on 22, 24 or later', () => {
    expect(nodeVersionWarning('v20.20.2')).toMatch(/^ccweb-gitea: warning: running on Node v20\.20\.2, older than the supported Node 22 and 24 LTS/);
    expect(nodeVersionWarning('v18.0.0')).not.toBeNull();
    expect(nodeVersionWarning('v21.7.3')).not.toBeNull();
    for (const v of ['v22.0.0', 'v22.23.5', 'v24.22.3', 'v26.1.0']) expect(nodeVersionWarning(v)).toBeNull();
    expect(nodeVersionWarning('v20.20.2')!.split('\n')).toHaveLength(1);
  });

  it('serve prints it exactly once, before its own answer, on the Node running it', () => {
    // No configuration: serve stops with exit 78 after the warning (if any), which is all this needs.
    const r = spawnSync(process.execPath, [join(root, 'bin', 'ccweb-gitea.js'), 'serve'], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: '/nonexistent' }, cwd: root });
    const warnings = r.stderr.split('\n').filter((l) => l.includes('older than the supported'));
    expect(warnings).toHaveLength(Number(process.versions.node.split('.')[0]) < 22 ? 1 : 0);
    expect(r.status).toBe(78);
  });
});

describe("doctor's node check", () => {
  it('warns exactly where serve warns (it still starts), naming the supported versions and what to install', () => {
    for (const v of ['v18.0.0', 'v20.20.2', 'v21.7.3', 'v22.0.0', 'v24.22.3', 'v26.1.0']) {
      const r = checkNode(v);
      expect(r.status, v).toBe(nodeVersionWarning(v) === null ? 'ok' : 'warn');
      expect(r.detail).toContain(`running on Node ${v}`);
      expect(r.detail).toContain('Node 22 and 24 LTS');
    }
    expect(checkNode('v20.20.2')).toMatchObject({ status: 'warn', fix: expect.stringContaining('install Node 24 LTS') });
  });

  it('is part of every doctor run, on the Node running it, configured or not', async () => {
    const results = await runDoctor({ env: { PATH: process.env.PATH, HOME: '/nonexistent' }, cwd: root });
    const node = results.find((r) => r.check === 'node');
    expect(node).toMatchObject({ status: nodeVersionWarning(process.version) === null ? 'ok' : 'warn', detail: expect.stringContaining(process.version) });
  });
});
