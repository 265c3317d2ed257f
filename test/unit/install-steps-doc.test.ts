// The install steps of docs/operations.md as `npm run test:install` takes them: found, in order,
// and each a valid bash script — a quick guard in `npm test` for what the slow test runs in a fresh Debian.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { installSteps, installStepsOf } from '../../scripts/test-install/install-steps.js';

const guide = join(import.meta.dirname, '..', '..', 'docs', 'operations.md');

describe("docs/operations.md's install steps", () => {
  it('are found mechanically, with only the three the slow test replaces named', () => {
    const steps = installStepsOf(guide);
    expect(steps.length).toBeGreaterThanOrEqual(7);
    expect(steps.map((s) => s.name).filter(Boolean)).toEqual(['go', 'login', 'systemd']);
    // The order a fresh server needs: Node before the clone, the clone before gitea-mcp, the check last but systemd.
    const at = (re: RegExp) => steps.findIndex((s) => re.test(s.script));
    expect(at(/node --version/)).toBeLessThan(at(/git clone/));
    expect(at(/git clone/)).toBeLessThan(at(/install-gitea-mcp\.mjs/));
    expect(at(/ccweb-gitea doctor/)).toBe(steps.length - 2);
    expect(installSteps('```sh install-step=x\necho hi\n```\n```sh\nnot a step\n```\n')).toEqual([{ name: 'x', script: 'echo hi\n', line: 1 }]);
  });

  it('each parses as bash', () => {
    for (const step of installStepsOf(guide)) {
      const r = spawnSync('bash', ['-n'], { input: step.script, encoding: 'utf8' });
      expect(r.stderr, `docs/operations.md:${step.line}`).toBe('');
      expect(r.status).toBe(0);
    }
  });
});

// docs/getting-started.md's steps as test/e2e/getting-started.e2e.test.ts takes them: the same quick guard.
const gettingStarted = join(import.meta.dirname, '..', '..', 'docs', 'getting-started.md');

describe("docs/getting-started.md's steps", () => {
  it('are found mechanically, in at most ten numbered steps, with only the two the e2e test replaces named', () => {
    const steps = installStepsOf(gettingStarted);
    expect(steps.map((s) => s.name).filter(Boolean)).toEqual(['clone', 'login']);
    const numbered = [...readFileSync(gettingStarted, 'utf8').matchAll(/^## (\d+)\. /gm)].map((m) => Number(m[1]));
    expect(numbered).toEqual(numbered.map((_, i) => i + 1));
    expect(numbered.length).toBeLessThanOrEqual(10);
    expect(installStepsOf(gettingStarted, 'install-alternative').map((s) => s.name)).toEqual(['system-webhook']);
  });

  it('each parses as bash', () => {
    for (const step of [...installStepsOf(gettingStarted), ...installStepsOf(gettingStarted, 'install-alternative')]) {
      const r = spawnSync('bash', ['-n'], { input: step.script, encoding: 'utf8' });
      expect(r.stderr, `docs/getting-started.md:${step.line}`).toBe('');
      expect(r.status).toBe(0);
    }
  });
});
