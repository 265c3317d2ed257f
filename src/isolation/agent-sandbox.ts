// Where the agent's shell commands run. Comment text, issue bodies and every file of a
// repository are untrusted, so a command the agent runs must reach no credential and no other
// repository. The wall is Codex's own Linux sandbox (bubblewrap + seccomp), driven by a permission
// profile this module writes:
//
// - a private PID namespace (Codex runs bwrap with --unshare-pid and a fresh /proc): the service,
//   the app-server and gitea-mcp — and their environments — are not in the agent's /proc;
// - the filesystem read-only, with the data directory, the workspace root, CODEX_HOME, the config
//   and secret files, the service user's home and the shared temporary directories denied (not even
//   listable); writable only: the task's workspace (its cwd) and a private HOME and TMPDIR for that
//   workspace. Codex keeps `<cwd>/.git` read-only, so the agent cannot plant hooks or config that
//   the service's own git would run later;
// - network off (`CCWEB_AGENT_NETWORK=off`, default): a private network namespace and a seccomp
//   filter that allows only AF_UNIX sockets. `on`: still a private namespace, the outside reached
//   only through Codex's network proxy, which refuses loopback and private addresses — so never the
//   service's own ports (nor a Gitea on the local network);
// - the command environment rebuilt by Codex from a short allow-list (`inherit = "core"`), so not
//   even a variable that slipped into the app-server's environment reaches a command.
//
// The gitea MCP server (with the token) is started by the app-server itself, outside the sandbox.
//
// Facts behind the details (checked against codex 0.171 on Debian 12, see docs/security.md):
// Codex prefers a `bwrap` found on PATH; Debian 12's bubblewrap 0.8 lacks `--argv0`, and Codex's
// fallback then looks for `codex-linux-sandbox` on PATH *inside* the sandbox and fails. So the
// app-server's PATH starts with a directory of ours holding `bwrap` → Codex's bundled bubblewrap.
// A "read" entry below a "deny" entry does not reopen it (a "write" entry does), and a deny entry
// below another deny entry makes bwrap fail: denied paths are reduced to the outermost ones.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { JsonValue } from '../codex/protocol/ts/serde_json/JsonValue.js';
import type { ThreadSandbox } from '../codex/thread-params.js';

/** The permission profile's name in Codex's config (`permissions.<name>`). */
export const AGENT_PROFILE = 'ccweb-agent';

export type OnOff = 'on' | 'off';

export interface AgentSandboxOptions {
  /** `off` runs the agent with Codex's `danger-full-access` (the operator's explicit choice). */
  isolation: OnOff;
  network: OnOff;
  dataDir: string;
  workspaceRoot: string;
  /** CODEX_HOME as the app-server will see it. */
  codexHome: string;
  /** More paths the agent must not read (config file, secret files, operator's list). */
  hiddenPaths?: readonly string[];
  /** The Codex executable the service runs (to find its bundled bubblewrap and keep it readable). */
  codexCommand: string;
  /** The service user's home (default `os.homedir()`); hidden unless it holds the Codex binary. */
  serviceHome?: string;
}

export interface AgentSandbox {
  readonly isolation: OnOff;
  readonly network: OnOff;
  /** `<dataDir>/agent-sandbox`: helper bin dir, per-workspace homes, the probe's directory. */
  readonly stateDir: string;
  /** Creates the helper directory (idempotent). Call before starting the app-server. */
  prepare(): void;
  /**
   * Arguments for `codex app-server`, after agent-environment.ts's AGENT_SHELL_CONFIG_ARGS (which
   * already give commands only Codex's "core" variables): the profile and the proxy feature.
   */
  appServerArgs(): string[];
  /** Prepends the helper directory to a PATH value. */
  pathWithHelpers(path: string | undefined): string;
  /** Params for thread/start and thread/resume of a thread working in `cwd`. */
  forThread(cwd: string): ThreadSandbox;
  /** The private HOME and TMPDIR of the workspace `cwd` (created by forThread). */
  privateDirs(cwd: string): { home: string; tmp: string };
  /** The denied paths as the profile has them (for doctor and the docs). */
  deniedPaths(): string[];
}

