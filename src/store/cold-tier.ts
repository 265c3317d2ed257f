// The part of the store that lives on disk and is read on demand: archived records and archived
// audit events. Memory holds only their indexes (cold-index.ts, the audit indexes); a read is a
// synchronous pread that the page cache usually answers in microseconds, so the store's API stays
// synchronous. See LAYOUT.md ("Cold tier").
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  AUDIT_KEYS,
  COLD_ENTRY_WORDS,
  closeQuietly,
  decodeAuditIndex,
  decodeColdIndex,
  eventsWithHash,
  hash32,
  indexExistingAuditArchive,
  indexFileName,
  openForRead,
  readColdLine,
  readRange,
  recordId,
  type AuditIndex,
} from './cold-files.mjs';
import { writeFileDurably } from './durable-json-file.mjs';
import { ColdIndex, type ColdLocation } from './cold-index.js';
import { ShardedMap } from './sharded-map.js';
import { deepFreeze } from './memory-state.js';
import { COLLECTIONS, type AuditEvent, type AuditQuery, type CollectionName, type StoredRecord } from './types.js';

const COLLECTION_NO = new Map<string, number>(COLLECTIONS.map((name, i) => [name, i]));
const COLLECTION_BY_HASH = new Map<number, number>(COLLECTIONS.map((name, i) => [hash32(name), i]));

interface PendingCold {
  collection: CollectionName;
  key: string;
  record: StoredRecord;
  /** The journal seq of the transaction that archived it. */
  seq: number;
}

interface AuditArchive {
  name: string;
  index: AuditIndex;
  lastSeq: number;
}

export class ColdTier {
  readonly #dir: string;
  /** File number → name; 0 is unused so that 0 can mean "empty slot" in the index. */
  readonly #files: string[] = [''];
  readonly #fds = new Map<string, number>();
  readonly #index = new ColdIndex();
  /** Archived by a transaction the journal holds but no compaction has folded yet: still in memory. */
  readonly #pending = new ShardedMap<PendingCold>();
  readonly #archives: AuditArchive[] = [];

  constructor(dir: string) {
    this.#dir = dir;
  }

  // ---- records ---------------------------------------------------------------------------------

  get(collection: CollectionName, key: string): StoredRecord | undefined {
    const id = recordId(collection, key);
    const pending = this.#pending.get(id);
    if (pending) return pending.record;
    const found = this.#find(collection, key, hash32(id));
    return found?.record;
  }

