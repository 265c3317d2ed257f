// IndexBucket (src/store/index-bucket.ts) holds the keys one index value names and hands them out in
// insertion order — as a Set while small, split once large (so a bucket that grows with every request
// never doubles whole), and after keys were added out of order (a record moving into the bucket keeps
// its old insertion number).
import { describe, expect, it } from 'vitest';
import { IndexBucket } from '../../src/store/index-bucket.js';
import { seededRandom } from '../support/seeded-random.js';

describe('IndexBucket', () => {
  it('answers as a set ordered by insertion number under random adds and deletes, across its split', () => {
    const random = seededRandom(20);
    const ords = new Map<string, number>(); // the collection: key → insertion number
    const ordOf = (key: string) => ords.get(key)!;
    let nextOrd = 0;
    const model = new Set<string>();
    const bucket = new IndexBucket('k0', 0, 64);
    ords.set('k0', nextOrd++);
    model.add('k0');
    let sawSplit = false;
    for (let step = 0; step < 6000; step++) {
      const r = random();
      if (r < 0.55) {
        // A new record in the bucket.
        const key = `k${nextOrd}`;
        ords.set(key, nextOrd++);
        bucket.add(key, ordOf(key), ordOf);
        model.add(key);
      } else if (r < 0.75) {
        // An older record moves in (out of order), or one already there is added again.
        const key = `k${Math.floor(random() * nextOrd)}`;
        if (!ords.has(key)) continue;
        bucket.add(key, ordOf(key), ordOf);
        model.add(key);
      } else if (model.size > 1) {
        const key = [...model][Math.floor(random() * model.size)]!;
        bucket.delete(key);
        model.delete(key);
      }
      sawSplit ||= bucket.split;
      if (step % 97 === 0 || step === 5999) {
        expect(bucket.size).toBe(model.size);
        expect([...bucket.keys(ordOf)]).toEqual([...model].sort((a, b) => ordOf(a) - ordOf(b)));
        const probe = `k${Math.floor(random() * nextOrd)}`;
        expect(bucket.has(probe)).toBe(model.has(probe));
      }
    }
    expect(sawSplit).toBe(true);
    // Then most keys leave (the deleted slots are dropped once they outnumber the rest) and new ones come.
    for (let step = 0; step < 4000; step++) {
      if (random() < 0.8 && model.size > 1) {
        const key = [...model][Math.floor(random() * model.size)]!;
        bucket.delete(key);
        model.delete(key);
      } else {
        const key = random() < 0.5 ? `k${nextOrd}` : `k${Math.floor(random() * nextOrd)}`;
        if (key === `k${nextOrd}`) ords.set(key, nextOrd++);
        bucket.add(key, ordOf(key), ordOf);
        model.add(key);
      }
      if (step % 89 === 0 || step === 3999) {
        expect(bucket.size).toBe(model.size);
        expect([...bucket.keys(ordOf)]).toEqual([...model].sort((a, b) => ordOf(a) - ordOf(b)));
      }
    }
  });

  it('stays one Set until it passes its split size', () => {
    const ordOf = (key: string) => Number(key.slice(1));
    const bucket = new IndexBucket('k0', 0);
    for (let i = 1; i < 2048; i++) bucket.add(`k${i}`, i, ordOf);
    expect(bucket.size).toBe(2048);
    expect(bucket.split).toBe(false);
    bucket.add('k2048', 2048, ordOf);
    expect(bucket.split).toBe(true);
    expect([...bucket.keys(ordOf)]).toEqual(Array.from({ length: 2049 }, (_, i) => `k${i}`));
  });
});
