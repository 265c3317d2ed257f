// An insert of a key found in neither tier skips the cold tier's supersede step when applied; a key
// that was archived and is deleted and inserted again in one transaction must still supersede the
// archived copy (else the old record would stay listed as archived beside the new hot one).
import { afterEach, describe, expect, it } from 'vitest';
import { storeDirs } from '../support/store-helpers.js';

const env = storeDirs();
afterEach(() => env.cleanup());

describe('store: inserts and the cold tier', () => {
  for (const compacted of [false, true]) {
    it(`delete + insert of an archived key in one transaction supersedes the archived copy (${compacted ? 'in a cold file' : 'pending'})`, async () => {
      const dir = await env.dir();
      const store = await env.open({ dir });
      await store.transact((tx) => {
        tx.insert('tasks', 'k', { v: 1 });
        tx.archive('tasks', 'k');
        tx.insert('tasks', 'other', { v: 1 });
        tx.archive('tasks', 'other');
      });
      if (compacted) await store.compact();
      expect(store.archivedCount('tasks')).toBe(2);
      await store.transact((tx) => {
        tx.delete('tasks', 'k');
        tx.insert('tasks', 'k', { v: 2 });
        tx.insert('tasks', 'new', { v: 3 });
      });
      expect(store.get('tasks', 'k')).toEqual({ v: 2 });
      expect(store.archivedCount('tasks')).toBe(1);
      expect(store.count('tasks')).toBe(2);
      await store.close();
      const reopened = await env.open({ dir });
      expect(reopened.get('tasks', 'k')).toEqual({ v: 2 });
      expect(reopened.archivedCount('tasks')).toBe(1);
      expect([...reopened.scanArchived('tasks')]).toEqual([{ v: 1 }]);
    });
  }
});
