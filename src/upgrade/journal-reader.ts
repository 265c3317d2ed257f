// Reads the store an earlier ccweb-gitea kept in its data directory (the journal engine) without
// writing a byte: what `migrate-store` moves into SQLite or PostgreSQL, and what `export-audit` reads
// before that. The directory holds
//   - `checkpoint.json`: `{format: "ccweb-store/1", seq, auditSeq, audit, auditArchives, coldFiles, collections}`,
//     one collection entry `[key, record]` per line (older ones: the same document on one line);
//   - `journal-<firstSeq>.ndjson`: one transaction per line, `{seq, ops}`, those with seq ≤ the
//     checkpoint's already inside it; ops `["p"|"c", collection, key, record]` (put | archive),
//     `["d", collection, key]`, `["a", auditEvent]`, `["x", format, payload]` (a derived record);
//   - `cold-<a>-<b>.ndjson`: archived records, `[collection, key, record]` per line, and its `.idx`
//     (four u32 per line; the third, the line's length, is 0 once a later write superseded it);
//   - `audit-<a>-<b>.ndjson`: audit events in seq order.
// Only files the checkpoint lists count (others are a compaction's leftovers). A key is live in one
// place: hot (checkpoint, then the journal) or archived (a cold file, or a journal "c" op); any
// journal write of a key supersedes its cold copy. A torn last journal line was never acknowledged and
// is skipped; anything else that does not read as above stops the read, naming file and line.
import { existsSync, readdirSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expandDerived } from './intake-accept-v1.js';
import { COLLECTIONS, StoreError, type AuditEvent, type CollectionName, type StoredRecord } from '../store/types.js';

const CHECKPOINT = 'checkpoint.json';
const FORMAT = 'ccweb-store/1';
const SEGMENT = /^journal-\d{16}\.ndjson$/;
const KNOWN: ReadonlySet<string> = new Set(COLLECTIONS);

export interface JournalRecord {
  collection: CollectionName;
  key: string;
  archived: boolean;
  record: StoredRecord;
}

export interface JournalStore {
  /** Every record, collection by collection: the hot ones in insertion order, then the archived ones. */
  records(): AsyncGenerator<JournalRecord>;
  /** Every audit event, in seq order. */
  audit(): AsyncGenerator<AuditEvent>;
}

/** Whether `dir` holds a journal store's files (a checkpoint or journal segments). */
export function holdsJournalStore(dir: string): boolean {
  return existsSync(dir) && readdirSync(dir).some((name) => name === CHECKPOINT || SEGMENT.test(name));
}

export function corrupt(file: string, line: number, reason: string): StoreError {
  return new StoreError('journal_corrupt', `store journal ${file} is corrupt at line ${line}: ${reason}`);
}

interface Line {
  text: string;
  no: number;
  /** False only for a last line without its newline. */
  terminated: boolean;
}

/** The lines of a file, read a piece at a time: no file is ever held whole. */
async function* lines(file: string): AsyncGenerator<Line> {
  const handle = await open(file, 'r');
  try {
    const piece = Buffer.allocUnsafe(1 << 20);
    let rest = Buffer.alloc(0);
    let no = 0;
    for (;;) {
      const { bytesRead } = await handle.read(piece, 0, piece.length, null);
      if (bytesRead === 0) break;
      const data = Buffer.concat([rest, piece.subarray(0, bytesRead)]);
      let at = 0;
      for (let end = data.indexOf(10); end !== -1; end = data.indexOf(10, at)) {
        yield { text: data.toString('utf8', at, end), no: ++no, terminated: true };
        at = end + 1;
      }
      rest = data.subarray(at);
    }
    if (rest.length > 0) yield { text: rest.toString('utf8'), no: ++no, terminated: false };
  } finally {
    await handle.close();
  }
}

/** Each line of a file written whole and renamed into place (cold files, audit archives), parsed. */
async function* jsonLines<T>(file: string): AsyncGenerator<T> {
  for await (const line of lines(file)) {
    if (!line.terminated) throw corrupt(file, line.no, 'line is not terminated');
    let value: T;
    try {
      value = JSON.parse(line.text) as T;
    } catch (error) {
      throw corrupt(file, line.no, (error as Error).message);
    }
    yield value;
  }
}

interface Head {
  seq: number;
  /** The last audit event the checkpoint's archives and `audit` hold. */
  auditSeq: number;
  audit: AuditEvent[];
  auditArchives: string[];
  coldFiles: string[];
}

function collectionOf(name: unknown): CollectionName {
  if (typeof name !== 'string' || !KNOWN.has(name)) throw new Error(`unknown collection ${JSON.stringify(name)}`);
  return name as CollectionName;
}

