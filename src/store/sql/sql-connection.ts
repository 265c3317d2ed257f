// What the SQL store needs of a database: reads outside transactions, and transactions whose
// statements run one after another on one session. SQL is written with `?` placeholders.
export type Row = Record<string, unknown>;

export interface SqlSession {
  all(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Resolves to the number of rows changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /** Tells `channel`'s listeners (SqlConnection.listen, on every node) `payload` once this transaction is committed; never if it is not. */
  notify(channel: string, payload: string): Promise<void>;
}

/** What a channel may be called (it is written into LISTEN unquoted by parameters). */
export const CHANNEL = /^[a-z_][a-z0-9_]{0,62}$/;

export interface SqlConnection {
  readonly dialect: 'sqlite' | 'postgres';
  read(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Runs fn in one transaction; resolves once it is durable. fn may run again if the database asks for a retry. */
  transaction<R>(fn: (session: SqlSession) => Promise<R>): Promise<R>;
  /** Resolves once every transaction committed so far is durable. */
  sync(): Promise<void>;
  /**
   * Calls `listener` with the payload of each committed notify on `channel`. A hint, not a queue: a
   * notification sent while the connection that listens is down is lost, so what it announces must be
   * in the tables too, and its listeners look there again now and then. Resolves, once listening, to
   * the unsubscribe.
   */
  listen(channel: string, listener: (payload: string) => void): Promise<() => void>;
  /** Folds a write-ahead log into the database file, where the engine keeps one of its own. */
  checkpoint?(): Promise<void>;
  close(): Promise<void>;
  readonly batches: number;
}
