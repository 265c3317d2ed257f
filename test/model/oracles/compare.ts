/**
 * Compares a machine with its oracle, both ways, by stepping both in lock-step from their initial
 * states (the machine purely: `machine.transition` with a scope that runs nothing). In every pair of
 * states reached, every event of the oracle's alphabet AND every sample event the machine file
 * offers is tried on both:
 * - the oracle allows it, the machine does not handle it → `missing`;
 * - the machine handles it, the oracle forbids it → `extra`;
 * - both take it but to different states, or the facts the oracle observes differ → `wrong`.
 * Exploration continues from every pair both sides accepted.
 */
import { type AnyEventObject, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { createPureScope, selectedEdges, stateValueKey } from '../../support/graph-model.js';
import type { Oracle } from './oracle.js';

export interface OracleSubject<S> {
  machine: AnyStateMachine;
  input: unknown;
  oracle: Oracle<S>;
  /** The machine file's own sample events (they may depend on the machine's context). */
  machineEvents: (snapshot: AnyMachineSnapshot) => readonly AnyEventObject[];
  /** The machine's guard-relevant state (bounds the exploration together with the oracle's key). */
  machineKey: (snapshot: AnyMachineSnapshot) => string;
  /** The machine's view of the oracle's observed facts. */
  observeMachine?: (snapshot: AnyMachineSnapshot) => Record<string, unknown>;
  /** Stop expanding pairs this many steps from the start (for machines whose keys are unbounded). */
  maxDepth?: number;
}

export interface Mismatch {
  kind: 'missing' | 'extra' | 'wrong';
  state: string;
  event: AnyEventObject;
  expected: string | null;
  actual: string | null;
  /** Events from the initial state to the state the mismatch was found in. */
  path: string[];
}

export interface Comparison {
  mismatches: Mismatch[];
  pairs: number;
  legal: number;
  illegal: number;
  oracleStates: Set<string>;
  machineStates: Set<string>;
}

const eventKey = (e: AnyEventObject) => JSON.stringify(e);

export function compareWithOracle<S>(subject: OracleSubject<S>): Comparison {
  const { machine, oracle } = subject;
  const scope = createPureScope(machine);
  const start = machine.getInitialSnapshot(scope, subject.input) as AnyMachineSnapshot;
  const result: Comparison = { mismatches: [], pairs: 0, legal: 0, illegal: 0, oracleStates: new Set(), machineStates: new Set() };
  const seen = new Set<string>();
  const queue: Array<{ o: S; m: AnyMachineSnapshot; path: string[] }> = [{ o: oracle.initial(), m: start, path: [] }];
  const observe = (o: S, m: AnyMachineSnapshot) =>
    JSON.stringify(oracle.observe?.(o) ?? {}) === JSON.stringify(subject.observeMachine?.(m) ?? {});
  while (queue.length > 0) {
    const { o, m, path } = queue.shift()!;
    const key = `${oracle.key(o)}|${subject.machineKey(m)}`;
    if (seen.has(key)) continue;
    seen.add(key);
    result.oracleStates.add(oracle.value(o));
    result.machineStates.add(stateValueKey(m.value));
    const events = new Map<string, AnyEventObject>();
    for (const e of [...oracle.alphabet(o), ...subject.machineEvents(m)]) events.set(eventKey(e), e);
    for (const e of events.values()) {
      result.pairs += 1;
      const expected = oracle.next(o, e);
      const handled = m.status === 'active' && selectedEdges(machine, m, e).length > 0;
      const state = oracle.value(o);
      if (expected === null) result.illegal += 1;
      else result.legal += 1;
      if (expected === null && !handled) continue;
      if (expected !== null && !handled) {
        result.mismatches.push({ kind: 'missing', state, event: e, expected: oracle.value(expected), actual: null, path });
        continue;
      }
      const after = machine.transition(m, e, scope) as AnyMachineSnapshot;
      const actual = stateValueKey(after.value);
      if (expected === null) {
        result.mismatches.push({ kind: 'extra', state, event: e, expected: null, actual, path });
        continue;
      }
      if (oracle.value(expected) !== actual || !observe(expected, after)) {
        result.mismatches.push({
          kind: 'wrong',
          state,
          event: e,
          expected: `${oracle.value(expected)} ${JSON.stringify(oracle.observe?.(expected) ?? {})}`,
          actual: `${actual} ${JSON.stringify(subject.observeMachine?.(after) ?? {})}`,
          path,
        });
        continue;
      }
      if (path.length + 1 <= (subject.maxDepth ?? Infinity)) queue.push({ o: expected, m: after, path: [...path, e.type] });
    }
  }
  return result;
}

export function formatMismatch(m: Mismatch): string {
  return `${m.kind}: ${m.state} + ${JSON.stringify(m.event)} → machine ${m.actual ?? 'rejects'}, spec ${m.expected ?? 'forbids'} (after ${m.path.join(' → ') || 'start'})`;
}
