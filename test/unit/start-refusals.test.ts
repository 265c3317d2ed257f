// Every refusal of serve is made in one place (src/service/start-refusals.ts), with its exit code
// and the doctor check that fails for it; nothing else in src/ makes an OperatorError, so a new
// refusal cannot bypass the list that test/e2e/doctor-agrees-with-serve.e2e.test.ts walks.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOCTOR_CHECKS } from '../../src/cli/doctor.js';
import { RESTART_CANNOT_CURE } from '../../src/service/operator-error.js';
import { START_REFUSALS } from '../../src/service/start-refusals.js';
import { repoRoot } from '../support/codex-harness.js';

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : /\.(ts|mts|mjs)$/.test(name) ? [path] : [];
  });
}

describe('start refusals', () => {
  it('only start-refusals.ts makes an OperatorError (every refusal of serve is on its list)', () => {
    const makers = sources(join(repoRoot, 'src'))
      .filter((f) => /new OperatorError\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(repoRoot, f));
    expect(makers).toEqual(['src/service/start-refusals.ts']);
  });

  it('each names a doctor check that exists, and an exit code systemd is told about', () => {
    for (const [id, r] of Object.entries(START_REFUSALS)) {
      expect(DOCTOR_CHECKS, id).toContain(r.check);
      // A setup a restart cannot cure is never restarted; only "another instance runs" (75) may be retried.
      if (r.setup && r.exitCode !== 75) expect(RESTART_CANNOT_CURE, id).toContain(r.exitCode);
    }
  });
});
