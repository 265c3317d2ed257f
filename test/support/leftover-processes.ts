// Finds processes a test run left behind, by reading /proc (Linux).
//
// A process belongs to this run when its environment carries the run's marker (everything the
// suite spawns inherits it: the service, app-servers, Gitea, git), or when it is an orphan that did
// not exist when the run started and whose command line names a file of this checkout (MCP
// stand-ins, which Codex starts with a scrubbed environment). A live process of another run of the
// same checkout has a live parent, so it is never counted or touched.
import { readFileSync, readdirSync } from 'node:fs';

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
    const orphanOfOurs = !opts.preexisting.has(pid) && ppid === 1 && opts.cmdlineNeedles.some((n) => cmdline.includes(n));
    if (marked || orphanOfOurs) found.push({ pid, ppid, cmdline: cmdline.slice(0, 300) });
  }
  return found;
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
