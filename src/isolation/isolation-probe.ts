// Proves, on this host, that the agent's sandbox holds: a short-lived `codex app-server` with the
// same command, arguments and environment the service uses runs one shell script through the same
// permission profile (`command/exec` with `permissionProfile`), and the script reports what it can
// see. Used at start-up (the service refuses to start when it fails, unless the operator turned
// isolation off) and by `ccweb-gitea doctor`.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { CodexAppServerConnection, errorText, type CodexConnectionOptions } from '../codex/jsonrpc-connection.js';
import { AGENT_PROFILE, type AgentSandbox } from './agent-sandbox.js';

export interface ProbeCheck {
  name: 'sandbox' | 'write' | 'pid-namespace' | 'data-dir' | 'codex-home' | 'environment' | 'network';
  ok: boolean;
  detail: string;
}

export interface IsolationProbeResult {
  ok: boolean;
  checks: ProbeCheck[];
  /** One line for logs and errors: the failed checks, or "all checks passed". */
  summary: string;
  /** Why it failed: the sandbox itself, or the app-server it is asked through did not start (null when ok). */
  cause: 'sandbox' | 'app-server' | null;
  /** What to do, for that cause (empty when ok). */
  fix: string;
  durationMs: number;
}

export interface IsolationProbeOptions {
  /** Exactly how the service starts its app-server (command, args with the sandbox's, env, agentPath …). */
  connection: CodexConnectionOptions;
  codexHome: string;
  timeoutMs?: number;
}

/** What to do when the probe fails (start-up error and doctor). */
export const ISOLATION_FIX =
  'the agent sandbox needs unprivileged user namespaces (Debian/Ubuntu: sysctl kernel.unprivileged_userns_clone=1; ' +
  'Ubuntu 24.04+: kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap; in a container: ' +
  'allow the unshare/clone syscalls, e.g. docker --security-opt seccomp=unconfined) — see docs/security.md#host-requirements; ' +
  'or set CCWEB_AGENT_ISOLATION=off to run the agent without isolation (it can then read the bot token)';

/** When the probe's app-server did not even start: the sandbox was never tried, so nothing about namespaces is known. */
export const APP_SERVER_FIX =
  'the Codex app-server did not start, so the sandbox was never tried: fix that first (`ccweb-gitea doctor` shows it in its codex check: ' +
  'CCWEB_CODEX_COMMAND, CODEX_HOME and its config.toml)';

const SCRIPT = `
nonce="$1"; marker="$2"; codex_home="$3"; port="$4"
if (echo probe > .ccweb-probe-write && test "$(cat .ccweb-probe-write)" = probe) 2>/dev/null; then echo "write=ok"; else echo "write=fail"; fi
echo "pidns=$(readlink /proc/self/ns/pid)"
echo "procs=$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)"
if cat "$marker" >/dev/null 2>&1; then echo "data=readable"; else echo "data=hidden"; fi
if ls "$codex_home" >/dev/null 2>&1; then echo "codex_home=readable"; else echo "codex_home=hidden"; fi
found=absent
for f in /proc/[0-9]*/environ; do if tr '\\0' '\\n' < "$f" 2>/dev/null | grep -q "$nonce"; then found=present; fi; done
if env | grep -q "$nonce"; then found=present; fi
echo "nonce=$found"
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "net=open"; else echo "net=blocked"; fi
`;

function listen(): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer((sock) => sock.end('ccweb-probe\n'));
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