  /**
   * Whether the key is archived, reading only the start of a candidate's line: a cold line is
   * `JSON.stringify([collection, key, record])`, so the key is confirmed by its first bytes — an
   * existence check (is there a session for this issue yet?) no longer parses a whole record.
   */
  has(collection: CollectionName, key: string): boolean {
    const id = recordId(collection, key);
    if (this.#pending.has(id)) return true;
    const candidates = this.#index.candidates(hash32(id));
    if (candidates.length === 0) return false;
    const head = JSON.stringify([collection, key]);
    const prefix = Buffer.from(`${head.slice(0, -1)},`);
    for (const loc of candidates) {
      if (loc.length > prefix.length && readRange(this.#fd(loc.file), loc.offset, prefix.length).equals(prefix)) return true;
    }
    return false;
  }

  /** A transaction archived this record (it left the hot state). */
  archive(collection: CollectionName, key: string, record: StoredRecord, seq: number): void {
    this.#pending.set(recordId(collection, key), { collection, key, record, seq });
  }

  /** The key was written or deleted again: any archived copy is superseded. */
  supersede(collection: CollectionName, key: string): void {
    const id = recordId(collection, key);
    if (this.#pending.delete(id)) return;
    const found = this.#find(collection, key, hash32(id));
    if (found) this.#index.kill(found.slot);
  }

  /** Sizes the index for the cold files a checkpoint lists, before loading them. */
  reserveFor(names: readonly string[]): void {
    let entries = 0;
    for (const name of names) entries += statSync(join(this.#dir, indexFileName(name)), { throwIfNoEntry: false })?.size ?? 0;
    this.#index.reserve(entries / (COLD_ENTRY_WORDS * 4));
  }

  /** Adds a cold file listed by the checkpoint (at open) — every live entry of its index. */
  loadColdFile(name: string): void {
    const file = this.#files.push(name) - 1;
    const words = this.#readIndex(name, decodeColdIndex);
    for (let i = 0; i < words.length; i += COLD_ENTRY_WORDS) {
      if (words[i + 2] === 0) continue;
      const collection = COLLECTION_BY_HASH.get(words[i + 3]!);
      if (collection === undefined) throw new Error(`cold file ${name}: entry ${i / COLD_ENTRY_WORDS} names an unknown collection`);
      this.#index.add(words[i]!, file, words[i + 1]!, words[i + 2]!, collection);
    }
  }

  /**
   * A compaction folded the journal through `foldedSeq` and wrote `name`, whose records are
   * `keyLines` (one JSON `[collection, key]` per line, in file order): the pending records it holds
   * leave memory. Entries for keys written again since the fold are not taken (the next compaction
   * marks them dead on disk too).
   *
   * A generator that adopts `slice` keys per step, so the caller can let the event loop run between
   * steps (100k keys take ≈ 150 ms at once; a step ≈ 1.5 ms). Between steps every key is readable:
   * a key not yet adopted is still pending, and the checks below hold whatever transactions did in
   * between (a key written or deleted again has left `pending` or carries a later seq).
   */
  *adoptColdFile(name: string, foldedSeq: number, keyLines: string, slice = 1024): Generator<void, void> {
    const file = this.#files.push(name) - 1;
    const words = this.#readIndex(name, decodeColdIndex);
    let at = 0;
    let n = 0;
    while (at < keyLines.length) {
      const end = keyLines.indexOf('\n', at);
      const line = keyLines.slice(at, end === -1 ? keyLines.length : end);
      at = end === -1 ? keyLines.length : end + 1;
      const [collection, key] = JSON.parse(line) as [CollectionName, string];
      const i = n * COLD_ENTRY_WORDS;
      n += 1;
      if (i >= words.length) throw new Error(`cold file ${name}: more keys than its ${words.length / COLD_ENTRY_WORDS} index entries`);
      const id = recordId(collection, key);
      const pending = this.#pending.get(id);
      if (pending && pending.seq <= foldedSeq) {
        this.#index.add(words[i]!, file, words[i + 1]!, words[i + 2]!, COLLECTION_NO.get(collection)!);
        this.#pending.delete(id);
      }
      if (n % slice === 0) yield;
    }
    if (n * COLD_ENTRY_WORDS !== words.length) throw new Error(`cold file ${name}: ${n} keys for ${words.length / COLD_ENTRY_WORDS} index entries`);
  }

  count(collection: CollectionName): number {
    const no = COLLECTION_NO.get(collection)!;
    let n = 0;
    for (const p of this.#pending.values()) if (p.collection === collection) n += 1;
    return n + this.#index.count(no);
  }

  /** Every cold record of a collection (no particular order). Reads one record per step. */
  *scan(collection: CollectionName): Generator<StoredRecord> {
    // Both lists are taken before the first record is handed out: an adoption step between two
    // records moves keys from pending to the index, and a key must be seen once.
    const pending = [...this.#pending.values()];
    const located = [...this.#index.entries(COLLECTION_NO.get(collection)!)];
    for (const p of pending) if (p.collection === collection) yield p.record;
    for (const loc of located) {
      const line = this.#read(loc);
      if (line) yield line[2];
    }
  }

  stats(): { coldRecords: number; pendingColdRecords: number; coldIndexBytes: number; auditArchives: number } {
    return { coldRecords: this.#index.size, pendingColdRecords: this.#pending.size, coldIndexBytes: this.#index.bytes, auditArchives: this.#archives.length };
  }

  #find(collection: CollectionName, key: string, h: number): { slot: number; record: StoredRecord } | undefined {
    for (const loc of this.#index.candidates(h)) {
      const line = this.#read(loc);
      if (line && line[0] === collection && line[1] === key) return { slot: loc.slot, record: line[2] };
    }
    return undefined;
  }

  #read(loc: ColdLocation): [string, string, StoredRecord] | undefined {
    const line = readColdLine(this.#fd(loc.file), loc.offset, loc.length);
    deepFreeze(line[2]);
    return line;
  }

  /** A listed file's index; a missing or damaged one stops `open()` naming the file. */
  #readIndex<T>(name: string, decode: (buffer: Buffer) => T): T {
    const path = join(this.#dir, indexFileName(name));
    try {
      return decode(readFileSync(path));
    } catch (error) {
      throw new Error(`store index ${path} is unreadable: ${(error as Error).message}`);
    }
  }

  #fd(file: number | string): number {
    const name = typeof file === 'number' ? this.#files[file]! : file;
    let fd = this.#fds.get(name);
    if (fd === undefined) this.#fds.set(name, (fd = openForRead(join(this.#dir, name))));
    return fd;
  }

  // ---- audit ---------------------------------------------------------------------------------

  /** Registers an audit archive; builds its index first if it predates indexes. */
  async loadAuditArchive(name: string, fsync: boolean): Promise<void> {
    const indexPath = join(this.#dir, indexFileName(name));
    if (!existsSync(indexPath)) await writeFileDurably(indexPath, indexExistingAuditArchive(join(this.#dir, name)), { fsync });
    const index = this.#readIndex(name, decodeAuditIndex);
    this.#archives.push({ name, index, lastSeq: index.firstSeq + index.count - 1 });
  }

  /** Seq of the last archived event (0 when none). */
  get archivedThrough(): number {
    return this.#archives.at(-1)?.lastSeq ?? 0;
  }

  /** Archived events matching `query`, in seq order, at most `limit`. */
  queryAudit(query: AuditQuery, limit: number): AuditEvent[] {
    const out: AuditEvent[] = [];
    const afterSeq = query.afterSeq ?? 0;
    const keyed = AUDIT_KEYS.filter((field) => query[field] !== undefined);
    for (const archive of this.#archives) {
      if (out.length >= limit) break;
      if (archive.lastSeq <= afterSeq || archive.index.count === 0) continue;
      const first = Math.max(0, afterSeq + 1 - archive.index.firstSeq);
      let numbers: Iterable<number>;
      if (keyed.length > 0) {
        // The narrowest key's event list; the other criteria filter it.
        let best: number[] | undefined;
        for (const field of keyed) {
          const list = eventsWithHash(archive.index.keys[field], hash32(query[field]!)).filter((n) => n >= first);
          if (!best || list.length < best.length) best = list;
        }
        numbers = best!;
      } else {
        numbers = rangeOf(first, archive.index.count);
      }
      for (const event of this.#readEvents(archive, numbers)) {
        if (!matches(event, query)) continue;
        out.push(event);
        if (out.length >= limit) break;
      }
    }
    return out;
  }

  *#readEvents(archive: AuditArchive, numbers: Iterable<number>): Generator<AuditEvent> {
    const fd = this.#fd(archive.name);
    const { offsets } = archive.index;
    // Consecutive event numbers are read in chunks of up to 1 MiB; scattered ones one by one.
    let run: number[] = [];
    const flush = function* (this: void): Generator<AuditEvent> {
      if (run.length === 0) return;
      const start = offsets[run[0]!]!;
      const bytes = readRange(fd, start, offsets[run.at(-1)! + 1]! - start);
      for (const n of run) {
        const text = bytes.toString('utf8', offsets[n]! - start, offsets[n + 1]! - start - 1);
        yield deepFreeze(JSON.parse(text) as AuditEvent);
      }
      run = [];
    };
    for (const n of numbers) {
      const contiguous = run.length > 0 && n === run.at(-1)! + 1 && offsets[n + 1]! - offsets[run[0]!]! <= 1 << 20;
      if (!contiguous) yield* flush();
      run.push(n);
    }
    yield* flush();
  }

  close(): void {
    for (const fd of this.#fds.values()) closeQuietly(fd);
    this.#fds.clear();
  }
}

function* rangeOf(from: number, to: number): Generator<number> {
  for (let i = from; i < to; i++) yield i;
}

export function matches(event: AuditEvent, query: AuditQuery): boolean {
  if (query.afterSeq !== undefined && event.seq <= query.afterSeq) return false;
  if (query.taskId !== undefined && event.taskId !== query.taskId) return false;
  if (query.deliveryId !== undefined && event.deliveryId !== query.deliveryId) return false;
  if (query.actorId !== undefined && event.actorId !== query.actorId) return false;
  if (query.from !== undefined && event.timestamp < query.from) return false;
  if (query.to !== undefined && event.timestamp > query.to) return false;
  if (query.level !== undefined && (event.level ?? 'info') !== query.level) return false;
  return true;
}
