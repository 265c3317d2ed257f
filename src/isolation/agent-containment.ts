// Nothing the agent started may outlive the service.
//
// Codex runs each agent command in `bwrap --die-with-parent --new-session --as-pid-1 …`. That ties a
// sandbox to its direct parent only, and not even fully: bubblewrap's child arms its parent-death
// signal just before exec, so when the outer bwrap dies during set-up (the app-server killed, the
// service killed) the child waits for ever on an eventfd — as pid 1 of its own PID namespace, so
// SIGTERM does not reach it — reparented to init. `--new-session` also takes every sandbox out of
// the service's process group, so killing the group misses them.
//
// The fix is the kernel's: the app-server starts as
//   setpriv --pdeathsig KILL -- unshare [--map-current-user] --pid --fork --kill-child -- sh -c … codex app-server …
// so it runs in a PID namespace of its own, under a shell as pid 1 that reaps what is orphaned
// there (NAMESPACE_REAPER). Every process it or Codex starts — sandboxes, stuck bwraps, the agent's
// commands and whatever they fork or daemonise — is in that namespace,
// and when its pid 1 dies the kernel SIGKILLs all of them. pid 1 dies when the app-server exits, or
// (--kill-child) when the unshare process dies, which (--pdeathsig, kept across exec) dies with the
// service: SIGTERM, SIGKILL, the service's process group killed, a crash. Unprivileged, the PID
// namespace needs a user namespace (`--map-current-user`, the user keeps its uid) — which Codex's
// own sandbox needs too. Without util-linux's setpriv/unshare, or where they fail, the service
// warns and starts the app-server as before; `sweepLeftovers` at start is then the only net.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { basename } from 'node:path';

export interface Containment {
  /** `pid-namespace`: the argv prefix is in force. `none`: the app-server starts bare (see warning). */
  mode: 'pid-namespace' | 'none';
  /** Put before the codex command (`[]` for none). */
  launcher: string[];
  /** Set when mode is none: said at start and by doctor. */
  warning: string | null;
}

export const CONTAINMENT_FIX =
  "install util-linux's `setpriv` and `unshare` (Debian/Ubuntu: util-linux; Alpine: setpriv, util-linux-misc) and allow unprivileged user namespaces (which the agent sandbox needs anyway)";

/**
 * pid 1 of the namespace. Every process orphaned in there becomes its child (a sandbox's outer bwrap
 * exits before the inner one), and only a pid 1 that waits for children it did not start reaps them:
 * the app-server itself (the Node wrapper or the native binary) waits for its own only, so each
 * sandboxed command left zombies for the app-server's whole life. The shell waits for the app-server
 * and, while it does, reaps every other child that ends; it exits with the app-server's status, and
 * the namespace with it. An asynchronous command's standard input would be /dev/null: the
 * app-server's (the JSON-RPC stream) is handed on explicitly through descriptor 3.
 */
export const NAMESPACE_REAPER = ['/bin/sh', '-c', 'exec 3<&0; "$@" 0<&3 3<&- & wait $!', 'ccweb-reaper'];

/** The argv prefix for a user with uid `uid` (root needs no user namespace for a PID namespace). */
export function containmentLauncher(uid: number): string[] {
  return ['setpriv', '--pdeathsig', 'KILL', '--', 'unshare', ...(uid === 0 ? [] : ['--map-current-user']), '--pid', '--mount-proc', '--fork', '--kill-child', '--', ...NAMESPACE_REAPER];
}

/**
 * Tries the launcher once (`… -- true`, a few ms) with the service's PATH: the mechanism is used
 * only where it works.
 */
