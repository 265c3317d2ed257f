// The service's processes reap what dies under them. The app-server runs as pid 1 of its own PID
// namespace (src/isolation/agent-containment.ts), so every process orphaned in there (the outer
// bwrap of a sandboxed command exits before the inner one) becomes its child; a pid 1 that does not
// wait for children it did not start keeps each one as a zombie for its whole life. The real
// service process, the real Codex app-server and its bubblewrap sandbox, a real Gitea: after start
// and after one answered comment, /proc must show no zombie anywhere below the service.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-zombies-'));
let env: RealServiceEnvironment;
let service: ServiceProcess | null = null;

interface Proc {
  pid: number;
  ppid: number;
  state: string;
  name: string;
}

function processes(): Proc[] {
  const out: Proc[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      const close = stat.lastIndexOf(')');
      const [state, ppid] = stat.slice(close + 2).split(' ');
      out.push({ pid, ppid: Number(ppid), state: state!, name: stat.slice(stat.indexOf('(') + 1, close) });
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Every process below `pid` (its children, theirs, …). */
function descendants(pid: number): Proc[] {
  const all = processes();
  const below: Proc[] = [];
  const parents = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (!parents.has(p.pid) && parents.has(p.ppid)) {
        parents.add(p.pid);
        below.push(p);
        grew = true;
      }
    }
  }
  return below;
}

async function readyz(url: string): Promise<{ ok: boolean; body: string }> {
  const res = await fetch(`${url}/readyz`);
  return { ok: res.ok, body: await res.text() };
}

async function waitFor<T>(what: string, f: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
}, 600_000); // the first run on a machine builds Gitea

afterAll(async () => {
  await service?.stop();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('no zombie processes below the service', { timeout: 180_000 }, () => {
  it('after start (the app-server ready) and after an answered comment, no process below the service is a zombie', async () => {
    service = await startServiceProcess(env.env);
    const url = service.url;
    await waitFor('the service ready', async () => (await readyz(url)).ok, 90_000);
    // The app-server is up: its process tree is what it keeps for its whole life.
    expect(descendants(service.pid).some((p) => p.name === 'unshare'), 'the app-server runs in its PID namespace').toBe(true);
    const afterStart = descendants(service.pid).filter((p) => p.state === 'Z');
    expect(afterStart, JSON.stringify(descendants(service.pid))).toEqual([]);

    // One comment: the agent runs `git rev-parse HEAD` in its sandbox (bwrap) and answers.
    const bot = env.gitea.users.bot.login;
    const asked = await env.gitea.comment(env.gitea.users.writer.login, 1, `@${bot} which commit is checked out? Look at the head.`);
    await waitFor('the answer naming the commit', async () => (await env.gitea.comments(1)).some((c) => c.user.login === bot && c.id > asked.id && /\b[0-9a-f]{40}\b/.test(c.body)), 120_000);
    // Give the sandbox's processes a moment to end (each one's parent sees its exit at once if it waits).
    await new Promise((r) => setTimeout(r, 2_000));
    const afterTask = descendants(service.pid).filter((p) => p.state === 'Z');
    expect(afterTask, JSON.stringify(descendants(service.pid))).toEqual([]);
  });
});
