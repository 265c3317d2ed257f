// An insert of a key found in neither tier skips the cold tier's supersede step when applied; a key
// that was archived and is deleted and inserted again in one transaction must still supersede the
// archived copy (else the old record would stay listed as archived beside the new hot one).
import { afterEach, describe, expect, it } from 'vitest';
import { storeDirs } from '../support/store-helpers.js';

const env = storeDirs('journal');
afterEach(() => env.cleanup());

describe('store: inserts and the cold tier', () => {
  for (const compacted of [false, true]) {
    it(`delete + insert of an archived key in one transaction supersedes the archived copy (${compacted ? 'in a cold file' : 'pending'})`, async () => {
      const dir = await env.dir();
      const store = await env.open({ dir });
      await store.transact(async (tx) => {
        await tx.insert('tasks', 'k', { v: 1 });
        await tx.archive('tasks', 'k');
        await tx.insert('tasks', 'other', { v: 1 });
        await tx.archive('tasks', 'other');
      });
      if (compacted) await store.compact();
      expect(await store.archivedCount('tasks')).toBe(2);
      await store.transact(async (tx) => {
        await tx.delete('tasks', 'k');
        await tx.insert('tasks', 'k', { v: 2 });
        await tx.insert('tasks', 'new', { v: 3 });
      });
      expect(await store.get('tasks', 'k')).toEqual({ v: 2 });
      expect(await store.archivedCount('tasks')).toBe(1);
      expect(await store.count('tasks')).toBe(2);
      await store.close();
      const reopened = await env.open({ dir });
      expect(await reopened.get('tasks', 'k')).toEqual({ v: 2 });
      expect(await reopened.archivedCount('tasks')).toBe(1);
      const archived: unknown[] = [];
      for await (const r of reopened.scanArchived('tasks')) archived.push(r);
      expect(archived).toEqual([{ v: 1 }]);
    });
  }
});
