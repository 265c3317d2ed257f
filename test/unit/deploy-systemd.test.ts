// The systemd unit (deploy/systemd/ccweb-gitea.service): systemd itself accepts it, the guide
// shows it verbatim, its RestartPreventExitStatus= lists exactly the exit codes a restart cannot cure,
// and its ExecStartPre checks only what must stop a start.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOCTOR_CHECKS } from '../../src/cli/doctor.js';
import { RESTART_CANNOT_CURE } from '../../src/service/operator-error.js';

const root = join(import.meta.dirname, '..', '..');
const unit = readFileSync(join(root, 'deploy', 'systemd', 'ccweb-gitea.service'), 'utf8');
const directive = (name: string) => unit.split('\n').filter((l) => l.startsWith(`${name}=`)).map((l) => l.slice(name.length + 1));

function systemdAnalyze(): string | null {
  const r = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? 'systemd-analyze' : null;
}

describe('the systemd unit', () => {
  it('systemd-analyze verify accepts it without a single complaint', () => {
    const analyze = systemdAnalyze();
    // CI machines are Debian with systemd's package (systemd-analyze); where it is missing say so loudly.
    if (!analyze) throw new Error('systemd-analyze is not installed: `apt-get install systemd` (it is needed to verify the unit)');
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-unit-'));
    try {
      // verify checks that each command exists: the unit names the install steps' /usr/local/bin/node,
      // which this machine need not have, so the copy names the node running the test. Nothing else changes.
      const file = join(dir, 'ccweb-gitea.service');
      writeFileSync(file, unit.replaceAll('/usr/local/bin/node', process.execPath));
      const r = spawnSync(analyze, ['verify', file], { encoding: 'utf8' });
      // verify exits 0 on unknown keys and unparsable values ("ignoring"): any output at all is a failure.
      expect(`${r.stdout}${r.stderr}`.trim()).toBe('');
      expect(r.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('RestartPreventExitStatus= lists every exit code a restart cannot cure, and no other', () => {
    const listed = directive('RestartPreventExitStatus').flatMap((v) => v.split(/\s+/)).map(Number);
    expect([...listed].sort((a, b) => a - b)).toEqual([...RESTART_CANNOT_CURE].sort((a, b) => a - b));
    expect(listed).not.toContain(75); // data directory in use: the next try may find it free
    expect(listed).not.toContain(1); // a crash: restart
  });

  it('ExecStartPre checks only the configuration and the directories, never Gitea, Codex or the sandbox', () => {
    const [pre, ...more] = directive('ExecStartPre');
    expect(more).toEqual([]);
    const only = /doctor --only (\S+)/.exec(pre ?? '')?.[1]?.split(',');
    expect(only).toBeDefined();
    for (const check of only!) expect(DOCTOR_CHECKS).toContain(check);
    expect(only!.sort()).toEqual(['config', 'data-dir', 'webhook-secret', 'workspace-root']);
  });

  it('docs/operations.md shows the unit verbatim', () => {
    const guide = readFileSync(join(root, 'docs', 'operations.md'), 'utf8');
    const block = /```ini file=deploy\/systemd\/ccweb-gitea\.service\n([\s\S]*?)```/.exec(guide)?.[1];
    expect(block, 'docs/operations.md needs a fenced block "```ini file=deploy/systemd/ccweb-gitea.service"').toBeDefined();
    expect(block).toBe(unit);
  });

  it('doctor --only runs exactly the checks it names (as ExecStartPre uses it)', () => {
    const r = spawnSync(process.execPath, [join(root, 'bin', 'ccweb-gitea.js'), 'doctor', '--only', 'config,data-dir', '--json'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, HOME: tmpdir() },
      cwd: tmpdir(),
    });
    const checks = r.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { check: string }).check);
    // Without configuration: the config lines, then data-dir skipped as needing it; nothing else.
    expect(new Set(checks)).toEqual(new Set(['config', 'data-dir']));
    expect(r.status).toBe(1);
    const bad = spawnSync(process.execPath, [join(root, 'bin', 'ccweb-gitea.js'), 'doctor', '--only', 'config,gitea-reachable'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--only gitea-reachable: no such check/);
  });
});