/** Codex's bundled bubblewrap next to a native codex binary (`…/vendor/<triple>/codex-resources/bwrap`). */
export function bundledBwrapFor(codexCommand: string): string | null {
  const candidates: string[] = [];
  try {
    const real = realpathSync(codexCommand);
    // native binary: <triple>/bin/codex → <triple>/codex-resources/bwrap
    candidates.push(join(dirname(dirname(real)), 'codex-resources', 'bwrap'));
    // npm wrapper: @openai/codex/bin/codex.js → ../../codex-linux-<arch>/vendor/<triple>/codex-resources/bwrap
    const pkgRoot = dirname(dirname(real));
    const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
    const triple = process.arch === 'arm64' ? 'aarch64-unknown-linux-musl' : 'x86_64-unknown-linux-musl';
    for (const base of [join(pkgRoot, 'node_modules', '@openai'), dirname(pkgRoot)]) {
      candidates.push(join(base, `codex-linux-${arch}`, 'vendor', triple, 'codex-resources', 'bwrap'));
    }
  } catch {
    return null;
  }
  return candidates.find((c) => existsSync(c)) ?? null;
}

function isInside(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function canonical(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

/**
 * The outermost existing paths of `paths`, minus any that would hide one of `mustRead` (the Codex
 * binary: the sandbox re-executes it inside). Sorted for a stable profile.
 */
export function outermostDenied(paths: readonly string[], mustRead: readonly string[]): string[] {
  const existing = [...new Set(paths.map(canonical))].filter((p) => existsSync(p) && p !== sep);
  const kept = existing.filter((p) => !mustRead.some((m) => isInside(m, p)));
  return kept.filter((p) => !kept.some((q) => q !== p && isInside(p, q))).sort();
}

export function createAgentSandbox(options: AgentSandboxOptions): AgentSandbox {
  const stateDir = join(options.dataDir, 'agent-sandbox');
  const binDir = join(stateDir, 'bin');
  const codexReal = canonical(options.codexCommand);
  const bwrap = bundledBwrapFor(options.codexCommand);
  const serviceHome = options.serviceHome ?? homedir();

  const candidates = (): string[] => [
    options.dataDir,
    options.workspaceRoot,
    options.codexHome,
    serviceHome,
    // Shared with every other process of the host (and where tests and tools leave files).
    '/tmp',
    '/var/tmp',
    // Unix sockets of host daemons (docker.sock, …) and container secrets (/run/secrets).
    '/run',
    ...(options.hiddenPaths ?? []),
  ];
  // The bundled bwrap and the codex binary live under the install directory, which stays readable.
  const mustRead = [codexReal, ...(bwrap ? [canonical(bwrap)] : [])];
  // Only existing paths can be denied (bubblewrap mounts over them): the data directory and the workspace
  // root are created first, or a probe run before the store exists would leave them readable whenever no
  // outer candidate (/tmp) covers them.
  const deniedPaths = () => {
    for (const dir of [options.dataDir, options.workspaceRoot]) mkdirSync(dir, { recursive: true, mode: 0o700 });
    return outermostDenied(candidates(), mustRead);
  };

  const privateDirs = (cwd: string) => {
    const key = createHash('sha256').update(canonical(cwd)).digest('hex').slice(0, 16);
    const base = join(stateDir, 'workspaces', key);
    return { home: join(base, 'home'), tmp: join(base, 'tmp') };
  };

  const filesystem = (writable: readonly string[]): { [key: string]: JsonValue } => {
    const fs: { [key: string]: JsonValue } = { ':root': 'read' };
    for (const p of deniedPaths()) fs[p] = 'deny';
    for (const p of writable) fs[p] = 'write';
    // The thread's cwd (Codex keeps its .git read-only).
    fs[':project_roots'] = { '.': 'write' };
    return fs;
  };

  const network = (): { [key: string]: JsonValue } =>
    options.network === 'on' ? { enabled: true, mode: 'full', domains: { '*': 'allow' } } : { enabled: false };

  // Per thread: the workspace's own HOME and TMPDIR (the app-server's, under the data dir, are hidden).
  const envPolicy = (dirs: { home: string; tmp: string }): { [key: string]: JsonValue } => ({
    inherit: 'core',
    set: { HOME: dirs.home, TMPDIR: dirs.tmp, TMP: dirs.tmp, TEMP: dirs.tmp },
  });

  /** TOML inline value for `-c key=value` (JSON strings are valid TOML basic strings). */
  const toml = (v: JsonValue): string => {
    if (v === null) return '""';
    if (typeof v === 'string') return JSON.stringify(v);
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    if (Array.isArray(v)) return `[${v.map(toml).join(',')}]`;
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}=${toml(x as JsonValue)}`)
      .join(',')}}`;
  };

  return {
    isolation: options.isolation,
    network: options.network,
    stateDir,
    prepare() {
      mkdirSync(binDir, { recursive: true, mode: 0o700 });
      mkdirSync(join(stateDir, 'workspaces'), { recursive: true, mode: 0o700 });
      const link = join(binDir, 'bwrap');
      if (!bwrap) {
        rmSync(link, { force: true });
        return;
      }
      let current: string | null = null;
      try {
        current = readlinkSync(link);
      } catch {
        /* missing */
      }
      if (current !== bwrap) {
        rmSync(link, { force: true });
        symlinkSync(bwrap, link);
      }
    },
    appServerArgs() {
      if (options.isolation === 'off') return [];
      return [
        '-c',
        `permissions.${AGENT_PROFILE}=${toml({ filesystem: filesystem([]), network: network() })}`,
        // Codex refuses to start with a [permissions] profile but no default_permissions (unless a
        // legacy sandbox_mode is configured); ours is the right default anyway.
        '-c',
        `default_permissions=${toml(AGENT_PROFILE)}`,
        ...(options.network === 'on' ? ['-c', 'features.network_proxy=true'] : []),
      ];
    },
    pathWithHelpers(path) {
      if (options.isolation === 'off' || !bwrap) return path ?? '';
      return path ? `${binDir}:${path}` : binDir;
    },
    forThread(cwd) {
      if (options.isolation === 'off') return { sandbox: 'danger-full-access', config: {} };
      const dirs = privateDirs(cwd);
      mkdirSync(dirs.home, { recursive: true, mode: 0o700 });
      mkdirSync(dirs.tmp, { recursive: true, mode: 0o700 });
      return {
        permissions: AGENT_PROFILE,
        config: {
          permissions: { [AGENT_PROFILE]: { filesystem: filesystem([dirs.home, dirs.tmp, ...linkedCloneOf(cwd)]), network: network() } },
          shell_environment_policy: envPolicy(dirs),
          ...(options.network === 'on' ? { features: { network_proxy: true } } : {}),
        },
      };
    },
    privateDirs,
    deniedPaths,
  };
}

/**
 * For a linked git worktree (`<cwd>/.git` is a file `gitdir: <clone>/.git/worktrees/<name>`): the
 * clone whose `.git` holds its objects and refs, which git in the worktree must read. A "read" entry
 * cannot reopen a path inside a denied one, a "write" entry can — and Codex keeps `<root>/.git` of
 * every writable root read-only — so the clone becomes a writable root whose `.git` stays read-only
 * (no hooks or config the service's own git would run). Other worktrees stay hidden. [] otherwise.
 */
export function linkedCloneOf(cwd: string): string[] {
  const dotGit = join(cwd, '.git');
  if (!(statSync(dotGit, { throwIfNoEntry: false })?.isFile() ?? false)) return [];
  const m = /^gitdir:\s*(.+)$/m.exec(readFileSync(dotGit, 'utf8'));
  if (!m) return [];
  const gitdir = resolve(cwd, m[1]!.trim());
  let common = gitdir;
  try {
    common = resolve(gitdir, readFileSync(join(gitdir, 'commondir'), 'utf8').trim());
  } catch {
    /* no commondir: the gitdir is the repository itself */
  }
  // Only the usual layout `<clone>/.git`: a bare repository as a writable root would be writable.
  return common.endsWith(`${sep}.git`) && existsSync(common) ? [dirname(common)] : [];
}
