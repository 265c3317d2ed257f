// A stop Codex never confirms must not free the repository lease
// while the turn's commands still run. The real `codex app-server` (in the service's PID namespace,
// src/isolation/agent-containment.ts, with the production agent sandbox), the real gitea-mcp, the
// scripted model: the agent runs a long `sleep` whose command line carries a unique marker. Then the
// app-server is frozen with SIGSTOP — a real hang, the one fault the real Codex cannot produce on
// demand ("never answers turn/interrupt") — and the turn is interrupted with a short abort timeout.
// runTurn must give up (`abort_timeout`) only after the app-server and everything in its namespace
// are dead: at the moment it resolves no process with the marker may be alive (checked over all of
// /proc, not only pids we know), and the old app-server was killed, not merely left stopped. The
// supervisor then starts a fresh app-server and the next turn works. (The executor sends
// ABORT_TIMEOUT on this outcome, and only then is the lease released: test/unit/executor-wiring.test.ts.)
//
// Without containment (no setpriv/unshare, no user namespaces) the service cannot keep this promise:
// the case then FAILS, naming the fix — it does not skip.
import { randomInt } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActorRecord } from '../../src/runtime/actor-runtime.js';
import { CONTAINMENT_FIX } from '../../src/isolation/agent-containment.js';
import { containmentLauncherForTests } from '../support/codex-harness.js';
import { sessionFixture, type SessionFixture } from '../support/codex-session-fixture.js';
import { until, timedCase } from '../support/until.js';

let fx: SessionFixture | null = null;
/** Processes this case froze: thawed (then killed with the rest) whatever happens. */
const frozen = new Set<number>();
let marker = '';

function read(pid: number, file: string): string {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'latin1');
  } catch {
    return '';
  }
}

/** `R`, `S`, `T` (stopped), `Z` (zombie: dead, not yet reaped), … or null when gone. */
function stateOf(pid: number): string | null {
  return /^State:\s+(\S)/m.exec(read(pid, 'status'))?.[1] ?? null;
}

const alive = (pid: number) => {
  const s = stateOf(pid);
  return s !== null && s !== 'Z';
};

/** Every live process whose command line holds `needle` (zombies have an empty one). */
function processesWith(needle: string): Array<{ pid: number; state: string | null; cmdline: string }> {
  const out = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const cmdline = read(pid, 'cmdline').replaceAll('\0', ' ').trim();
    if (cmdline.includes(needle) && alive(pid)) out.push({ pid, state: stateOf(pid), cmdline: cmdline.slice(0, 200) });
  }
  return out;
}

/** Direct children of `pid` (by their ppid in /proc). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((p) => {
      if (!Number.isInteger(p)) return false;
      const stat = read(p, 'stat');
      return stat !== '' && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
    });
}

afterEach(async () => {
  for (const pid of frozen) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      /* gone */
    }
  }
  frozen.clear();
  await fx?.cleanup();
  fx = null;
  // Whatever a failed case left (the break-check leaves the sleep running): the suite's guard
  // must report only real leaks.
  if (marker) for (const p of processesWith(marker)) process.kill(p.pid, 'SIGKILL');
  marker = '';
});

describe('a stop Codex never confirms ends the turn\'s processes before runTurn returns [real app-server] [real gitea-mcp]', () => {
  it('app-server frozen (SIGSTOP) during `sleep`: failed abort_timeout, no marked process alive, old app-server killed, next turn on a fresh one', async () => {
    const launcher = containmentLauncherForTests();
    expect(launcher.length, `agent containment is unavailable here, so an unconfirmed stop cannot end the agent's commands. Fix: ${CONTAINMENT_FIX}`).toBeGreaterThan(0);

    // A fractional duration unique to this run: GNU sleep takes it, and it marks the command line.
    marker = `600.${randomInt(10_000_000, 99_999_999)}`;
    fx = await sessionFixture([{ type: 'shell', command: `sleep ${marker}; echo slept`, timeoutMs: 10_000 }]);
    const f = fx;
    // Whatever else turn 1 asks the model (after the command yields) waits for ever.
    f.model.setResponder(() => ({ type: 'stall' }));
    const mgr = f.manager({ abortTimeoutMs: 1_000 });
    const t = await f.task('task-at');
    const conn1 = await f.supervisor.start();
    await mgr.ensureThread(t, f.workspace);
    const running = mgr.runTurn(t, { kind: 'normal', cwd: f.workspace });

    const sleeps = await timedCase('turn start → the agent\'s sleep runs in the sandbox', () =>
      until('the agent\'s sleep to run', () => {
        const s = processesWith(marker).filter((p) => p.cmdline.startsWith(`sleep ${marker}`));
        return s.length > 0 ? s : null;
      }, 60_000),
    );
    // The launcher (unshare) keeps one child, pid 1 of the namespace (the shell that reaps orphans);
    // its children are the app-server and whatever sandbox process was orphaned to it.
    const launcherPid = conn1.pid!;
    const [reaperPid, ...more] = childrenOf(launcherPid);
    expect(more).toEqual([]);
    expect(read(reaperPid!, 'cmdline').split('\0')).toContain('ccweb-reaper');
    const [appServerPid, ...others] = childrenOf(reaperPid!).filter((p) => read(p, 'cmdline').split('\0')[1] === 'app-server');
    expect(others).toEqual([]);
    process.kill(appServerPid!, 'SIGSTOP');
    frozen.add(appServerPid!);
    await until('the app-server to stop', () => stateOf(appServerPid!) === 'T', 10_000);

    const stop = await mgr.interrupt('task-at');
    expect(stop).toEqual({ confirmed: false });
    const out = await timedCase('unconfirmed interrupt (abortTimeoutMs 1 s) → runTurn resolves', () => running);
    // Right now, before anything else runs: nothing of the turn is alive.
    const left = processesWith(marker);
    const appServerState = stateOf(appServerPid!);
    const launcherState = stateOf(launcherPid);

    expect(out).toMatchObject({ kind: 'failed', errorCode: 'abort_timeout', retryable: false, turnKey: 'task-at:1' });
    expect(left, JSON.stringify(left)).toEqual([]);
    for (const s of sleeps) expect(alive(s.pid)).toBe(false);
    // Killed, not left stopped: gone (or a zombie awaiting its reaper), never `T`.
    expect([null, 'Z']).toContain(appServerState);
    expect([null, 'Z']).toContain(launcherState);
    expect(await conn1.waitForExit()).toEqual({ code: null, signal: 'SIGKILL' });
    expect(f.logs.some((l) => l.msg === 'codex app-server terminated' && l.obj.reason === 'turn_stop_unconfirmed')).toBe(true);
    expect(f.lostTurns).toEqual([]); // the turn had ended: nothing handed to onTurnsLost

    // The supervisor restarts a fresh app-server; the task's thread resumes there and a turn works.
    const conn2 = await timedCase('restart after terminate', () => f.supervisor.connection());
    expect(conn2.pid).not.toBe(launcherPid);
    expect(((await f.store.get<ActorRecord>('actors', f.supervisor.actorId))!.snapshot as any).context).toMatchObject({ restarts: 1, lastExit: { signal: 'SIGKILL' } });
    f.model.setResponder(() => ({ type: 'message', text: 'after the unconfirmed stop' }));
    expect((await mgr.ensureThread(t, f.workspace)).resumed).toBe(true);
    expect(await timedCase('second turn on the fresh app-server', () => mgr.runTurn(t, { kind: 'normal', cwd: f.workspace }))).toMatchObject({ kind: 'no_comment', turnKey: 'task-at:2', finalMessage: 'after the unconfirmed stop' });
  }, 120_000);
});
