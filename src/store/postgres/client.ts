// How this engine opens a connection and waits between attempts: one place for both, so every
// connection behaves alike when the server goes away.
import pg from 'pg';
import { StoreError } from '../types.js';

/**
 * A client whose idle errors (the server restarted) are swallowed: they must not crash the process,
 * and the next query on it fails and is handled where it is made.
 */
export function databaseClient(url: string, extra: Omit<pg.ClientConfig, 'connectionString'> = {}): pg.Client {
  const client = new pg.Client({ ...extra, connectionString: url });
  client.on('error', () => undefined);
  return client;
}

/** The wait before connection attempt `attempt` + 1: 100 ms doubling, at most 2 s. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(2000, 100 * 2 ** Math.min(attempt, 5));
}

/** A database that could not be reached, named only by `where` (describeDatabase: never the password). */
export function unreachable(where: string, error: unknown): StoreError {
  return new StoreError('database_unreachable', `cannot reach ${where}: ${(error as Error).message}`);
}
