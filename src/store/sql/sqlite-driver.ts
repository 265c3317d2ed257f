// Which SQLite binding opens the file: Node's own `node:sqlite` where the running Node has it
// (22.13 and later, without a flag), else better-sqlite3 (an optional dependency, compiled by `npm ci`
// on the Node that is past its end of life). Both are synchronous and alike; this is the part of
// them the store uses. When support for Node 20 ends, better-sqlite3 and this choice go.
import { createRequire } from 'node:module';
import type { Row } from './sql-connection.js';

export interface SqliteStatement {
  all(...params: unknown[]): Row[];
  run(...params: unknown[]): { changes: number | bigint };
  iterate(...params: unknown[]): Iterable<Row>;
}

export interface SqliteDatabase {
  exec(sql: string): void;
  /** Defines an SQL function of this connection (both bindings have it). */
  function(name: string, fn: () => number | null): void;
  prepare(sql: string): SqliteStatement;
  close(): void;
}

export type OpenSqlite = (file: string, options: { readonly: boolean }) => SqliteDatabase;

const require = createRequire(import.meta.url);

interface NodeSqlite {
  DatabaseSync: new (file: string, options: { readOnly: boolean }) => SqliteDatabase;
}

let chosen: { name: 'node:sqlite' | 'better-sqlite3'; open: OpenSqlite } | undefined;

/** Node 22.13+ ships `node:sqlite` without a flag (earlier 22.x need --experimental-sqlite). */
function hasNodeSqlite(version = process.versions.node): boolean {
  const [major, minor] = version.split('.').map(Number) as [number, number];
  return major > 22 || (major === 22 && minor >= 13);
}

export function sqliteBinding(): { name: 'node:sqlite' | 'better-sqlite3'; open: OpenSqlite } {
  if (chosen) return chosen;
  if (hasNodeSqlite()) {
    const { DatabaseSync } = require('node:sqlite') as NodeSqlite;
    chosen = { name: 'node:sqlite', open: (file, { readonly }) => new DatabaseSync(file, { readOnly: readonly }) };
    return chosen;
  }
  let Database: new (file: string, options: { readonly: boolean; fileMustExist?: boolean }) => SqliteDatabase;
  try {
    Database = require('better-sqlite3') as typeof Database;
  } catch (error) {
    throw new Error(
      `the store needs SQLite: Node ${process.versions.node} has no node:sqlite (Node 22.13 or later does), and better-sqlite3 could not be loaded (${(error as Error).message.split('\n')[0]}): use Node 22 or 24 LTS, or run \`npm ci\` where it can compile better-sqlite3 (python3, make, g++)`,
    );
  }
  chosen = { name: 'better-sqlite3', open: (file, { readonly }) => new Database(file, { readonly, ...(readonly ? { fileMustExist: true } : {}) }) };
  return chosen;
}
