// The demo's options (`npm run demo -- ...`, `ccweb-gitea demo ...`), apart from demo.ts so the CLI can
// check them and answer `--help` without loading the sandbox (src/demo/) that demo.ts starts.
import { parseArgs } from 'node:util';
import type { GiteaKind } from '../demo/choose-gitea.js';
import { UsageError } from './usage-error.js';

export interface DemoOptions {
  once: boolean;
  /** `--gitea real|double`; null: the demo chooses (src/demo/choose-gitea.ts). */
  gitea: GiteaKind | null;
  /** The service's port (0: a free one). */
  port: number;
  giteaPort: number;
  modelPort: number;
  /** Nodes sharing one throwaway PostgreSQL (1: the embedded store, as usual). */
  nodes: number;
}

/** Where each port comes from: the flag, else its environment variable, else a free port. */
export const PORTS = [
  { key: 'port', flag: '--port', env: 'CCWEB_PORT', what: 'the service' },
  { key: 'giteaPort', flag: '--gitea-port', env: 'DEMO_GITEA_PORT', what: 'Gitea' },
  { key: 'modelPort', flag: '--model-port', env: 'DEMO_MODEL_PORT', what: 'the scripted model' },
] as const;

// `ccweb-gitea demo` (src/cli/index.ts) checks and documents the same options.
export const DEMO_ARG_OPTIONS = {
  once: { type: 'boolean' },
  gitea: { type: 'string' },
  port: { type: 'string' },
  'gitea-port': { type: 'string' },
  'model-port': { type: 'string' },
  nodes: { type: 'string' },
} as const;

export function parseDemoArgs(args: readonly string[], env: Readonly<Record<string, string | undefined>>): DemoOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: [...args], options: DEMO_ARG_OPTIONS, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new UsageError(`demo: ${(err as Error).message}`);
  }
  const options: DemoOptions = { once: values['once'] === true, gitea: null, port: 0, giteaPort: 0, modelPort: 0, nodes: 1 };
  const nodes = values['nodes'];
  if (typeof nodes === 'string') {
    if (!/^[1-3]$/.test(nodes.trim())) throw new UsageError(`demo: --nodes must be 1, 2 or 3, got "${nodes}"`);
    options.nodes = Number(nodes);
  }
  const gitea = values['gitea'];
  if (typeof gitea === 'string') {
    if (gitea !== 'real' && gitea !== 'double') throw new UsageError(`demo: --gitea must be real or double, got "${gitea}"`);
    options.gitea = gitea;
  }
  if (options.gitea === 'real' && options.nodes > 1) {
    throw new UsageError('demo: --nodes 2|3 runs on the Gitea double only; leave out --gitea real (or use --gitea double)');
  }
  for (const p of PORTS) {
    const fromFlag = values[p.flag.slice(2)];
    const raw = typeof fromFlag === 'string' ? fromFlag : env[p.env];
    if (raw === undefined || raw.trim() === '') continue;
    const n = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || n > 65535) {
      throw new UsageError(`demo: ${typeof fromFlag === 'string' ? p.flag : p.env} must be a port number from 0 to 65535 (0 picks a free one), got "${raw}"`);
    }
    options[p.key] = n;
  }
  return options;
}
