// The install steps of docs/OPERATIONS.md (issue 32) as `npm run test:install` takes them: found, in order,
// and each a valid bash script — a quick guard in `npm test` for what the slow test runs in a fresh Debian.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { installSteps, installStepsOf } from '../../scripts/test-install/install-steps.js';

const guide = join(import.meta.dirname, '..', '..', 'docs', 'OPERATIONS.md');

describe("docs/OPERATIONS.md's install steps", () => {
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
      expect(r.stderr, `docs/OPERATIONS.md:${step.line}`).toBe('');
      expect(r.status).toBe(0);
    }
  });
});
