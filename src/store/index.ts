import { DurableStore, type StoreOptions } from './durable-store.js';

export * from './types.js';
export { DurableStore, type StoreOptions, type DurableStoreStats } from './durable-store.js';
export { JournalCorruptionError } from './journal-files.mjs';

export function createStore(options: StoreOptions): DurableStore {
  return new DurableStore(options);
}
