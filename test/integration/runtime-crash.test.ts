import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/index.js';
import type { AuditEvent } from '../../src/store/types.js';
import type { ActorRecord } from '../../src/runtime/actor-runtime.js';

const CHILD = join(import.meta.dirname, '../support/runtime-crash-child.ts');

interface Ack {
  actorId: string;
  state: string;
  stateVersion: number;
}

/** Runs the child until it has acknowledged `killAfter` transitions, then SIGKILLs it. */
function runAndKill(dir: string, round: number, killAfter: number): Promise<Ack[]> {
  return new Promise((resolve, reject) => {
    // `--import tsx` keeps the child one process: SIGKILL must hit the process that writes.
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dir, String(round)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acks: Ack[] = [];
    let buf = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const m = /^ACK (\S+) (\S+) (\d+)$/.exec(line);
        if (m) acks.push({ actorId: m[1]!, state: m[2]!, stateVersion: Number(m[3]) });
        if (acks.length >= killAfter && !child.killed) child.kill('SIGKILL');
      }
    });
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve(acks);
      else reject(new Error(`child exited ${code} ${signal}: ${stderr.slice(-2000)}`));
    });
  });
}

describe('runtime survives SIGKILL mid-lifecycle', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ccweb-crash-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('restores every actor in its last persisted state with an unbroken audit chain', async () => {
    const lastAcked = new Map<string, Ack>();
    const killPoints = [7, 23, 41, 64, 97, 150];
    for (const [round, killAfter] of killPoints.entries()) {
      const acks = await runAndKill(dir, round, killAfter);
      expect(acks.length).toBeGreaterThanOrEqual(killAfter);
      for (const a of acks) lastAcked.set(a.actorId, a);

      const store = createStore({ dir });
      await store.open();
      try {
        const actors = await store.list<ActorRecord>('actors');
        const audit = await store.audit({});
        // Sequence numbers and ids unique and increasing: nothing duplicated by recovery.
        const seqs = audit.map((e) => e.seq);
        expect(new Set(seqs).size).toBe(seqs.length);
        expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
        expect(new Set(audit.map((e) => e.eventId)).size).toBe(audit.length);

        const byActor = new Map<string, AuditEvent[]>();
        for (const e of audit) {
          if (!e.actorId || e.action !== 'task.transition') continue;
          byActor.set(e.actorId, [...(byActor.get(e.actorId) ?? []), e]);
        }
        for (const [actorId, ack] of lastAcked) {
          const rec = actors.find((r) => r.actorId === actorId);
          expect(rec, actorId).toBeDefined();
          // Durable means: at least what was acknowledged (later, unacknowledged writes may also have landed).
          expect(rec!.stateVersion).toBeGreaterThanOrEqual(ack.stateVersion);
          const task = await store.get<{ state: string; stateVersion: number }>('tasks', (rec!.taskId as string));
          expect(task?.state).toBe(rec!.state);
          expect(task?.stateVersion).toBe(rec!.stateVersion);
        }
        for (const rec of actors) {
          // One audit event per persisted version, linked from → to: none lost, none twice.
          const chain = byActor.get(rec.actorId) ?? [];
          expect(chain.map((e) => e.stateVersion)).toEqual(chain.map((_, i) => i + 1));
          expect(chain.length).toBe(rec.stateVersion);
          for (let i = 1; i < chain.length; i++) expect(chain[i]!.fromState).toBe(chain[i - 1]!.toState);
          expect(chain.at(-1)!.toState).toBe(rec.state);
        }
      } finally {
        await store.close();
      }
    }
    // Actors restored in later rounds kept moving to the end of their lifecycle.
    const store = createStore({ dir });
    await store.open();
    const done = (await store.list<ActorRecord>('actors', (r) => r.state === 'succeeded')).length;
    await store.close();
    expect(done).toBeGreaterThan(0);
  }, 120_000);
});

describe('runtime graceful restart', () => {
  it('a planned shutdown (stopAll + close) leaves every live actor restorable', async () => {
    const { createTestRuntime } = await import('../support/test-runtime.js');
    const { taskKind, taskActorId } = await import('../../src/tasks/task-actor.js');
    const first = await createTestRuntime([taskKind()]);
    const created = await first.store.transact(async (tx) => {
      await tx.insert('tasks', 't1', { taskId: 't1', state: 'received', stateVersion: 0 });
      return first.runtime.createInTx(tx, 'task', taskActorId('t1'), { taskId: 't1' }, { events: [{ type: 'ACCEPT' }], taskId: 't1' });
    });
    created.start();
    await first.runtime.send(taskActorId('t1'), { type: 'CLAIM', leaseId: 'l1' } as { type: string });
    await first.close(false);
    const second = await createTestRuntime([taskKind()], first.dir);
    // Tasks come back lazily: on the first event after the restart.
    expect(await second.runtime.restoreAll()).toEqual({ restored: 0, skipped: 0, deferred: 1 });
    expect(await second.runtime.has(taskActorId('t1'))).toBe(true);
    const r = await second.runtime.send(taskActorId('t1'), { type: 'WORKSPACE_READY' });
    expect(r).toMatchObject({ ok: true, fromState: 'preparing', toState: 'running', stateVersion: 4 });
    await second.close();
  });
});
