// The snapshots an actor goes through when it is created with events applied purely (what
// `ActorRuntime.createInTx` persists), computed with xstate — or, for a kind that declares
// `templateInput`, once per event list with stand-ins for those input fields and then reused
// with the real values put in. Intake creates every task this way (received → queued), so this
// takes xstate's machine walk off the per-comment path.
//
// xstate's public pure functions compute the snapshots (`initialTransition`, `transition`: they
// return the next snapshot and the actions it would run, and run none). They build a throwaway
// inert actor per call; with the templates that happens a few times per kind and event list, not
// per comment (measured: docs/profile-webhook.md, "machine-facts on xstate's public API").
import { initialTransition, transition, type AnyMachineSnapshot, type AnyStateMachine, type EventObject } from 'xstate';
import { stateValueToString } from './state-value.js';

export interface CreationStep {
  toState: string;
  /** xstate's snapshot, or (from a template) the persisted form, which has the same `value`, `status` and `context`. */
  snapshot: AnyMachineSnapshot;
  persisted: unknown;
  event: EventObject | null;
}

/** What the runtime needs to know of a kind to compute its creation. */
export interface CreationKind {
  kind: string;
  machine: AnyStateMachine;
  /**
   * Input fields that the machine's initial context takes over verbatim and that neither the
   * context factory nor the creation events otherwise look at (e.g. a task's `taskId`). A context
   * that derives a value from such a field is detected (the template is not used); a guard or
   * action of a creation event that branches on it is not: such a kind must not declare it.
   */
  templateInput?: readonly string[];
}

/** The creation computed by xstate: initial snapshot, then each event (an illegal one throws). */
export function computeCreationSteps(
  kind: CreationKind,
  input: unknown,
  events: readonly EventObject[],
  actorId: string,
): CreationStep[] {
  let snapshot = initialTransition(kind.machine, input)[0] as AnyMachineSnapshot;
  let state = stateValueToString(snapshot.value);
  const steps: CreationStep[] = [{ toState: state, snapshot, persisted: kind.machine.getPersistedSnapshot(snapshot), event: null }];
  for (const event of events) {
    if (!snapshot.can(event)) throw new Error(`event ${event.type} is not legal in ${state} for ${actorId}`);
    snapshot = transition(kind.machine, snapshot, event)[0] as AnyMachineSnapshot;
    state = stateValueToString(snapshot.value);
    steps.push({ toState: state, snapshot, persisted: kind.machine.getPersistedSnapshot(snapshot), event });
  }
  return steps;
}

const MAX_TEMPLATES = 64;

interface Template {
  /** JSON of [toState, persisted][] with each templated field's value replaced by its stand-in. */
  json: string;
  stand: Record<string, string>;
  events: readonly EventObject[];
  /** Checked against xstate once, on first use with real values. */
  verified: boolean;
}

/** Caches creations per kind, event list and non-templated input; falls back to xstate whenever it cannot vouch for a template. */
export class CreationTemplates {
  readonly #templates = new Map<string, Template | null>();
  #nonce = 0;

  steps(kind: CreationKind, input: unknown, events: readonly EventObject[], actorId: string): CreationStep[] {
    const fields = kind.templateInput;
    if (!fields || fields.length === 0 || !isPlainObject(input)) return computeCreationSteps(kind, input, events, actorId);
    const values: Record<string, unknown> = {};
    const rest: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(input)) {
      if (fields.includes(key)) values[key] = value;
      else rest[key] = value;
    }
    if (fields.some((f) => typeof values[f] !== 'string')) return computeCreationSteps(kind, input, events, actorId);
    const key = `${kind.kind}\u0000${JSON.stringify(events)}\u0000${JSON.stringify(rest)}`;
    let template = this.#templates.get(key);
    if (template === null) return computeCreationSteps(kind, input, events, actorId);
    if (template === undefined) {
      // Bounded: a kind with ever-new event lists or other input gains nothing from caching them.
      if (this.#templates.size >= MAX_TEMPLATES) return computeCreationSteps(kind, input, events, actorId);
      template = this.#build(kind, rest, fields, events, actorId);
      this.#templates.set(key, template);
      if (template === null) return computeCreationSteps(kind, input, events, actorId);
    }
    const steps = instantiate(template, values);
    if (!template.verified) {
      const real = computeCreationSteps(kind, input, events, actorId);
      const same =
        steps !== undefined &&
        JSON.stringify(real.map((s) => [s.toState, s.persisted])) === JSON.stringify(steps.map((s) => [s.toState, s.persisted]));
      if (!same) {
        this.#templates.set(key, null);
        return real;
      }
      template.verified = true;
      return real;
    }
    return steps ?? computeCreationSteps(kind, input, events, actorId);
  }

  #build(
    kind: CreationKind,
    rest: Record<string, unknown>,
    fields: readonly string[],
    events: readonly EventObject[],
    actorId: string,
  ): Template | null {
    const stand: Record<string, string> = {};
    for (const field of fields) stand[field] = `@@ccweb-template-${field}-${++this.#nonce}-${Math.random().toString(36).slice(2)}@@`;
    const steps = computeCreationSteps(kind, { ...rest, ...stand }, events, actorId);
    const json = JSON.stringify(steps.map((s) => [s.toState, s.persisted]));
    // A stand-in must appear only as whole string values, or substituting it could not be exact.
    for (const s of Object.values(stand)) {
      if (json.split(s).length !== json.split(JSON.stringify(s)).length) return null;
    }
    return { json, stand, events, verified: false };
  }
}

function instantiate(template: Template, values: Record<string, unknown>): CreationStep[] | undefined {
  let json = template.json;
  for (const [field, stand] of Object.entries(template.stand)) json = json.split(JSON.stringify(stand)).join(JSON.stringify(values[field]));
  const parsed = JSON.parse(json) as Array<[string, unknown]>;
  if (parsed.length !== template.events.length + 1) return undefined;
  return parsed.map(([toState, persisted], i) => ({
    toState,
    snapshot: persisted as AnyMachineSnapshot,
    persisted,
    event: i === 0 ? null : template.events[i - 1]!,
  }));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}
