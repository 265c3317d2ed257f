// On-disk naming and parsing of journal segments, shared by the main thread (open/replay) and the
// compaction worker. Plain JavaScript for the same reason as durable-json-file.mjs.
import { readdir } from 'node:fs/promises';

export const CHECKPOINT_FILE = 'checkpoint.json';
export const CHECKPOINT_FORMAT = 'ccweb-store/1';
const SEGMENT_RE = /^journal-(\d{16})\.ndjson$/;

/** A segment is named after the first seq it may contain, zero-padded so names sort by seq. */
export function segmentName(firstSeq) {
  return `journal-${String(firstSeq).padStart(16, '0')}.ndjson`;
}

export const AUDIT_ARCHIVE_RE = /^audit-(\d{16})-(\d{16})\.ndjson$/;

/** An immutable file of audit events, named by the seq range it holds. */
export function auditArchiveName(firstSeq, lastSeq) {
  return `audit-${String(firstSeq).padStart(16, '0')}-${String(lastSeq).padStart(16, '0')}.ndjson`;
}

/** Journal segment file names in seq order. */
export async function listSegments(dir) {
  const names = await readdir(dir);
  return names.filter((name) => SEGMENT_RE.test(name)).sort();
}

export class JournalCorruptionError extends Error {
  constructor(file, line, reason) {
    super(`store journal ${file} is corrupt at line ${line}: ${reason}`);
    this.name = 'JournalCorruptionError';
    this.code = 'journal_corrupt';
    this.file = file;
    this.line = line;
  }
}

function parseEntry(text) {
  const entry = JSON.parse(text);
  if (!entry || typeof entry !== 'object' || !Number.isSafeInteger(entry.seq) || !Array.isArray(entry.ops)) {
    throw new Error('not a {seq, ops} entry');
  }
  return entry;
}

/**
 * Parse a segment's text into entries. With `allowTornTail`, an unterminated or unparseable final
 * line is reported (validBytes = where the good prefix ends) instead of thrown: that is what a
 * crash in the middle of a group-commit write leaves, and none of it was ever acknowledged.
 * Anything bad before the final line is corruption.
 */
export function parseSegment(text, file, { allowTornTail = false } = {}) {
  const entries = [];
  let offset = 0;
  let lineNo = 0;
  while (offset < text.length) {
    lineNo += 1;
    const newline = text.indexOf('\n', offset);
    const end = newline === -1 ? text.length : newline;
    const line = text.slice(offset, end);
    const isLast = newline === -1 || newline === text.length - 1;
    let entry;
    try {
      if (newline === -1) throw new Error('line is not terminated');
      entry = parseEntry(line);
    } catch (error) {
      if (allowTornTail && isLast) {
        return { entries, validBytes: Buffer.byteLength(text.slice(0, offset)), torn: true, tornLine: lineNo };
      }
      throw new JournalCorruptionError(file, lineNo, error.message);
    }
    entries.push(entry);
    offset = end + 1;
  }
  return { entries, validBytes: Buffer.byteLength(text), torn: false, tornLine: 0 };
}

/**
 * `parseSegment` over the file's bytes, handing each entry to `onEntry` as it is parsed: replaying
 * a segment at start-up then holds one line at a time, not the segment as one string plus every
 * parsed entry. Same torn-tail and corruption rules.
 */
export function forEachSegmentEntry(bytes, file, { allowTornTail = false } = {}, onEntry) {
  let offset = 0;
  let lineNo = 0;
  while (offset < bytes.length) {
    lineNo += 1;
    const newline = bytes.indexOf(10, offset);
    const end = newline === -1 ? bytes.length : newline;
    const isLast = newline === -1 || newline === bytes.length - 1;
    let entry;
    try {
      if (newline === -1) throw new Error('line is not terminated');
      entry = parseEntry(bytes.toString('utf8', offset, end));
    } catch (error) {
      if (allowTornTail && isLast) return { validBytes: offset, torn: true, tornLine: lineNo };
      throw new JournalCorruptionError(file, lineNo, error.message);
    }
    onEntry(entry, lineNo);
    offset = end + 1;
  }
  return { validBytes: bytes.length, torn: false, tornLine: 0 };
}
