// What opening a store decides before any I/O: which files are crash leftovers, and what to do with
// each journal entry at replay.
import { describe, expect, it } from 'vitest';
import { compactionLeftovers, replayStep, tempLeftovers } from '../../src/store/load-store.js';

describe('store open: leftovers and replay', () => {
  it('temp files of a durable write whose rename never happened', () => {
    expect(tempLeftovers(['.checkpoint.json.123.tmp', 'checkpoint.json', '.hidden', 'x.tmp'])).toEqual(['.checkpoint.json.123.tmp']);
  });

  it('archives and cold files (with their indexes) the checkpoint does not list; never journal or checkpoint', () => {
    const a1 = 'audit-0000000000000001-0000000000000009.ndjson';
    const a2 = 'audit-0000000000000010-0000000000000020.ndjson';
    const c1 = 'cold-0000000000000001-0000000000000005.ndjson';
    const c2 = 'cold-0000000000000006-0000000000000008.ndjson';
    const names = [a1, a1.replace('.ndjson', '.idx'), a2, a2.replace('.ndjson', '.idx'), c1, c1.replace('.ndjson', '.idx'), c2, c2.replace('.ndjson', '.idx'), 'checkpoint.json', 'journal-0000000000000001.ndjson'];
    expect(compactionLeftovers(names, [a1, c1])).toEqual([a2, a2.replace('.ndjson', '.idx'), c2, c2.replace('.ndjson', '.idx')]);
    expect(compactionLeftovers(names, [a1, a2, c1, c2])).toEqual([]);
  });

  it('an entry at or below what is applied is skipped (already in the checkpoint), the next is applied, anything else is a gap', () => {
    expect(replayStep(5, 7)).toBe('skip');
    expect(replayStep(7, 7)).toBe('skip');
    expect(replayStep(8, 7)).toBe('apply');
    expect(replayStep(9, 7)).toBe('gap');
  });
});