export function detectContainment(opts: { env?: NodeJS.ProcessEnv; uid?: number } = {}): Containment {
  if (process.platform !== 'linux') return { mode: 'none', launcher: [], warning: 'agent containment needs Linux' };
  const launcher = containmentLauncher(opts.uid ?? process.getuid?.() ?? 0);
  try {
    execFileSync(launcher[0]!, [...launcher.slice(1), 'true'], { env: opts.env ?? process.env, stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
    return { mode: 'pid-namespace', launcher, warning: null };
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer; message?: string };
    const why = e.code === 'ENOENT' ? 'setpriv is not on PATH' : (e.stderr?.toString().trim() || e.message || String(err)).split('\n')[0]!.slice(0, 200);
    return {
      mode: 'none',
      launcher: [],
      warning:
        `agent containment is unavailable (${why}): a killed or crashed service can leave the agent's commands running until the next start ends them. ` +
        `Fix: ${CONTAINMENT_FIX}`,
    };
  }
}

// ---- the net at start: what an earlier instance of this data directory left ----

export interface LeftoverProcess {
  pid: number;
  /** The program (basename of argv[0]), never the whole command line (it can hold anything). */
  program: string;
  /** Which mark made it ours. */
  reason: 'sandbox' | 'agent-command' | 'app-server';
}

interface ProcView {
  pid: number;
  uid: number;
  argv: string[];
  environ: string[];
}

/** Programs that run the sandbox: the outer and inner bwrap, Codex's helpers inside it. */
const SANDBOX_PROGRAMS = new Set(['bwrap', 'codex', 'codex-linux-sandbox']);

/** What marks a process as started for one data directory's agent. */
export interface AgentMarks {
  /** `<dataDir>/agent-sandbox` (AgentSandbox.stateDir). */
  stateDir: string;
  /** The app-server's HOME, `<dataDir>/agent-home` (with isolation off, the agent's commands inherit it). */
  agentHome: string;
}

/**
 * Whether `p` was started for the agent of this data directory, by its marks only — never by a path
 * alone, so an operator's shell or editor in a workspace is left alone:
 * - a bwrap/codex process whose arguments name `stateDir` (Codex's sandboxes of this data dir);
 * - a process whose HOME or TMPDIR is a workspace's private one under `stateDir/workspaces/` (the
 *   agent's commands: Codex sets them from our profile; nothing else uses those folders);
 * - a process whose PATH starts with `stateDir/bin`, or whose HOME is `agentHome` (the app-server
 *   and what inherited its environment).
 */
export function leftoverReason(p: Pick<ProcView, 'argv' | 'environ'>, marks: AgentMarks): LeftoverProcess['reason'] | null {
  const dir = marks.stateDir.replace(/\/+$/, '') + '/';
  const home = marks.agentHome.replace(/\/+$/, '');
  const program = basename(p.argv[0] ?? '');
  if (SANDBOX_PROGRAMS.has(program) && p.argv.some((a) => a.includes(dir))) return 'sandbox';
  for (const kv of p.environ) {
    if (kv.startsWith(`HOME=${dir}workspaces/`) || kv.startsWith(`TMPDIR=${dir}workspaces/`)) return 'agent-command';
    if (kv === `PATH=${dir}bin` || kv.startsWith(`PATH=${dir}bin:`) || kv === `HOME=${home}` || kv.startsWith(`TMPDIR=${home}/`)) return 'app-server';
  }
  return null;
}

function readView(pid: number): ProcView | null {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a, i, all) => a !== '' || i < all.length - 1);
    if (argv.length === 0) return null; // kernel thread or zombie
    const uidLine = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    return { pid, uid: uidLine ? Number(uidLine[1]) : -1, argv, environ };
  } catch {
    return null; // gone, or not ours to read
  }
}

function ancestorsOf(pid: number): Set<number> {
  const out = new Set<number>();
  for (let p = pid; p > 0 && !out.has(p); ) {
    out.add(p);
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      p = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      break;
    }
  }
  return out;
}

/** Live processes of this user carrying `marks` (not this process or its ancestors). */
export function findLeftovers(marks: AgentMarks, opts: { uid?: number; selfPid?: number } = {}): LeftoverProcess[] {
  if (process.platform !== 'linux') return [];
  const uid = opts.uid ?? process.getuid?.() ?? 0;
  const spare = ancestorsOf(opts.selfPid ?? process.pid);
  const found: LeftoverProcess[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || spare.has(pid)) continue;
    const view = readView(pid);
    if (!view || view.uid !== uid) continue;
    const reason = leftoverReason(view, marks);
    if (reason) found.push({ pid, program: basename(view.argv[0] ?? '?'), reason });
  }
  return found;
}

/**
 * Ends what an earlier instance of this data directory left (SIGKILL: a sandbox's pid 1 ignores
 * SIGTERM). Call only while holding the data directory's lock and before starting the app-server:
 * then every marked process belongs to a service that is gone. Returns what it killed.
 */
export async function sweepLeftovers(marks: AgentMarks, opts: { uid?: number; waitMs?: number } = {}): Promise<LeftoverProcess[]> {
  const found = findLeftovers(marks, opts);
  for (const p of found) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  const deadline = Date.now() + (opts.waitMs ?? 2_000);
  while (found.some((p) => alive(p.pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return found;
}

function alive(pid: number): boolean {
  try {
    // A zombie (killed, not yet reaped by its parent) is dead for our purpose.
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}
