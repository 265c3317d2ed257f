// What the SQL store needs of a database: reads outside transactions, and transactions whose
// statements run one after another on one session. SQL is written with `?` placeholders.
export type Row = Record<string, unknown>;

export interface SqlSession {
  all(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Resolves to the number of rows changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
}

export interface SqlConnection {
  readonly dialect: 'sqlite' | 'postgres';
  read(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Runs fn in one transaction; resolves once it is durable. fn may run again if the database asks for a retry. */
  transaction<R>(fn: (session: SqlSession) => Promise<R>): Promise<R>;
  /** Resolves once every transaction committed so far is durable. */
  sync(): Promise<void>;
  /** Folds a write-ahead log into the database file, where the engine keeps one of its own. */
  checkpoint?(): Promise<void>;
  close(): Promise<void>;
  readonly commits: number;
  readonly batches: number;
}
