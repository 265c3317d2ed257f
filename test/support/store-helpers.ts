import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createStore, type DurableStore, type StoreOptions } from '../../src/store/index.js';

/** Temp dirs for store tests, removed by `cleanup()`. */
export function storeDirs() {
  const dirs: string[] = [];
  const stores: DurableStore[] = [];
  return {
    async dir(): Promise<string> {
      const dir = await mkdtemp(join(tmpdir(), 'ccweb-store-test-'));
      dirs.push(dir);
      return dir;
    },
    async open(options: StoreOptions): Promise<DurableStore> {
      const store = createStore(options);
      stores.push(store);
      await store.open();
      return store;
    },
    async cleanup(): Promise<void> {
      for (const store of stores.splice(0)) await store.close().catch(() => {});
      for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
    },
  };
}
