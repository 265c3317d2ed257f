// Shared fixtures for tests that run the real `codex app-server` offline against the scripted model.
import { createHash } from 'node:crypto';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { detectContainment } from '../../src/isolation/agent-containment.js';
import { CodexAppServerConnection, type CodexConnectionEvent, type CodexConnectionOptions } from '../../src/codex/jsonrpc-connection.js';
import { AGENT_SHELL_CONFIG_ARGS, defaultAgentPath } from '../../src/codex/agent-environment.js';
import { resolveBundledCodex } from '../../src/codex/codex-binary.js';
import { createAgentSandbox, type AgentSandbox } from '../../src/isolation/agent-sandbox.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel, type ScriptStep } from '../../src/demo/scripted-model.js';
import { createGiteaRestDouble, startGiteaRestServer, type GiteaRestDouble } from '../../src/demo/gitea-double/rest-api.js';
import { writeStandinFaultCommands, type StandinFaultCommands } from './gitea-mcp-standin/index.js';
import { writeRealGiteaMcpWrapper } from './real-gitea-mcp.js';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const tsxLoaderUrl = pathToFileURL(join(repoRoot, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

/** `node --import tsx <file>` as command + args. */
export function tsNode(file: string): { command: string; args: string[] } {
  return { command: process.execPath, args: ['--import', tsxLoaderUrl, file] };
}

/** Bundles of helper scripts, one folder per checkout (the suite's process check recognises them by it). */
export const BUNDLE_DIR = join(
  tmpdir(),
  `ccweb-codex-bundles-${process.getuid?.() ?? 0}-${createHash('sha256').update(repoRoot).digest('hex').slice(0, 8)}`,
);

const bundles = new Map<string, string>();
/**
 * Bundles a TypeScript entry (and its node_modules imports) into one plain .mjs with esbuild (a tsx
 * dependency), so helper processes start fast and without the tsx loader. (An MCP server orphaned
 * by a SIGKILLed app-server while still inside the tsx loader was seen to hang forever.)
 * Falls back to `node --import tsx` when esbuild is unavailable.
 */
export function nodeScript(entry: string): { command: string; args: string[] } {
  let out = bundles.get(entry);
  if (!out) {
    try {
      const esbuild = createRequire(join(repoRoot, 'node_modules', 'tsx', 'package.json'))('esbuild') as {
        buildSync(o: Record<string, unknown>): unknown;
      };
      // One reusable cache dir; the file name changes with the entry's mtime, written atomically.
      const dir = BUNDLE_DIR;
      mkdirSync(dir, { recursive: true });
      const base = entry.split('/').at(-1)!.replace(/\.ts$/, '');
      out = join(dir, `${base}-${Math.trunc(statSync(entry).mtimeMs)}.mjs`);
      if (!statSync(out, { throwIfNoEntry: false })) {
        const tmpOut = `${out}.${process.pid}.tmp.mjs`;
        esbuild.buildSync({
          entryPoints: [entry],
          bundle: true,
          platform: 'node',
          format: 'esm',
          target: 'node20',
          outfile: tmpOut,
          logLevel: 'silent',
          banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
        });
        renameSync(tmpOut, out);
      }
      bundles.set(entry, out);
    } catch {
      return tsNode(entry);
    }
  }
  return { command: process.execPath, args: [out] };
}

/**
 * The agent sandbox a service with data dir `<root>/data` would use (isolation on, network off):
 * tests of the app-server run the agent's commands under the same profile as production.
 */
export function testAgentSandbox(root: string, codexHome: string): AgentSandbox {
  const sandbox = createAgentSandbox({
    isolation: 'on',
    network: 'off',
    dataDir: join(root, 'data'),
    workspaceRoot: join(root, 'data', 'workspaces'),
    codexHome,
    codexCommand: resolveBundledCodex().command,
  });
  sandbox.prepare();
  return sandbox;
}

export interface CodexFixture {
  root: string;
  /** Pass `agentSandbox.forThread(cwd)` as thread params' `sandbox`; `connect()` already uses its arguments. */
  agentSandbox: AgentSandbox;
  codexHome: string;
  workspace: string;
  model: ScriptedModel;
  /** The REAL gitea-mcp (a wrapper execing it), pointed by the tests at `giteaUrl` with `token`. */
  mcpCommand: string;
  /** The stand-in, only for the start-up faults the real binary cannot show (see gitea-mcp-standin/index.ts). */
  mcpFaults: StandinFaultCommands;
  /** The Gitea REST double the real gitea-mcp talks to: acme/widget with `issues` (default 1, 7, 42). */
  gitea: GiteaRestDouble;
  giteaUrl: string;
  /** The bot's (giteabot's) token on the double. */
  token: string;
  events: CodexConnectionEvent[];
  connect(extra?: Partial<CodexConnectionOptions>): Promise<CodexAppServerConnection>;
  cleanup(): Promise<void>;
}

export async function codexFixture(
  steps: ScriptStep[] = [],
  opts: { token?: string; issues?: number[] } = {},
): Promise<CodexFixture> {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-codex-'));
  const mcpCommand = writeRealGiteaMcpWrapper(join(root, 'bin', 'gitea-mcp'));
  const mcpFaults = writeStandinFaultCommands(join(root, 'bin'));
  const token = opts.token ?? 'tok_ccweb_codex_fixture_7d2c';
  const gitea = createGiteaRestDouble({ token, botLogin: 'giteabot', users: ['alice'] });
  gitea.addRepo('acme', 'widget');
  for (const n of opts.issues ?? [1, 7, 42]) gitea.addIssue('acme', 'widget', { number: n, title: `issue ${n}`, user: 'alice' });
  const giteaServer = await startGiteaRestServer(gitea);
  const codexHome = join(root, 'codex-home');
  const workspace = join(root, 'workspace');
  mkdirSync(workspace, { recursive: true });
  const model = await startScriptedModel(steps);
  writeCodexHome(codexHome, { port: model.port, model: 'fake-model' });
  const conns: CodexAppServerConnection[] = [];
  const events: CodexConnectionEvent[] = [];
  const agentSandbox = testAgentSandbox(root, codexHome);
  return {
    root,
    codexHome,
    workspace,
    model,
    mcpCommand,
    mcpFaults,
    gitea,
    giteaUrl: giteaServer.url,
    token,
    events,
    agentSandbox,
    async connect(extra = {}) {
      const conn = new CodexAppServerConnection({
        cwd: workspace,
        requestTimeoutMs: 30_000,
        // As the service starts it: in a PID namespace that dies with it (src/isolation/agent-containment.ts).
        launcher: containmentLauncherForTests(),
        // The agent's commands run as the service runs them: in the isolation sandbox.
        args: ['app-server', ...AGENT_SHELL_CONFIG_ARGS, ...agentSandbox.appServerArgs()],
        agentPath: agentSandbox.pathWithHelpers(defaultAgentPath()),
        ...extra,
        extraEnv: { CODEX_HOME: codexHome, ...(extra.extraEnv ?? {}) },
      });
      conn.onEvent((e) => events.push(e));
      conns.push(conn);
      await conn.start();
      return conn;
    },
    async cleanup() {
      for (const c of conns) await c.close({ graceMs: 2_000, termMs: 2_000 }).catch(() => undefined);
      await model.close();
      await giteaServer.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export function readJsonLines(file: string): any[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

/** Files under `dir` (recursively) whose bytes contain `needle`. */
export function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && readFileSync(p).includes(needle)) hits.push(p);
    }
  };
  walk(dir);
  return hits;
}

export async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  try {
    return await fn();
  } finally {
    console.log(`[codex timing] ${label}: ${(performance.now() - t0).toFixed(0)} ms`);
  }
}

let containment: string[] | undefined;
/** The service's containment prefix for the app-server (detected once), so tests leave no sandbox behind either. */
export function containmentLauncherForTests(): string[] {
  containment ??= detectContainment().launcher;
  return containment;
}