function checkHead(file: string, doc: Record<string, unknown>): Head {
  if (doc['format'] !== FORMAT || !Number.isSafeInteger(doc['seq'])) {
    throw new StoreError('journal_corrupt', `store checkpoint ${file} has an unknown format ${JSON.stringify(doc['format'])} (not an earlier version's journal store)`);
  }
  const list = (v: unknown) => (Array.isArray(v) ? (v as never[]) : []);
  const auditSeq = Number.isSafeInteger(doc['auditSeq']) ? (doc['auditSeq'] as number) : 0;
  return { seq: doc['seq'] as number, auditSeq, audit: list(doc['audit']), auditArchives: list(doc['auditArchives']), coldFiles: list(doc['coldFiles']) };
}

/**
 * The checkpoint's head, handing each hot record to `put` in file order (= insertion order). The
 * line layout is parsed a line at a time; a checkpoint on one line (older versions) as one document.
 */
async function readCheckpoint(file: string, put: (collection: CollectionName, key: string, record: StoredRecord) => void): Promise<Head> {
  let head: Head | undefined;
  let current: CollectionName | undefined;
  let done = false;
  for await (const line of lines(file)) {
    try {
      if (head === undefined) {
        if (!line.text.endsWith('"collections":{')) break; // not the line layout
        head = checkHead(file, JSON.parse(`${line.text}}}`) as Record<string, unknown>);
      } else if (done) {
        if (line.text !== '') throw new Error('text after the end of the document');
      } else if (current === undefined) {
        if (line.text === '}}') done = true;
        else if (line.text.endsWith(':[')) current = collectionOf(JSON.parse(line.text.slice(0, -2)));
        else throw new Error('expected a collection');
      } else if (line.text === ']' || line.text === '],') {
        current = undefined;
      } else {
        const [key, record] = JSON.parse(line.text.endsWith(',') ? line.text.slice(0, -1) : line.text) as [string, StoredRecord];
        put(current, key, record);
      }
    } catch (error) {
      if (error instanceof StoreError) throw error;
      throw corrupt(file, line.no, (error as Error).message);
    }
  }
  if (head !== undefined) {
    if (!done) throw new StoreError('journal_corrupt', `store checkpoint ${file} ends early`);
    return head;
  }
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new StoreError('journal_corrupt', `store checkpoint ${file} is not valid JSON: ${(error as Error).message}`);
  }
  const whole = checkHead(file, doc);
  for (const [name, entries] of Object.entries((doc['collections'] ?? {}) as Record<string, [string, StoredRecord][]>)) {
    const collection = collectionOf(name);
    for (const [key, record] of entries) put(collection, key, record);
  }
  return whole;
}

const id = (collection: string, key: string) => `${collection}\u0000${key}`;

/** The journal's state after the checkpoint: what it changed of the records, and its audit events. */
class Replay {
  readonly hot = new Map<CollectionName, Map<string, StoredRecord>>(COLLECTIONS.map((c) => [c, new Map()]));
  /** Archived by a journal op (no compaction folded it into a cold file). */
  readonly archived = new Map<CollectionName, Map<string, StoredRecord>>(COLLECTIONS.map((c) => [c, new Map()]));
  /** Keys the journal wrote, deleted or archived: their copies in cold files are superseded. */
  readonly touched = new Set<string>();
  readonly audit: AuditEvent[] = [];

  apply(ops: unknown): void {
    if (!Array.isArray(ops)) throw new Error('not a {seq, ops} entry');
    for (const op of ops as unknown[]) {
      if (!Array.isArray(op)) throw new Error('op is not an array');
      const [kind, a, b, c] = op as unknown[];
      if (kind === 'a' && a !== null && typeof a === 'object' && Number.isSafeInteger((a as AuditEvent).seq)) {
        this.audit.push(a as AuditEvent);
      } else if (kind === 'x' && typeof a === 'string' && b !== null && typeof b === 'object') {
        this.apply(expandDerived(a, b));
      } else if ((kind === 'p' || kind === 'c' || kind === 'd') && typeof b === 'string' && (kind === 'd' || (c !== null && typeof c === 'object'))) {
        const collection = collectionOf(a);
        const hot = this.hot.get(collection)!;
        const archived = this.archived.get(collection)!;
        this.touched.add(id(collection, b));
        archived.delete(b);
        // A put keeps a hot key's place (Map.set), as the engine kept its insertion number.
        if (kind === 'p') hot.set(b, c as StoredRecord);
        else hot.delete(b);
        if (kind === 'c') archived.set(b, c as StoredRecord);
      } else {
        throw new Error(`malformed op ${JSON.stringify(op).slice(0, 200)}`);
      }
    }
  }
}

