// The install steps of docs/OPERATIONS.md, taken out of the guide mechanically (issue 32): every fenced
// block whose info string is `sh install-step` or `sh install-step=<name>`, in order. The test runs them as
// written (test/image/install-steps.e2e.ts); it replaces only the named blocks it cannot run here.
import { readFileSync } from 'node:fs';

export interface InstallStep {
  /** `install-step=<name>`: a block the test may replace (with a reason); plain steps have none. */
  name: string | null;
  script: string;
  /** 1-based line of the block's fence in the guide, for messages. */
  line: number;
}

export function installSteps(guide: string): InstallStep[] {
  const steps: InstallStep[] = [];
  const re = /^```sh install-step(?:=([\w-]+))?\n([\s\S]*?)^```$/gm;
  for (const m of guide.matchAll(re)) {
    steps.push({ name: m[1] ?? null, script: m[2]!, line: guide.slice(0, m.index).split('\n').length });
  }
  return steps;
}

export function installStepsOf(file: string): InstallStep[] {
  return installSteps(readFileSync(file, 'utf8'));
}
