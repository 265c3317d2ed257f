// Every cycle-free path @xstate/graph finds through each machine, checked against the machine's
// oracle (test/model/oracles/, from the spec): each step allowed, to the same state. Apart from
// machines.model.test.ts because of its size: with its `asking` flag the task machine has ~20k such
// paths (≈ 1–3.5 min on two shared cores), so CI runs this file once, on Node 24 (.ci/run), like
// test/chaos: it is pure (no I/O), nothing in it differs between Node versions.
import { describe, expect, it } from 'vitest';
import { createGraphModel, stateValueKey } from '../support/graph-model.js';
import { MACHINE_MODELS, type MachineModel } from './machine-models.js';

const spec = (m: MachineModel) => {
  const without = new Set(m.simplePathsWithout?.types ?? []);
  return { machine: m.machine, input: m.input('plan'), events: (s: Parameters<MachineModel['events']>[0]) => m.events(s).filter((e) => !without.has(e.type)), serialize: m.serialize, samplesOnly: without.size > 0 };
};

describe.each(MACHINE_MODELS)('simple paths: $name', (m) => {
  it('every simple path @xstate/graph finds is a sequence of steps the oracle allows, to the same states', () => {
    if (m.noSimplePaths) {
      console.log(`simple paths (${m.name}): not enumerated — ${m.noSimplePaths}`);
      return;
    }
    // An event left out must take no transition to a state the enumerated events do not take from there.
    for (const node of Object.values(m.machine.root.states)) {
      const targetsOf = (type: string) => (node.transitions.get(type) ?? []).flatMap((t) => (t.target ?? []).map((x) => x.key));
      const kept = new Set([...node.transitions.keys()].filter((type) => !m.simplePathsWithout?.types.includes(type)).flatMap(targetsOf));
      for (const type of m.simplePathsWithout?.types ?? []) for (const to of targetsOf(type)) expect(kept.has(to), `${node.key} --${type}--> ${to} is taken by no enumerated event`).toBe(true);
    }
    const paths = createGraphModel(spec(m)).getSimplePaths();
    let steps = 0;
    for (const path of paths) {
      let o = m.oracle.initial();
      for (const step of path.steps.slice(1)) {
        const next = m.oracle.next(o, step.event);
        expect(next, `${path.description}: oracle forbids ${step.event.type}`).not.toBeNull();
        expect(m.oracle.value(next), path.description).toBe(stateValueKey(step.state.value));
        o = next;
        steps += 1;
      }
    }
    const left = m.simplePathsWithout ? ` (without ${m.simplePathsWithout.types.join(', ')}: ${m.simplePathsWithout.why})` : '';
    console.log(`simple paths (${m.name}): ${paths.length} paths, ${steps} steps, all allowed by the oracle${left}`);
    expect(paths.length).toBeGreaterThan(0);
    // The task machine's 20,486 cycle-free paths (1,377 without its `asking` flag) take ≈ 3.5 min
    // on two shared cores, beyond the default 60 s; a correctness bound, not a timing assertion.
  }, 600_000);
});
