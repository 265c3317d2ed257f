#!/usr/bin/env node
// The `ccweb-gitea` command. It runs the compiled CLI (dist/src/cli/index.js, from `npm run build`)
// when dist/ is current, which keeps tsx (~35 MB of RSS) out of the process; otherwise the
// TypeScript CLI (src/cli/index.ts) through tsx's ESM loader, so a checkout needs no build step.
//
// dist/ is current when dist/.build-stamp exists and none of the source files it lists is missing
// or modified after the build started (a few hundred stat calls). Without src/ at all (a deployment
// that ships only dist/), dist/ is used as is.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function compiledIsCurrent() {
  if (!existsSync(join(root, 'dist', 'src', 'cli', 'index.js'))) return false;
  if (!existsSync(join(root, 'src', 'cli', 'index.ts'))) return true;
  try {
    const stamp = JSON.parse(readFileSync(join(root, 'dist', '.build-stamp'), 'utf8'));
    if (typeof stamp.startedAtMs !== 'number' || !Array.isArray(stamp.inputs)) return false;
    for (const rel of stamp.inputs) {
      if (statSync(join(root, rel)).mtimeMs > stamp.startedAtMs) return false;
    }
    return true;
  } catch {
    return false; // no stamp, or a listed source is gone
  }
}

let cli;
if (compiledIsCurrent()) {
  cli = await import('../dist/src/cli/index.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import('../src/cli/index.ts');
}
await cli.main(process.argv.slice(2));
