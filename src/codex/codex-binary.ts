// Locates the app-server binary bundled with `@openai/codex`.
//
// `node_modules/.bin/codex` is a Node wrapper that spawns the native binary as a child (on Node 20 it
// cannot `execve`): a SIGKILL sent to the wrapper would orphan the real app-server. So the native
// binary from the platform package is preferred; the wrapper is the fallback.
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const PLATFORM_PACKAGES: Record<string, { pkg: string; triple: string }> = {
  'linux-x64': { pkg: '@openai/codex-linux-x64', triple: 'x86_64-unknown-linux-musl' },
  'linux-arm64': { pkg: '@openai/codex-linux-arm64', triple: 'aarch64-unknown-linux-musl' },
  'darwin-x64': { pkg: '@openai/codex-darwin-x64', triple: 'x86_64-apple-darwin' },
  'darwin-arm64': { pkg: '@openai/codex-darwin-arm64', triple: 'aarch64-apple-darwin' },
};

export interface CodexCommand {
  /** Executable path. */
  command: string;
  /** Extra environment the npm wrapper would have set. */
  env: Record<string, string>;
  /** `native` (platform binary) or `wrapper` (`bin/codex.js`). */
  kind: 'native' | 'wrapper';
}

let cached: CodexCommand | null = null;

export function resolveBundledCodex(): CodexCommand {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const codexPkgJson = require.resolve('@openai/codex/package.json');
  const codexRoot = realpathSync(dirname(codexPkgJson));
  const env = { CODEX_MANAGED_BY_NPM: '1', CODEX_MANAGED_PACKAGE_ROOT: codexRoot };
  const platform = PLATFORM_PACKAGES[`${process.platform}-${process.arch}`];
  if (platform) {
    try {
      const fromCodex = createRequire(codexPkgJson);
      const platformRoot = dirname(fromCodex.resolve(`${platform.pkg}/package.json`));
      const native = join(platformRoot, 'vendor', platform.triple, 'bin', 'codex');
      if (existsSync(native)) return (cached = { command: native, env, kind: 'native' });
    } catch {
      /* fall through to the wrapper */
    }
  }
  return (cached = { command: join(codexRoot, 'bin', 'codex.js'), env, kind: 'wrapper' });
}
