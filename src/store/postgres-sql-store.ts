// The store on PostgreSQL (CCWEB_DATABASE_URL), for one node or several: the same SqlStore as the
// embedded one, its tables in the database, every node reading and writing them directly.
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { acquireProcessLock } from '../data-dir/data-dir-lock.js';
import { describeDatabase } from './sql/database-url.js';
import type { NodeIdentity } from './sql/nodes.js';
import { PostgresConnection } from './sql/postgres-connection.js';
import { SqlStore, type SqlStoreOptions } from './sql/sql-store.js';
import type { CollectionName } from './types.js';

export interface PostgresSqlStoreOptions {
  url: string;
  indexes?: Partial<Record<CollectionName, string[]>>;
  /** This process as a node (nodes.ts); host and pid default to this machine's and process's. */
  node?: Omit<NonNullable<SqlStoreOptions['node']>, 'host' | 'pid'> & Partial<Pick<NodeIdentity, 'host' | 'pid'>>;
  /** Connections in the pool. */
  maxConnections?: number;
  /**
   * This node's folder in its data directory, locked while the store is open (as the embedded store
   * locks its own): two nodes started on one data directory would share workspaces and Codex homes, and
   * each would end the other's agent processes as leftovers at its start.
   */
  lockDir?: string;
}

/**
 * The store's transactions run statement after statement with nothing between them but this process's
 * own work, so one that waits this long for its client belongs to a process that is not running (paused,
 * cut off): the server rolls it back, and a lease it fenced can be taken over that much after it expired.
 */
export const IDLE_IN_TRANSACTION_MS = 5_000;

export function createPostgresSqlStore(options: PostgresSqlStoreOptions): SqlStore {
  const node = options.node;
  let release: (() => void) | undefined;
  return new SqlStore({
    dir: describeDatabase(options.url),
    ...(options.indexes ? { indexes: options.indexes } : {}),
    ...(node ? { node: { ...node, host: node.host ?? hostname(), pid: node.pid ?? process.pid } } : {}),
    connect: () => {
      if (options.lockDir !== undefined) {
        mkdirSync(options.lockDir, { recursive: true, mode: 0o700 });
        release = acquireProcessLock(options.lockDir);
      }
      return new PostgresConnection({
        url: options.url,
        ...(options.maxConnections !== undefined ? { max: options.maxConnections } : {}),
        ...(node ? { applicationName: `ccweb-gitea ${node.nodeId}` } : {}),
        idleInTransactionMs: IDLE_IN_TRANSACTION_MS,
      });
    },
    onClose: () => release?.(),
  });
}
