// The store on PostgreSQL (CCWEB_DATABASE_URL), for one node or several: the same SqlStore as the
// embedded one, its tables in the database, every node reading and writing them directly.
import { hostname } from 'node:os';
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
}

/**
 * The store's transactions run statement after statement with nothing between them but this process's
 * own work, so one that waits this long for its client belongs to a process that is not running (paused,
 * cut off): the server rolls it back, and a lease it fenced can be taken over that much after it expired.
 */
export const IDLE_IN_TRANSACTION_MS = 5_000;

export function createPostgresSqlStore(options: PostgresSqlStoreOptions): SqlStore {
  const node = options.node;
  return new SqlStore({
    dir: describeDatabase(options.url),
    ...(options.indexes ? { indexes: options.indexes } : {}),
    ...(node ? { node: { ...node, host: node.host ?? hostname(), pid: node.pid ?? process.pid } } : {}),
    connect: () =>
      new PostgresConnection({
        url: options.url,
        ...(options.maxConnections !== undefined ? { max: options.maxConnections } : {}),
        ...(node ? { applicationName: `ccweb-gitea ${node.nodeId}` } : {}),
        idleInTransactionMs: IDLE_IN_TRANSACTION_MS,
      }),
  });
}
