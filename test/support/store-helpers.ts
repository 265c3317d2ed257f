import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { DurableStore, PostgresStore, type Store, type StoreOptions } from '../../src/store/index.js';
import { createPostgresSqlStore } from '../../src/store/postgres-sql-store.js';
import { createSqliteStore } from '../../src/store/sqlite-store.js';

/**
 * Which engine the store tests run on: SQLite (the embedded store, by default), or (the projects of
 * vitest.config.ts that start a throwaway PostgreSQL) the SQL store on PostgreSQL (`postgres`), or the
 * earlier PostgreSQL engine with its replica in the test's dir (`postgres-replica`). `journal`: the journal
 * store of earlier versions, which that replica is built on.
 */
const ENGINES = ['sqlite', 'journal', 'postgres', 'postgres-replica'] as const;
export const STORE_ENGINE: (typeof ENGINES)[number] = ENGINES.find((e) => e === process.env['CCWEB_TEST_STORE_ENGINE']) ?? 'sqlite';
export const onPostgres = STORE_ENGINE === 'postgres' || STORE_ENGINE === 'postgres-replica';
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

type OpenOptions = StoreOptions & { failWrites?: () => boolean };

/**
 * Temp dirs for store tests, removed by `cleanup()`; on PostgreSQL each dir has its own database.
 * `journal`: the tests are about the journal store's own files (on PostgreSQL, its replica's), so they
 * get that engine instead of SQLite.
 */
export function storeDirs(kind: 'journal'): StoreDirs<DurableStore>;
export function storeDirs(): StoreDirs<Store>;
export function storeDirs(kind?: 'journal'): StoreDirs<Store> {
  const dirs: string[] = [];
  const stores: Store[] = [];
  const databaseOf = new Map<string, Promise<string>>();
  // The SQL store on PostgreSQL has no journal: the journal's tests run on the engine built on one.
  const engine = kind === 'journal' ? (STORE_ENGINE === 'sqlite' ? 'journal' : 'postgres-replica') : STORE_ENGINE;
  return {
    async dir(): Promise<string> {
      const dir = await mkdtemp(join(tmpdir(), 'ccweb-store-test-'));
      dirs.push(dir);
      return dir;
    },
    /** `failWrites`: while it answers true, every write to disk fails (an injected I/O error). */
    async open(options: OpenOptions): Promise<Store> {
      let store: Store;
      const { failWrites, ...rest } = options;
      const inject = () => {
        if (failWrites?.()) throw new Error('EIO: injected');
      };
      const journalOptions: StoreOptions = failWrites ? { ...rest, beforeJournalWrite: inject } : rest;
      if (engine === 'sqlite') {
        store = createSqliteStore({ dir: rest.dir, ...(rest.indexes ? { indexes: rest.indexes } : {}), ...(failWrites ? { beforeCommit: inject } : {}) });
      } else if (engine === 'postgres') {
        let url = databaseOf.get(rest.dir);
        if (!url) databaseOf.set(rest.dir, (url = freshDatabase()));
        if (failWrites) throw new Error('the SQL store on PostgreSQL has no injected write failures: the database fails on its own');
        store = createPostgresSqlStore({ url: await url, ...(rest.indexes ? { indexes: rest.indexes } : {}) });
      } else if (engine === 'postgres-replica') {
        let url = databaseOf.get(rest.dir);
        if (!url) databaseOf.set(rest.dir, (url = freshDatabase()));
        store = new PostgresStore({ ...journalOptions, url: await url, nodeId: 'test-node', version: 'test', writers: WRITERS });
      } else {
        store = new DurableStore(journalOptions);
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

export interface StoreDirs<S extends Store> {
  dir(): Promise<string>;
  /** The PostgreSQL store has the journal store's contract plus the replica's compaction controls its tests use. */
  open(options: OpenOptions): Promise<S>;
  cleanup(): Promise<void>;
}
