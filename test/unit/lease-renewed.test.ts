// What a node does at each renewal of a running task's lease on a shared database: a stop that
// another node took is seen in the task's state even when its notification was lost.
// Real: the SQLite store; the gate and the executor are recorded calls (their own tests cover them).
import { describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../src/domain/records.js';
import { onLeaseRenewed } from '../../src/service/lease-renewed.js';
import { storeForTest } from '../support/test-runtime.js';

async function world(state: string | null) {
  const store = await storeForTest();
  if (state !== null) await store.transact((tx) => tx.insert('tasks', 't-1', { taskId: 't-1', state } as unknown as TaskRecord));
  const calls = { aborted: [] as string[], gates: [] as string[], warned: [] as string[] };
  const ports = {
    store,
    refreshGate: (task: TaskRecord) => void calls.gates.push(task.state),
    abort: (id: string) => void calls.aborted.push(id),
    warn: (_f: Record<string, unknown>, msg: string) => void calls.warned.push(msg),
  };
  return { store, ports, calls };
}

describe('a lease renewed on a shared database', () => {
  it('a task being stopped (aborting, its notification lost): the turn is stopped here, and the gate still moved on', async () => {
    const w = await world('aborting');
    await onLeaseRenewed(w.ports, 't-1');
    expect(w.calls).toEqual({ aborted: ['t-1'], gates: ['aborting'], warned: [] });
  });

  it('a task running on: only the gate moves on', async () => {
    const w = await world('running');
    await onLeaseRenewed(w.ports, 't-1');
    expect(w.calls).toEqual({ aborted: [], gates: ['running'], warned: [] });
  });

  it('a store that cannot be read: a warning, nothing else (never a rejection)', async () => {
    const w = await world('running');
    // A fault the real store only shows with a database gone: its read rejects.
    const failing = { get: () => Promise.reject(new Error('store unavailable: connection refused')) } as unknown as typeof w.store;
    await onLeaseRenewed({ ...w.ports, store: failing }, 't-1');
    expect(w.calls.aborted).toEqual([]);
    expect(w.calls.warned).toHaveLength(1);
  });
});
