// Finds processes a test run left behind, by reading /proc (Linux).
//
// A process belongs to this run when its environment carries the run's marker (everything the
// suite spawns inherits it: the service, app-servers, Gitea, git), or when it is an orphan that did
// not exist when the run started and whose command line names a file of this checkout (MCP
// stand-ins, which Codex starts with a scrubbed environment). A live process of another run of the
// same checkout has a live parent, so it is never counted or touched.
//
// Codex's sandbox processes carry neither: their environment is rebuilt from an allow-list and their
// command line names only a temporary folder (and stuck `bwrap` children, pid 1 of
// their own PID namespace, can outlive whole runs). So an orphan born during the run also counts when it
// is a bwrap/codex process whose arguments name a test folder (`sandboxRoots`: `<tmpdir>/ccweb-`), or
// an agent command whose HOME is a workspace's private one under such a folder. A concurrent run of
// another checkout could leak such an orphan too and be reported here — a leak all the same.
import { readFileSync, readdirSync } from 'node:fs';
import { basename } from 'node:path';

export const RUN_MARKER_VAR = 'CCWEB_TEST_RUN_ID';

export interface ProcessInfo {
  pid: number;
  ppid: number;
  cmdline: string;
}

function readProc(pid: number, file: string): Buffer | null {
  try {
    return readFileSync(`/proc/${pid}/${file}`);
  } catch {
    return null;
  }
}

function parentOf(pid: number): number {
  const stat = readProc(pid, 'stat')?.toString('utf8');
  if (!stat) return -1;
  // "pid (comm) state ppid …": comm may contain spaces and parentheses, so parse after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(rest[1]);
}

/** Processes of this run still alive, except `exclude` (the caller and its ancestors, typically). */
export function leftoverProcesses(opts: {
  runId: string;
  cmdlineNeedles: string[];
  exclude: Set<number>;
  /** Processes alive before the run started (from `allPids()`). */
  preexisting: Set<number>;
  /** Path prefixes of the suite's temporary folders (e.g. `/tmp/ccweb-`). */
  sandboxRoots?: string[];
}): ProcessInfo[] {
  const marker = Buffer.from(`${RUN_MARKER_VAR}=${opts.runId}\0`);
  const found: ProcessInfo[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || opts.exclude.has(pid)) continue;
    const cmdline = (readProc(pid, 'cmdline') ?? Buffer.alloc(0)).toString('utf8').replaceAll('\0', ' ').trim();
    if (cmdline === '') continue; // kernel threads and zombies
    const env = readProc(pid, 'environ');
    const ppid = parentOf(pid);
    const marked = env !== null && env.includes(marker);
    const orphan = !opts.preexisting.has(pid) && ppid === 1;
    const orphanOfOurs = orphan && (opts.cmdlineNeedles.some((n) => cmdline.includes(n)) || sandboxOrphan(cmdline, env, opts.sandboxRoots ?? []));
    if (marked || orphanOfOurs) found.push({ pid, ppid, cmdline: cmdline.slice(0, 300) });
  }
  return found;
}

const SANDBOX_PROGRAMS = new Set(['bwrap', 'codex', 'codex-linux-sandbox']);

/** A Codex sandbox process (or an agent command) of a test folder under one of `roots`. */
export function sandboxOrphan(cmdline: string, env: Buffer | null, roots: string[]): boolean {
  if (roots.length === 0) return false;
  const program = basename(cmdline.split(' ')[0] ?? '');
  if (SANDBOX_PROGRAMS.has(program) && roots.some((r) => cmdline.includes(r))) return true;
  if (!env) return false;
  return env
    .toString('utf8')
    .split('\0')
    .some((kv) => kv.startsWith('HOME=') && kv.includes('/agent-sandbox/workspaces/') && roots.some((r) => kv.startsWith(`HOME=${r}`)));
}

export function allPids(): Set<number> {
  return new Set(readdirSync('/proc').map(Number).filter((n) => Number.isInteger(n)));
}

/** `pid` and every ancestor up to init. */
export function selfAndAncestors(pid: number = process.pid): Set<number> {
  const out = new Set<number>();
  for (let p = pid; p > 0 && !out.has(p); p = parentOf(p)) out.add(p);
  return out;
}
