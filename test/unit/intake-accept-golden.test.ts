// intake.accept/1 is a frozen stored-data format (src/upgrade/intake-accept-v1.ts): journals an
// earlier version wrote are read through it, so its expansion must never change: this compares it with
// what it produced when it was introduced.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expandDerived } from '../../src/upgrade/intake-accept-v1.js';

const golden = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/store/intake-accept-v1.golden.json'), 'utf8')) as {
  cases: Array<{ payload: Record<string, unknown>; ops: unknown[] }>;
};

describe('derived-record format intake.accept/1 is frozen', () => {
  it.each(golden.cases.map((c, i) => [i, c] as const))('case %i expands exactly as when the format was introduced', (_i, c) => {
    // Through JSON: the journal holds the payload as JSON, and the ops are compared as stored values.
    const ops = JSON.parse(JSON.stringify(expandDerived('intake.accept/1', structuredClone(c.payload))));
    expect(ops).toEqual(c.ops);
  });
});
