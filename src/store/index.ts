import { DurableStore, type StoreOptions } from './durable-store.js';
import { PostgresStore, type PostgresStoreOptions } from './postgres/postgres-store.js';
import type { Store } from './types.js';

export * from './types.js';
export { DurableStore, type StoreOptions, type DurableStoreStats } from './durable-store.js';
export { PostgresStore, type PostgresStoreOptions, type PostgresStoreStats } from './postgres/postgres-store.js';
export { JournalCorruptionError } from './journal-files.mjs';
export { describeDatabase, isPostgresUrl } from './postgres/database-url.js';
export { probeDatabase, type DatabaseProbe } from './postgres/probe-database.js';
export type { NodeStatus } from './postgres/log-writer.js';
export { copyEmbeddedStore, storeDigest, type CopySummary } from './postgres/copy-embedded.js';

export function createStore(options: StoreOptions): DurableStore;
export function createStore(options: PostgresStoreOptions): PostgresStore;
export function createStore(options: StoreOptions | PostgresStoreOptions): Store;
/** The embedded store (the default), or PostgreSQL when a database URL is given. */
export function createStore(options: StoreOptions | PostgresStoreOptions): Store {
  return 'url' in options ? new PostgresStore(options) : new DurableStore(options);
}
