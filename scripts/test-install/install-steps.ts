// The steps of a guide, taken out of it mechanically: every fenced block whose info string is `sh <tag>`
// or `sh <tag>=<name>`, in order. The tests run them as written (docs/operations.md's install steps in
// test/image/install-steps.e2e.ts, docs/getting-started.md's in test/e2e/getting-started.e2e.test.ts);
// they replace only the named blocks they cannot run, each for a reason they state.
import { readFileSync } from 'node:fs';

export interface InstallStep {
  /** `<tag>=<name>`: a block the test may replace (with a reason), or one it runs on its own; plain steps have none. */
  name: string | null;
  script: string;
  /** 1-based line of the block's fence in the guide, for messages. */
  line: number;
}

/** The blocks of `guide` tagged `tag` (default `install-step`, what both guides mark their steps with). */
export function installSteps(guide: string, tag = 'install-step'): InstallStep[] {
  if (!/^[\w-]+$/.test(tag)) throw new Error(`not a block tag: ${tag}`);
  const steps: InstallStep[] = [];
  const re = new RegExp(`^\`\`\`sh ${tag}(?:=([\\w-]+))?\\n([\\s\\S]*?)^\`\`\`$`, 'gm');
  for (const m of guide.matchAll(re)) {
    steps.push({ name: m[1] ?? null, script: m[2]!, line: guide.slice(0, m.index).split('\n').length });
  }
  return steps;
}

export function installStepsOf(file: string, tag?: string): InstallStep[] {
  return installSteps(readFileSync(file, 'utf8'), tag);
}
