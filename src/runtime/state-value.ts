import type { StateValue } from 'xstate';

/** `running` for flat machines, `a.b` for nested ones: the form stored in `state` fields and audit events. */
export function stateValueToString(value: StateValue): string {
  if (typeof value === 'string') return value;
  const entries = Object.entries(value);
  if (entries.length !== 1) return JSON.stringify(value);
  const [key, child] = entries[0]!;
  return child === undefined ? key : `${key}.${stateValueToString(child as StateValue)}`;
}