function parse(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/** Runs the probe; never throws (a failure to run is a failed `sandbox` check). */
export async function probeAgentIsolation(sandbox: AgentSandbox, options: IsolationProbeOptions): Promise<IsolationProbeResult> {
  const t0 = Date.now();
  const timeoutMs = options.timeoutMs ?? 30_000;
  // Until the app-server answers, a failure says nothing about the sandbox.
  let appServerUp = false;
  const finish = (checks: ProbeCheck[]): IsolationProbeResult => {
    const failed = checks.filter((c) => !c.ok);
    return {
      ok: failed.length === 0,
      checks,
      summary: failed.length === 0 ? 'all checks passed' : failed.map((c) => `${c.name}: ${c.detail}`).join('; '),
      cause: failed.length === 0 ? null : appServerUp ? 'sandbox' : 'app-server',
      fix: failed.length === 0 ? '' : appServerUp ? ISOLATION_FIX : APP_SERVER_FIX,
      durationMs: Date.now() - t0,
    };
  };
  if (sandbox.isolation === 'off') {
    appServerUp = true;
    return finish([{ name: 'sandbox', ok: false, detail: 'CCWEB_AGENT_ISOLATION=off: the agent runs with full access' }]);
  }
  sandbox.prepare();
  const probeDir = join(sandbox.stateDir, 'probe');
  const work = join(probeDir, 'work');
  const marker = join(probeDir, 'marker');
  mkdirSync(work, { recursive: true, mode: 0o700 });
  const nonce = `ccweb-probe-${randomBytes(12).toString('hex')}`;
  writeFileSync(marker, nonce, { mode: 0o600 });
  let server: Server | null = null;
  const base = options.connection;
  const conn = new CodexAppServerConnection({
    ...base,
    probes: false,
    initializeTimeoutMs: timeoutMs,
    requestTimeoutMs: timeoutMs,
    // The nonce stands for any secret that reached the app-server's environment.
    extraEnv: { ...(base.extraEnv ?? {}), CCWEB_ISOLATION_PROBE_NONCE: nonce },
  });
  const stderr: string[] = [];
  conn.on('stderr', (e) => void stderr.push(e.line));
  try {
    server = await listen();
    const port = (server.address() as { port: number }).port;
    await conn.start();
    appServerUp = true;
    const res: any = await conn.request(
      'command/exec',
      {
        command: ['/bin/bash', '-c', SCRIPT, 'ccweb-probe', nonce, marker, options.codexHome, String(port)],
        cwd: work,
        permissionProfile: AGENT_PROFILE,
        timeoutMs,
      },
      { timeoutMs: timeoutMs + 5_000 },
    );
    const out = parse(String(res?.stdout ?? ''));
    if (res?.exitCode !== 0 || !out['write']) {
      const err = String(res?.stderr ?? '').trim().split('\n').slice(-3).join(' | ').slice(0, 300);
      return finish([{ name: 'sandbox', ok: false, detail: `the sandboxed command failed (exit ${res?.exitCode}): ${err || 'no output'}` }]);
    }
    const ownPidNs = readlinkSync('/proc/self/ns/pid');
    return finish([
      { name: 'sandbox', ok: true, detail: 'a command ran under the agent profile' },
      { name: 'write', ok: out['write'] === 'ok', detail: out['write'] === 'ok' ? 'the workspace is writable' : 'cannot write its workspace' },
      {
        name: 'pid-namespace',
        ok: !!out['pidns'] && out['pidns'] !== ownPidNs,
        detail: out['pidns'] !== ownPidNs ? `private (${out['procs']} processes visible)` : 'shares the service’s PID namespace: /proc of the service is readable',
      },
      { name: 'data-dir', ok: out['data'] === 'hidden', detail: out['data'] === 'hidden' ? 'the data directory is hidden' : 'read a file in the data directory' },
      { name: 'codex-home', ok: out['codex_home'] === 'hidden', detail: out['codex_home'] === 'hidden' ? 'CODEX_HOME is hidden' : 'can list CODEX_HOME' },
      {
        name: 'environment',
        ok: out['nonce'] === 'absent',
        detail: out['nonce'] === 'absent' ? 'the app-server’s environment does not reach commands' : 'a variable of the app-server’s environment reached the command',
      },
      { name: 'network', ok: out['net'] === 'blocked', detail: out['net'] === 'blocked' ? "the service's loopback port is unreachable" : "reached a loopback port of the host" },
    ]);
  } catch (err) {
    const said = stderr.filter((l) => !/^\s*(\d+:|at )/.test(l)).slice(-3).join(' | ').slice(0, 300);
    return finish([{ name: 'sandbox', ok: false, detail: `could not run the probe: ${errorText(err).slice(0, 300)}${said ? ` (app-server said: ${said})` : ''}` }]);
  } finally {
    await conn.close({ graceMs: 500, termMs: 1000 }).catch(() => undefined);
    server?.close();
    rmSync(probeDir, { recursive: true, force: true });
  }
}
