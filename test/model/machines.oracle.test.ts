// Every machine against its independent oracle (test/model/oracles/, written from the spec), both
// ways: no transition the spec requires is missing, none it forbids exists, every target and every
// fact the oracle observes agrees. The runtime side (illegal events rejected and audited) is in
// machines.model.test.ts, which replays @xstate/graph's paths with the oracle in lock-step.
import { describe, expect, it } from 'vitest';
import { definedStates } from '../support/graph-model.js';
import { MACHINE_MODELS } from './machine-models.js';
import { compareWithOracle, formatMismatch } from './oracles/compare.js';

describe.each(MACHINE_MODELS)('oracle: $name', (m) => {
  it('has exactly the states the spec names', () => {
    expect(definedStates(m.machine).sort()).toEqual([...m.oracle.states].sort());
  });

  it('takes exactly the transitions the spec allows, to the states it names', () => {
    const c = compareWithOracle({
      machine: m.machine,
      input: m.input('oracle'),
      oracle: m.oracle,
      machineEvents: m.events,
      machineKey: m.serialize,
      maxDepth: m.compareDepth,
      observeMachine: m.observeMachine,
    });
    console.log(
      `oracle (${m.name}): ${c.pairs} (state, event) pairs compared — ${c.legal} legal, ${c.illegal} illegal; ` +
        `missing ${c.mismatches.filter((x) => x.kind === 'missing').length}, extra ${c.mismatches.filter((x) => x.kind === 'extra').length}, ` +
        `wrong ${c.mismatches.filter((x) => x.kind === 'wrong').length}; spec states reached ${c.oracleStates.size}/${m.oracle.states.length} [${m.oracle.source}]`,
    );
    expect(c.mismatches.slice(0, 12).map(formatMismatch), `${c.mismatches.length} mismatches with the oracle (first 12)`).toEqual([]);
    // Every state the spec names is reached by the comparison, so no rule went untried.
    expect([...c.oracleStates].sort()).toEqual([...m.oracle.states].sort());
    expect(c.illegal).toBeGreaterThan(0);
  });
});