/** Opens the journal store in `dir` for reading: the checkpoint's records and the journal are read now. */
export async function openJournalStore(dir: string): Promise<JournalStore> {
  if (!holdsJournalStore(dir)) throw new StoreError('journal_missing', `${dir} holds no journal store (no ${CHECKPOINT}, no journal segments)`);
  const state = new Replay();
  const checkpoint = join(dir, CHECKPOINT);
  const head: Head = existsSync(checkpoint)
    ? await readCheckpoint(checkpoint, (collection, key, record) => void state.hot.get(collection)!.set(key, record))
    : { seq: 0, auditSeq: 0, audit: [], auditArchives: [], coldFiles: [] };
  let seq = head.seq;
  const segments = readdirSync(dir).filter((name) => SEGMENT.test(name)).sort();
  for (const [i, name] of segments.entries()) {
    const file = join(dir, name);
    let torn: { no: number; reason: string } | undefined;
    for await (const line of lines(file)) {
      // Only the very last line of the last segment may be torn: a crash in the middle of a write.
      if (torn) throw corrupt(file, torn.no, torn.reason);
      let entry: { seq?: unknown; ops?: unknown };
      try {
        if (!line.terminated) throw new Error('line is not terminated');
        entry = JSON.parse(line.text) as typeof entry;
        if (entry === null || typeof entry !== 'object' || !Number.isSafeInteger(entry.seq)) throw new Error('not a {seq, ops} entry');
      } catch (error) {
        if (i === segments.length - 1) {
          torn = { no: line.no, reason: (error as Error).message };
          continue;
        }
        throw corrupt(file, line.no, (error as Error).message);
      }
      const entrySeq = entry.seq as number;
      if (entrySeq <= seq) continue; // already folded into the checkpoint
      if (entrySeq !== seq + 1) throw corrupt(file, line.no, `seq ${entrySeq} does not follow ${seq}`);
      try {
        state.apply(entry.ops);
      } catch (error) {
        throw corrupt(file, line.no, (error as Error).message);
      }
      seq = entrySeq;
    }
  }

  return {
    async *records() {
      for (const collection of COLLECTIONS) {
        for (const [key, record] of state.hot.get(collection)!) yield { collection, key, archived: false, record };
        for (const [key, record] of state.archived.get(collection)!) yield { collection, key, archived: true, record };
      }
      // Cold files last, each line beside its index entry: a dead entry, or a key the journal touched, is superseded.
      for (const name of head.coldFiles) {
        const file = join(dir, name);
        const index = await readFile(join(dir, name.replace(/\.ndjson$/, '.idx')));
        if (index.length % 16 !== 0) throw new StoreError('journal_corrupt', `store index ${file.replace(/\.ndjson$/, '.idx')} is not a whole number of entries`);
        let n = 0;
        for await (const line of jsonLines<[string, string, StoredRecord]>(file)) {
          if (n * 16 >= index.length) throw corrupt(file, n + 1, 'more lines than its index has entries');
          const live = index.readUInt32LE(n * 16 + 8) !== 0;
          n += 1;
          let collection: CollectionName;
          try {
            collection = collectionOf(line[0]);
          } catch (error) {
            throw corrupt(file, n, (error as Error).message);
          }
          if (live && !state.touched.has(id(collection, line[1]))) yield { collection, key: line[1], archived: true, record: line[2] };
        }
        if (n * 16 !== index.length) throw corrupt(file, n, `${n} lines for ${index.length / 16} index entries`);
      }
    },
    async *audit() {
      let last = 0;
      const inOrder = (event: AuditEvent, where: string) => {
        if (!Number.isSafeInteger(event?.seq) || event.seq <= last) throw new StoreError('journal_corrupt', `${where}: audit event ${JSON.stringify(event?.seq)} does not follow ${last}`);
        last = event.seq;
        return event;
      };
      for (const name of head.auditArchives) for await (const event of jsonLines<AuditEvent>(join(dir, name))) yield inOrder(event, join(dir, name));
      for (const event of head.audit) yield inOrder(event, checkpoint);
      // A journal event the checkpoint holds already is skipped, as the earlier version's compaction
      // that folded the journal skipped it; after those, the journal's events must follow in order.
      for (const event of state.audit) if (!(Number.isSafeInteger(event.seq) && event.seq <= head.auditSeq)) yield inOrder(event, `${dir} journal`);
    },
  };
}
