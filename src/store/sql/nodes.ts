// Each node's row in the database: which process it is (host, pid, url, version), when it started and
// its last heartbeat, both on the database's clock. One node id belongs to one live process: a second
// one started with it is refused, naming the first, since two processes under one id would take each
// other's leases for their own.
import { StoreError } from '../types.js';
import { databaseNow, databaseNowMinusMs } from './schema.js';
import type { Row, SqlConnection } from './sql-connection.js';

export interface NodeIdentity {
  nodeId: string;
  host: string;
  pid: number;
  /** Where the node serves HTTP, for the operator reading the refusal or the nodes list. */
  url: string | null;
  version: string;
  /** How often the row's heartbeat is written; three missed ones and the id is free again. */
  heartbeatMs: number;
}

export interface NodeRow {
  nodeId: string;
  host: string;
  pid: number;
  url: string | null;
  version: string;
  state: 'running' | 'stopped';
  startedAt: string;
  heartbeatAt: string;
  /** In a list: the database's clock when it was read, to judge the heartbeats by (a node's own clock may be wrong). */
  listedAt?: string;
}

export class NodeIdInUseError extends StoreError {
  constructor(readonly other: NodeRow) {
    super(
      'node_id_in_use',
      `node id ${other.nodeId} is in use by a running process: host ${other.host}, pid ${other.pid}, url ${other.url ?? 'none'}, last heartbeat ${other.heartbeatAt} (database clock)`,
    );
  }
}

/** Missed heartbeats after which a node's row no longer counts as a live process. */
const LIVE_BEATS = 3;
const COLUMNS = 'node_id, host, pid, url, version, state, started_at, heartbeat_at';

function iso(value: unknown): string {
  return value instanceof Date ? value.toISOString() : String(value);
}

function nodeRow(row: Row): NodeRow {
  return {
    nodeId: String(row['node_id']),
    host: String(row['host']),
    pid: Number(row['pid']),
    url: row['url'] === null ? null : String(row['url']),
    version: String(row['version']),
    state: row['state'] === 'running' ? 'running' : 'stopped',
    startedAt: iso(row['started_at']),
    heartbeatAt: iso(row['heartbeat_at']),
  };
}

/** Whether a process with this pid runs on this host (a pid that is not, or that is ours, is no other live process here). */
function otherProcessRuns(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the node id for this process (`incarnation` names it), or throws NodeIdInUseError naming the
 * process that holds it: a row still running whose heartbeat is recent — unless it was written on this
 * host by a process that no longer runs (this node's previous life, killed before it could say it
 * stopped, and restarted by its supervisor at once).
 */
export async function registerNode(connection: SqlConnection, node: NodeIdentity, incarnation: string): Promise<void> {
  const dialect = connection.dialect;
  const now = databaseNow(dialect);
  await connection.transaction(async (session) => {
    // The row exists first, so that two processes starting at once wait for each other on its lock.
    await session.run(
      `INSERT INTO nodes (node_id, incarnation, host, pid, url, version, state, started_at, heartbeat_at) VALUES (?, '', ?, ?, ?, ?, 'stopped', ${now}, ${now}) ON CONFLICT (node_id) DO NOTHING`,
      [node.nodeId, node.host, node.pid, node.url, node.version],
    );
    const [row] = await session.all(
      `SELECT ${COLUMNS}, CASE WHEN heartbeat_at > ${databaseNowMinusMs(dialect)} THEN 1 ELSE 0 END AS live FROM nodes WHERE node_id = ?${dialect === 'postgres' ? ' FOR UPDATE' : ''}`,
      [LIVE_BEATS * node.heartbeatMs, node.nodeId],
    );
    const other = nodeRow(row!);
    const live = other.state === 'running' && Number(row!['live']) === 1;
    if (live && !(other.host === node.host && !otherProcessRuns(other.pid))) throw new NodeIdInUseError(other);
    await session.run(`UPDATE nodes SET incarnation = ?, host = ?, pid = ?, url = ?, version = ?, state = 'running', started_at = ${now}, heartbeat_at = ${now} WHERE node_id = ?`, [
      incarnation,
      node.host,
      node.pid,
      node.url,
      node.version,
      node.nodeId,
    ]);
  });
}

/** Writes the heartbeat; false when another process has taken the id meanwhile (this one was gone too long). */
export async function beatNode(connection: SqlConnection, nodeId: string, incarnation: string): Promise<boolean> {
  const changed = await connection.transaction((session) =>
    session.run(`UPDATE nodes SET heartbeat_at = ${databaseNow(connection.dialect)} WHERE node_id = ? AND incarnation = ? AND state = 'running'`, [nodeId, incarnation]),
  );
  return changed === 1;
}

/** A clean stop: the id is free at once. */
export async function stopNode(connection: SqlConnection, nodeId: string, incarnation: string): Promise<void> {
  await connection.transaction((session) =>
    session.run(`UPDATE nodes SET state = 'stopped', heartbeat_at = ${databaseNow(connection.dialect)} WHERE node_id = ? AND incarnation = ?`, [nodeId, incarnation]),
  );
}

export async function listNodes(connection: SqlConnection): Promise<NodeRow[]> {
  const rows = await connection.read(`SELECT ${COLUMNS}, ${databaseNow(connection.dialect)} AS listed_at FROM nodes ORDER BY node_id`);
  return rows.map((row) => ({ ...nodeRow(row), listedAt: iso(row['listed_at']) }));
}

