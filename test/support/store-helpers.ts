import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import type { CollectionName, Store } from '../../src/store/index.js';
import { createPostgresSqlStore } from '../../src/store/postgres-sql-store.js';
import { createSqliteStore } from '../../src/store/sqlite-store.js';

/**
 * Which engine the store tests run on: SQLite (the embedded store, by default), or (the
 * `store-on-postgres` project of vitest.config.ts, which starts a throwaway PostgreSQL) the SQL store on
 * PostgreSQL.
 */
const ENGINES = ['sqlite', 'postgres'] as const;
export const STORE_ENGINE: (typeof ENGINES)[number] = ENGINES.find((e) => e === process.env['CCWEB_TEST_STORE_ENGINE']) ?? 'sqlite';

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

interface OpenOptions {
  dir: string;
  indexes?: Partial<Record<CollectionName, string[]>>;
  /** While it answers true, every commit fails (an injected I/O error; SQLite only). */
  failWrites?: () => boolean;
}

/** Temp dirs for store tests, removed by `cleanup()`; on PostgreSQL each dir has its own database. */
export function storeDirs(): StoreDirs {
  const dirs: string[] = [];
  const stores: Store[] = [];
  const databaseOf = new Map<string, Promise<string>>();
  return {
    async dir(): Promise<string> {
      const dir = await mkdtemp(join(tmpdir(), 'ccweb-store-test-'));
      dirs.push(dir);
      return dir;
    },
    async open(options: OpenOptions): Promise<Store> {
      let store: Store;
      const { failWrites, dir, indexes } = options;
      if (STORE_ENGINE === 'sqlite') {
        const inject = () => {
          if (failWrites?.()) throw new Error('EIO: injected');
        };
        store = createSqliteStore({ dir, ...(indexes ? { indexes } : {}), ...(failWrites ? { beforeCommit: inject } : {}) });
      } else {
        let url = databaseOf.get(dir);
        if (!url) databaseOf.set(dir, (url = freshDatabase()));
        if (failWrites) throw new Error('the SQL store on PostgreSQL has no injected write failures: the database fails on its own');
        store = createPostgresSqlStore({ url: await url, ...(indexes ? { indexes } : {}) });
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

export interface StoreDirs {
  dir(): Promise<string>;
  open(options: OpenOptions): Promise<Store>;
  cleanup(): Promise<void>;
}
