import type { AnyStateMachine } from 'xstate';
import * as machines from '../../machines/index.js';

/**
 * Every machine `machines/index.ts` exports, found by shape rather than by a list kept here, so a
 * machine added there (e.g. an app-server machine) shows up in the visualizer and the exports.
 */
export function allMachines(): AnyStateMachine[] {
  const found = new Map<string, AnyStateMachine>();
  for (const value of Object.values(machines) as unknown[]) {
    if (isMachine(value) && !found.has(value.id)) found.set(value.id, value);
  }
  return [...found.values()];
}

export function isMachine(value: unknown): value is AnyStateMachine {
  return (
    typeof value === 'object' &&
    value !== null &&
    'root' in value &&
    'config' in value &&
    typeof (value as { getInitialSnapshot?: unknown }).getInitialSnapshot === 'function'
  );
}

/** `replyVerifier` → `reply-verifier`: the file name of a machine's exports. */
export function exportName(machineId: string): string {
  return machineId.replace(/([a-z0-9])([A-Z])/g, '$1-$2').replace(/[^A-Za-z0-9-]+/g, '-').toLowerCase();
}
