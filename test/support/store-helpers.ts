import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { createStore, type DurableStore, type StoreOptions } from '../../src/store/index.js';

/**
 * Which engine the store tests run on: the embedded store, or (the `store-on-postgres` project of
 * vitest.config.ts, which starts a throwaway PostgreSQL) PostgreSQL with its replica in the test's dir.
 */
export const STORE_ENGINE: 'embedded' | 'postgres' = process.env['CCWEB_TEST_STORE_ENGINE'] === 'postgres' ? 'postgres' : 'embedded';
export const onPostgres = STORE_ENGINE === 'postgres';
/**
 * On PostgreSQL, whether the store under test shares the writes with other nodes (`writers: 'many'`:
 * every body runs under the commit lock, later than its call): the `store-on-postgres-many-writers`
 * project runs the contract's tests that way.
 */
const WRITERS: 'one' | 'many' = process.env['CCWEB_TEST_STORE_WRITERS'] === 'many' ? 'many' : 'one';

let databases = 0;

/** A new empty database on the run's PostgreSQL; its URL. */
export async function freshDatabase(): Promise<string> {
  const server = inject('postgresUrl' as never) as string | undefined;
  if (!server) throw new Error('no PostgreSQL for this run: the store-on-postgres project starts one (test/support/postgres-global-setup.ts)');
  const name = `t_${process.pid}_${++databases}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Temp dirs for store tests, removed by `cleanup()`; on PostgreSQL each dir has its own database. */
export function storeDirs() {
  const dirs: string[] = [];
  const stores: DurableStore[] = [];
  const databaseOf = new Map<string, Promise<string>>();
  return {
    async dir(): Promise<string> {
      const dir = await mkdtemp(join(tmpdir(), 'ccweb-store-test-'));
      dirs.push(dir);
      return dir;
    },
    async open(options: StoreOptions): Promise<DurableStore> {
      let store: DurableStore;
      if (onPostgres) {
        let url = databaseOf.get(options.dir);
        if (!url) databaseOf.set(options.dir, (url = freshDatabase()));
        // Typed as the embedded store the tests were written for: the PostgreSQL store has the same
        // contract plus the replica's compaction controls they use.
        store = createStore({ ...options, url: await url, nodeId: 'test-node', version: 'test', writers: WRITERS }) as unknown as DurableStore;
      } else {
        store = createStore(options);
      }
      stores.push(store);
      await store.open();
      return store;
    },
    async cleanup(): Promise<void> {
      for (const store of stores.splice(0)) await store.close().catch(() => {});
      for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
      databaseOf.clear();
    },
  };
}
