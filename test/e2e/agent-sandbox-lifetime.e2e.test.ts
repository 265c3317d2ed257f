// Nothing the agent started outlives the service. The real service process,
// the real Codex app-server and its bubblewrap sandbox, a real Gitea; the scripted model has the
// agent run a long `sleep` through Codex's shell tool. While it runs the service is killed with
// SIGKILL (and, in the second case, its whole process group): no process of the agent's command,
// no bwrap and no app-server of that data directory may be alive a few seconds later — the kernel
// ends them (src/isolation/agent-containment.ts), nobody has to clean up.
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';
import { scriptedAgent } from '../../src/demo/scripted-agent.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { until } from '../support/until.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-lifetime-'));
let env: RealServiceEnvironment;
let service: ServiceProcess | null = null;
const SLEEP = 'sleep 313';

interface Proc {
  pid: number;
  ppid: number;
  cmdline: string;
}

function read(pid: number, file: string): string {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'latin1');
  } catch {
    return '';
  }
}

/** Every live process whose command line, environment or cwd names `dir` (zombies have none). */
function processesNaming(dir: string): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const cmdline = read(pid, 'cmdline').replaceAll('\0', ' ').trim();
    if (cmdline === '') continue;
    let cwd = '';
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      /* gone, or not ours to read */
    }
    if (!cmdline.includes(dir) && !read(pid, 'environ').includes(dir) && !cwd.startsWith(dir)) continue;
    const stat = read(pid, 'stat');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    out.push({ pid, ppid, cmdline: cmdline.slice(0, 200) });
  }
  return out;
}

/** The agent's command: `sleep 313` started inside the sandbox (its HOME is the workspace's own, under the data dir). */
const agentSleeps = (dataDir: string) => processesNaming(join(dataDir, 'agent-sandbox')).filter((p) => p.cmdline.startsWith(SLEEP));

/** The agent runs `sleep 313` for the issue that says "sleep-in-sandbox", then waits for ever; other issues: the usual agent. */
function sleepingAgent(): (body: any) => ReturnType<ReturnType<typeof scriptedAgent>> {
  const normal = scriptedAgent();
  return (body) => {
    const text = JSON.stringify(body?.input ?? []);
    if (!text.includes('sleep-in-sandbox')) return normal(body);
    // This turn's own traffic only: a retried task resumes its thread, which holds the last attempt's.
    const input: any[] = body.input;
    let start = -1;
    input.forEach((i, k) => {
      if (i?.type === 'message' && i?.role === 'user') start = k;
    });
    const ran = input.slice(start + 1).some((i) => i?.type === 'function_call_output');
    return ran ? { type: 'stall' } : { type: 'shell', command: `${SLEEP}; echo slept`, timeoutMs: 10_000 };
  };
}

async function startService(): Promise<ServiceProcess> {
  service = await startServiceProcess(env.env, { ownProcessGroup: true });
  return service;
}

/** Resolves once the agent's sleep runs in the sandbox. */
function agentSleeping(): Promise<Proc[]> {
  return until('the agent command to run', () => {
    const s = agentSleeps(env.env.CCWEB_DATA_DIR!);
    return s.length > 0 ? s : null;
  }, 90_000);
}

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  env.model.setResponder(sleepingAgent());
}, 600_000);

afterAll(async () => {
  await service?.stop().catch(() => undefined);
  await env?.close();
  // Whatever a failed case left: kill it, so the suite's own guard reports only real leaks.
  for (const p of processesNaming(root)) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  rmSync(root, { recursive: true, force: true });
});

/** Within 10 s, no process names the data directory any more (the sandbox, the command, the app-server). */
async function expectNothingLeftOf(dataDir: string): Promise<void> {
  const left = await until('the sandbox to die', () => {
    const l = processesNaming(dataDir);
    return l.length === 0 ? ([] as Proc[]) : null;
  }, 10_000).catch(() => processesNaming(dataDir));
  expect(left, JSON.stringify(left, null, 2)).toEqual([]);
}

describe('the agent sandbox dies with the service [real gitea, real app-server] [real gitea-mcp]', () => {
  it('kill -9 of the service while an agent command runs: no process of the command, no bwrap, no app-server is left', async () => {
    const dataDir = env.env.CCWEB_DATA_DIR!;
    const s = await startService();
    const n = await env.gitea.createIssue('alice', 'Sleep, then be killed');
    await env.gitea.comment('alice', n, '@ccweb-bot please sleep-in-sandbox');
    const sleeps = await agentSleeping();
    expect(sleeps.length).toBeGreaterThan(0);
    expect(processesNaming(dataDir).length).toBeGreaterThan(sleeps.length); // app-server, bwrap, …
    await s.kill9();
    service = null;
    await expectNothingLeftOf(dataDir);
  }, 180_000);

  it("after a restart the task's retry runs the command again; SIGKILL of the service's whole process group: the same", async () => {
    const dataDir = env.env.CCWEB_DATA_DIR!;
    // The restarted service retries the interrupted task (interrupted_by_restart): the agent sleeps again.
    const s = await startService();
    await agentSleeping();
    // The service is its own group leader here (as under a shell or systemd): kill the group.
    process.kill(-s.pid, 'SIGKILL');
    await s.kill9().catch(() => undefined);
    service = null;
    await expectNothingLeftOf(dataDir);
  }, 180_000);

  it('the app-server hangs (SIGSTOP) when the service is killed: the kernel still ends it, its sandbox and the command', async () => {
    // Without containment this is what leaks for good: nobody reads the app-server's closed stdin.
    const dataDir = env.env.CCWEB_DATA_DIR!;
    const s = await startService();
    const n = await env.gitea.createIssue('alice', 'Sleep, then the app-server hangs');
    await env.gitea.comment('alice', n, '@ccweb-bot please sleep-in-sandbox');
    await agentSleeping();
    const appServers = processesNaming(join(dataDir, 'agent-home')).filter((p) => / app-server/.test(p.cmdline) && /codex /.test(p.cmdline.split(' -c ')[0]!));
    expect(appServers.length).toBeGreaterThan(0);
    for (const p of appServers) process.kill(p.pid, 'SIGSTOP');
    await s.kill9();
    service = null;
    await expectNothingLeftOf(dataDir);
  }, 180_000);
});
