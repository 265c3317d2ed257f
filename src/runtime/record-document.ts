// One stored record as a lowdb document: `Low` reads and writes it through an adapter bound to the
// record's row in the caller's transaction. This is all lowdb does here — the database keeps the
// row, the transaction makes the write atomic and durable with the rest, and lowdb is the familiar
// read/modify/write surface over it. The actor runtime keeps each actor's snapshot this way.
import { Low, type Adapter } from 'lowdb';
import type { CollectionName, PutOptions, RecordType, Tx } from '../store/types.js';

class RecordRow<T extends RecordType> implements Adapter<T | null> {
  constructor(
    private readonly tx: Tx,
    private readonly collection: CollectionName,
    private readonly key: string,
    private readonly writeAs: { create: boolean; put?: PutOptions },
  ) {}

  read(): Promise<T | null> {
    return this.tx.get<T>(this.collection, this.key).then((found) => found ?? null);
  }

  async write(data: T | null): Promise<void> {
    // Deleting is not a document write: a record document is written with a value.
    if (data === null) throw new TypeError(`${this.collection}: ${this.key}: a record document is written with a value`);
    if (this.writeAs.create) await this.tx.insert<T>(this.collection, this.key, data);
    else await this.tx.put<T>(this.collection, this.key, data, this.writeAs.put);
  }
}

/**
 * The record `key` of `collection` as a lowdb document inside `tx` (null until read, or when absent):
 * `create` inserts it (a unique key), otherwise it is written with `put` and its compare-and-swap options.
 */
export function recordDocument<T extends RecordType>(tx: Tx, collection: CollectionName, key: string, writeAs: { create: boolean; put?: PutOptions }): Low<T | null> {
  return new Low<T | null>(new RecordRow<T>(tx, collection, key, writeAs), null);
}
