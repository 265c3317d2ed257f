// frozenJsonCopy: the in-memory copy of what the journal holds must be exactly what replay would
// parse from it, deep-frozen and unshared with the writer's objects, whether it was copied (plain
// data) or parsed (anything JSON changes).
import { afterEach, describe, expect, it } from 'vitest';
import { frozenJsonCopy } from '../../src/store/plain-json.js';
import { storeDirs } from '../support/store-helpers.js';

const env = storeDirs();
afterEach(() => env.cleanup());

function isDeepFrozen(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return true;
  return Object.isFrozen(value) && Object.values(value).every(isDeepFrozen);
}

class Point {
  constructor(
    public x: number,
    public y: number,
  ) {}
}

const CASES: Record<string, unknown> = {
  plain: { a: 1, b: 'two', c: true, d: null, e: [1, 'x', { f: [] }], g: { h: { i: 'deep' } }, '10': 'int key', '2': 'order' },
  undefinedField: { a: 1, b: undefined, c: { d: undefined } },
  undefinedInArray: { list: [1, undefined, 3] },
  date: { at: new Date('2026-01-02T03:04:05.006Z') },
  notFinite: { nan: Number.NaN, inf: Number.POSITIVE_INFINITY },
  negativeZero: { z: -0 },
  classInstance: { p: new Point(1, 2) },
  toJSON: { v: { toJSON: () => 'custom' } },
  holes: { list: [1, , 3] }, // eslint-disable-line no-sparse-arrays
  functionValue: { f: () => 1, keep: 'x' },
  symbolKey: { [Symbol('s')]: 1, keep: 'x' },
  nullProto: Object.assign(Object.create(null) as object, { a: 1 }),
};

describe('frozenJsonCopy', () => {
  for (const [name, value] of Object.entries(CASES)) {
    it(`equals JSON.parse(JSON.stringify(value)), deep-frozen: ${name}`, () => {
      const json = JSON.stringify(value);
      const copy = frozenJsonCopy(value, json);
      expect(copy).toStrictEqual(JSON.parse(json));
      expect(JSON.stringify(copy)).toBe(json);
      expect(isDeepFrozen(copy)).toBe(true);
    });
  }

  it('shares no object with the value it was made from', () => {
    const nested = { list: [{ n: 1 }], inner: { s: 'x' } };
    const value = { nested };
    const copy = frozenJsonCopy(value, JSON.stringify(value));
    nested.list[0]!.n = 2;
    nested.inner.s = 'changed';
    nested.list.push({ n: 3 });
    expect(copy).toStrictEqual({ nested: { list: [{ n: 1 }], inner: { s: 'x' } } });
    expect(Object.isFrozen(nested)).toBe(false);
  });

  it('the store keeps in memory exactly what a reopen reads back from the journal', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    const records: Record<string, Record<string, unknown>> = {
      plain: { a: 1, nested: { list: [1, 2, { b: 'c' }] } },
      odd: { at: new Date('2026-01-02T03:04:05.006Z'), gone: undefined, nan: Number.NaN, z: -0 },
    };
    const caller = { metadata: { list: ['x'] } };
    await store.transact(async (tx) => {
      for (const [key, record] of Object.entries(records)) await tx.insert('tasks', key, record);
      await tx.appendAudit({ action: 'test.plain', actor: 'test', metadata: caller.metadata });
    });
    caller.metadata.list.push('changed after commit');
    const inMemory = { plain: await store.get('tasks', 'plain'), odd: await store.get('tasks', 'odd'), audit: await store.audit() };
    expect(inMemory.audit[0]!.metadata).toStrictEqual({ list: ['x'] });
    await store.close();
    const reopened = await env.open({ dir });
    expect({ plain: await reopened.get('tasks', 'plain'), odd: await reopened.get('tasks', 'odd'), audit: await reopened.audit() }).toStrictEqual(inMemory);
    for (const value of [inMemory.plain, inMemory.odd, ...inMemory.audit]) expect(isDeepFrozen(value)).toBe(true);
  });
});
