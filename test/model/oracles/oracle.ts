/**
 * An oracle is a machine's behaviour written from the specification, not from the machine: its own
 * states, its own event alphabet (with the payloads both sides of every spec rule need), and a rule
 * `next(state, event)` that says where the spec sends the machine, or `null` when the spec forbids
 * the event there (the runtime must then reject it and leave an alert in the audit log).
 *
 * Adding a state (e.g. the change-delivery `publishing` task state) is an edit in one place: the
 * oracle's `states` list and the rules of the states around it in `next`.
 */
import type { AnyEventObject } from 'xstate';

export interface Oracle<S> {
  /** Name used in reports; the machine's model name. */
  name: string;
  /** Where the rules come from (printed with the report). */
  source: string;
  /** Every state the spec names for this machine. */
  states: readonly string[];
  initial(): S;
  /** The events to try in `s`, legal or not: every event type of the machine, with payload variants. */
  alphabet(s: S): AnyEventObject[];
  /** The spec's next state, or null: the event is illegal here. */
  next(s: S, e: AnyEventObject): S | null;
  /** The machine state value the spec expects. */
  value(s: S): string;
  /** Bounded identity of `s` for exploration (drop ids and times the rules only compare). */
  key(s: S): string;
  /** Observable facts the spec fixes (e.g. which lease holds the lock), compared with the machine's. */
  observe?(s: S): Record<string, unknown>;
}
