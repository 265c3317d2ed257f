// The cold tier's files, shared by the main thread and the compaction worker (plain JavaScript for
// the same reason as durable-json-file.mjs). Two kinds of immutable data file, each with a small
// binary index beside it that is all the main thread keeps in memory:
//
// - `cold-<firstSeq>-<lastSeq>.ndjson`: records archived by the transactions a compaction folded,
//   one `[collection, key, record]` line each. Index `.idx`: u32 quadruples (hash of collection
//   and key, offset, length, hash of collection);
//   length 0 marks a record written or deleted again later (the index is rewritten durably, the
//   data file never is).
// - `audit-<firstSeq>-<lastSeq>.ndjson` (written since format 1): every audit event, in seq order.
//   Index `.idx`: header (magic, count, firstSeq), count + 1 byte offsets, then for each of taskId,
//   deliveryId and actorId a count and (hash, event number) pairs sorted by hash.
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';

export const COLD_FILE_RE = /^cold-(\d{16})-(\d{16})\.ndjson$/;

export function coldFileName(firstSeq, lastSeq) {
  return `cold-${String(firstSeq).padStart(16, '0')}-${String(lastSeq).padStart(16, '0')}.ndjson`;
}

export function indexFileName(dataFile) {
  return dataFile.replace(/\.ndjson$/, '.idx');
}

/** FNV-1a over UTF-16 code units: the same number in every thread, cheap for short keys. */
export function hash32(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function recordId(collection, key) {
  return `${collection}\u0000${key}`;
}

/** Reads `length` bytes at `offset` of an open file, synchronously (page cache, a few µs). */
export function readRange(fd, offset, length) {
  const buffer = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buffer, done, length - done, offset + done);
    if (n === 0) throw new Error(`short read at ${offset + done}`);
    done += n;
  }
  return buffer;
}

/** Reads one cold line and returns `[collection, key, record]`. */
export function readColdLine(fd, offset, length) {
  return JSON.parse(readRange(fd, offset, length).toString('utf8'));
}

// ---- cold record index ------------------------------------------------------------------------

/** Words per cold index entry: hash of (collection, key), offset, length (0 = dead), hash of collection. */
export const COLD_ENTRY_WORDS = 4;

export function encodeColdIndex(words) {
  return Buffer.from(words.buffer, words.byteOffset, words.byteLength);
}

export function decodeColdIndex(buffer) {
  if (buffer.byteLength % 16 !== 0) throw new Error('cold index size is not a multiple of 16');
  return decodeWords(buffer);
}

/** Builds the lines and index of a cold file from `[collection, key, record]` entries. */
export function buildColdFile(entries) {
  const lines = [];
  const words = new Uint32Array(entries.length * COLD_ENTRY_WORDS);
  let offset = 0;
  for (const [i, [collection, key, record]] of entries.entries()) {
    const line = JSON.stringify([collection, key, record]);
    const length = Buffer.byteLength(line);
    words.set([hash32(recordId(collection, key)), offset, length, hash32(collection)], i * COLD_ENTRY_WORDS);
    offset += length + 1;
    lines.push(line);
  }
  return { text: `${lines.join('\n')}\n`, index: encodeColdIndex(words) };
}

// ---- audit archive index ----------------------------------------------------------------------

const AUDIT_INDEX_MAGIC = 0xa0d17001;
export const AUDIT_KEYS = ['taskId', 'deliveryId', 'actorId'];

function sortedPairs(pairs) {
  const n = pairs.length / 2;
  const order = Array.from({ length: n }, (_, i) => i);
  order.sort((a, b) => pairs[a * 2] - pairs[b * 2] || pairs[a * 2 + 1] - pairs[b * 2 + 1]);
  const out = new Uint32Array(n * 2);
  for (const [j, i] of order.entries()) {
    out[j * 2] = pairs[i * 2];
    out[j * 2 + 1] = pairs[i * 2 + 1];
  }
  return out;
}

/** The index of an audit archive, from its events (in file order) and each line's byte length. */
export function buildAuditIndex(events, lineLengths) {
  const count = events.length;
  const firstSeq = count > 0 ? events[0].seq : 0;
  const offsets = new Uint32Array(count + 1);
  const keyPairs = AUDIT_KEYS.map(() => []);
  let offset = 0;
  for (let i = 0; i < count; i++) {
    const event = events[i];
    if (event.seq !== firstSeq + i) throw new Error(`audit archive: seq ${event.seq} is not ${firstSeq + i}`);
    offsets[i] = offset;
    offset += lineLengths[i] + 1;
    for (const [k, field] of AUDIT_KEYS.entries()) {
      if (typeof event[field] === 'string') keyPairs[k].push(hash32(event[field]), i);
    }
  }
  offsets[count] = offset;
  const sorted = keyPairs.map((pairs) => sortedPairs(pairs));
  const words = 3 + offsets.length + sorted.reduce((n, s) => n + 1 + s.length, 0);
  const out = new Uint32Array(words);
  out[0] = AUDIT_INDEX_MAGIC;
  out[1] = count;
  out[2] = firstSeq;
  out.set(offsets, 3);
  let at = 3 + offsets.length;
  for (const s of sorted) {
    out[at] = s.length / 2;
    out.set(s, at + 1);
    at += 1 + s.length;
  }
  return Buffer.from(out.buffer);
}

/** The text of an audit archive and its index. */
export function buildAuditArchive(events) {
  const lines = events.map((event) => JSON.stringify(event));
  return { text: `${lines.join('\n')}\n`, index: buildAuditIndex(events, lines.map((l) => Buffer.byteLength(l))) };
}

export function decodeAuditIndex(buffer) {
  const words = decodeWords(buffer);
  if (words[0] !== AUDIT_INDEX_MAGIC) throw new Error('not an audit index');
  const count = words[1];
  const firstSeq = words[2];
  const offsets = words.subarray(3, 3 + count + 1);
  let at = 3 + count + 1;
  const keys = {};
  for (const field of AUDIT_KEYS) {
    const n = words[at];
    keys[field] = words.subarray(at + 1, at + 1 + n * 2);
    at += 1 + n * 2;
  }
  if (at !== words.length) throw new Error('audit index has trailing data');
  return { count, firstSeq, offsets, keys };
}

function decodeWords(buffer) {
  if (buffer.byteLength % 4 !== 0) throw new Error('index size is not a multiple of 4');
  // A view when aligned (files read whole get their own buffer at offset 0): no copy at start-up.
  if (buffer.byteOffset % 4 === 0) return new Uint32Array(buffer.buffer, buffer.byteOffset, buffer.byteLength / 4);
  return new Uint32Array(Uint8Array.prototype.slice.call(buffer).buffer);
}

/** Builds the index of an archive written before indexes existed (one synchronous read). */
export function indexExistingAuditArchive(file) {
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n');
  if (lines.pop() !== '') throw new Error(`${file}: audit archive is not newline-terminated`);
  const events = lines.map((line) => JSON.parse(line));
  return buildAuditIndex(events, lines.map((l) => Buffer.byteLength(l)));
}

/** Event numbers in an index's sorted (hash, event) pairs whose hash is `h`. */
export function eventsWithHash(pairs, h) {
  let lo = 0;
  let hi = pairs.length / 2;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (pairs[mid * 2] < h) lo = mid + 1;
    else hi = mid;
  }
  const out = [];
  for (let i = lo; i < pairs.length / 2 && pairs[i * 2] === h; i++) out.push(pairs[i * 2 + 1]);
  return out;
}

export function openForRead(file) {
  return openSync(file, 'r');
}

export function closeQuietly(fd) {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}
