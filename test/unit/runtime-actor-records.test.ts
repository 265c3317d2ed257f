// The actor runtime's pure pieces: what a transition stores (actorRecord), what it audits
// (transitionAudit, summarizeEvent), and whether a stored actor can be restored (restorableSnapshot,
// MachineFacts.stateExists).
import { describe, expect, it } from 'vitest';
import type { AnyMachineSnapshot } from 'xstate';
import { taskMachine } from '../../machines/task-lifecycle.js';
import { actorRecord, summarizeEvent, transitionAudit } from '../../src/runtime/actor-records.js';
import type { ActorKind, ActorRecord, PersistedChange } from '../../src/runtime/actor-types.js';
import { MachineFacts, restorableSnapshot } from '../../src/runtime/machine-facts.js';
import { taskKind } from '../../src/tasks/task-actor.js';

const kind: ActorKind = taskKind();

function change(over: Partial<PersistedChange> = {}): PersistedChange {
  return {
    actorId: 'task:t1',
    kind: 'task',
    fromState: 'queued',
    toState: 'retry_wait',
    stateVersion: 4,
    snapshot: { status: 'active', context: { errorCode: 'codex_down' } } as unknown as AnyMachineSnapshot,
    event: { type: 'FAIL', reason: 'x', output: new Error('boom '.repeat(100)), nested: { secret: 's' } } as never,
    by: 'system',
    ...over,
  };
}

describe('actorRecord', () => {
  it('carries the machine id and version, the new state, status and version, and keeps createdAt', () => {
    const rec = actorRecord(kind, change(), 't1', { value: 'retry_wait' }, '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z');
    expect(rec).toEqual({
      actorId: 'task:t1',
      kind: 'task',
      machineId: taskMachine.id,
      machineVersion: kind.machineVersion,
      state: 'retry_wait',
      status: 'active',
      stateVersion: 4,
      snapshot: { value: 'retry_wait' },
      taskId: 't1',
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-02T00:00:00.000Z',
    });
  });
});

describe('transitionAudit', () => {
  it('names the kind, the states, the version and the context error code; the event summarized', () => {
    const event = transitionAudit(kind, change(), 't1');
    expect(event).toMatchObject({ action: 'task.transition', actor: 'system', actorId: 'task:t1', taskId: 't1', fromState: 'queued', toState: 'retry_wait', stateVersion: 4, errorCode: 'codex_down' });
    expect(event.metadata).toEqual({ event: { type: 'FAIL', reason: 'x', output: { message: 'boom '.repeat(40) } } });
  });

  it('no error code when the context has none (or not a string); empty metadata without an event', () => {
    const event = transitionAudit(kind, change({ snapshot: { status: 'active', context: { errorCode: 7 } } as unknown as AnyMachineSnapshot, event: null }), null);
    expect(event.errorCode).toBeNull();
    expect(event.metadata).toEqual({});
  });
});

describe('summarizeEvent', () => {
  it('keeps scalars, drops objects that could carry free text, and bounds the size', () => {
    expect(summarizeEvent({ type: 'X', n: 1, ok: true, none: null, obj: { a: 1 }, list: [1] } as never)).toEqual({ type: 'X', n: 1, ok: true, none: null });
    expect(summarizeEvent({ type: 'BIG', text: 'y'.repeat(3000) } as never)).toEqual({ type: 'BIG', truncated: true });
    // An invoke's error keeps its (bounded) message only.
    expect(summarizeEvent({ type: 'E', error: new Error('e'.repeat(300)) } as never)).toEqual({ type: 'E', error: { message: 'e'.repeat(200) } });
  });
});

describe('restorableSnapshot', () => {
  const facts = new MachineFacts();
  const exists = (k: ActorKind, s: string) => facts.stateExists(k, s);
  const rec = (over: Partial<ActorRecord> = {}): ActorRecord => ({
    actorId: 'task:t1', kind: 'task', machineId: 'task', machineVersion: kind.machineVersion, state: 'queued', status: 'active', stateVersion: 2,
    snapshot: { value: 'queued' }, taskId: 't1', createdAt: 'c', updatedAt: 'u', ...over,
  });

  it('the stored snapshot when version and state match', () => {
    expect(restorableSnapshot(rec(), kind, exists)).toEqual({ value: 'queued' });
  });
  it('nothing for an unknown kind, a state the machine does not have, or an old version without migration', () => {
    expect(restorableSnapshot(rec(), undefined, exists)).toBeUndefined();
    expect(restorableSnapshot(rec({ state: 'no_such_state' }), kind, exists)).toBeUndefined();
    expect(restorableSnapshot(rec({ machineVersion: kind.machineVersion - 1 }), kind, exists)).toBeUndefined();
  });
  it('an old version through the kind migration', () => {
    const migrating: ActorKind = { ...kind, migrate: (snapshot, from) => ({ ...(snapshot as object), migratedFrom: from }) };
    expect(restorableSnapshot(rec({ machineVersion: 0 }), migrating, exists)).toEqual({ value: 'queued', migratedFrom: 0 });
  });
  it('stateExists knows nested and unknown states', () => {
    expect(facts.stateExists(kind, 'queued')).toBe(true);
    expect(facts.stateExists(kind, 'queued.nope')).toBe(false);
  });
});
