// Opening a store directory: the checkpoint (lowdb + the durable adapter), the cold tier's files it
// lists, then the journal replayed in seq order. Crash leftovers are removed first; a torn last
// journal line (a crash mid-write, never acknowledged) is cut off; anything else corrupt stops the
// open, naming file and line. Which files are leftovers and what to do with each journal entry are
// decided purely (tempLeftovers, compactionLeftovers, replayStep) apart from the I/O.
import { open as openFile, readdir, readFile, stat, truncate, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Low } from 'lowdb';
import type { ColdTier } from './cold-tier.js';
import { COLD_FILE_RE, indexFileName } from './cold-files.mjs';
import { DurableJsonFile } from './durable-json-file.mjs';
import {
  AUDIT_ARCHIVE_RE,
  CHECKPOINT_FILE,
  CHECKPOINT_FORMAT,
  JournalCorruptionError,
  forEachSegmentEntry,
  listSegments,
  segmentName,
} from './journal-files.mjs';
import { deepFreeze, type MemoryState } from './memory-state.js';
import type { AuditEvent, CollectionName, StoredRecord } from './types.js';

export interface CheckpointDoc {
  format: string;
  seq: number;
  auditSeq: number;
  collections: Record<string, [string, StoredRecord][]>;
  /** Events folded before the checkpoint but not yet archived (normally empty). */
  audit: AuditEvent[];
  /** Immutable audit archive files, in seq order. */
  auditArchives?: string[];
  /** Immutable files of archived records, in seq order (their indexes mark superseded entries). */
  coldFiles?: string[];
}

export const emptyCheckpoint = (): CheckpointDoc => ({
  format: CHECKPOINT_FORMAT,
  seq: 0,
  auditSeq: 0,
  collections: {},
  audit: [],
  auditArchives: [],
  coldFiles: [],
});

export interface LoadedStore {
  /** Last journal seq applied. */
  seq: number;
  checkpointSeq: number;
  checkpointBytes: number;
  /** Sealed segments and their valid sizes. */
  sealed: Map<string, number>;
  /** The segment to append to, and its valid size. */
  activeSegment: string;
  activeBytes: number;
}

/** Temp files of a durable write (checkpoint, archive, index) whose rename never happened. */
export function tempLeftovers(names: readonly string[]): string[] {
  return names.filter((name) => name.startsWith('.') && name.endsWith('.tmp'));
}

/**
 * Archives, cold files and their indexes the checkpoint does not list: a compaction that died after
 * writing them but before its checkpoint. Their contents are still in the journal; they must not be read.
 */
export function compactionLeftovers(names: readonly string[], listedFiles: readonly string[]): string[] {
  const listed = new Set(listedFiles.flatMap((name) => [name, indexFileName(name)]));
  return names.filter((name) => {
    const ours = AUDIT_ARCHIVE_RE.test(name) || COLD_FILE_RE.test(name) || /^(audit|cold)-\d{16}-\d{16}\.idx$/.test(name);
    return ours && !listed.has(name);
  });
}

/** A journal entry at replay: already in the checkpoint, the next one, or a gap (corruption). */
export function replayStep(entrySeq: number, appliedSeq: number): 'skip' | 'apply' | 'gap' {
  if (entrySeq <= appliedSeq) return 'skip';
  return entrySeq === appliedSeq + 1 ? 'apply' : 'gap';
}

export async function loadStore(dir: string, state: MemoryState, cold: ColdTier, fsync: boolean): Promise<LoadedStore> {
  for (const name of tempLeftovers(await readdir(dir))) await unlink(join(dir, name));

  const checkpointPath = join(dir, CHECKPOINT_FILE);
  const db = new Low<CheckpointDoc>(new DurableJsonFile<CheckpointDoc>(checkpointPath, { fsync }), emptyCheckpoint());
  await db.read();
  const checkpoint = db.data;
  if (checkpoint.format !== CHECKPOINT_FORMAT || !Number.isSafeInteger(checkpoint.seq)) {
    throw new Error(`store checkpoint ${checkpointPath} has an unknown format`);
  }
  for (const [name, entries] of Object.entries(checkpoint.collections)) {
    const collection = state.collection(name as CollectionName);
    for (const [key, record] of entries) collection.put(key, deepFreeze(record));
  }
  const archives = checkpoint.auditArchives ?? [];
  // Archived audit events stay on disk; only their indexes are loaded.
  for (const name of archives) await cold.loadAuditArchive(name, fsync);
  state.audit.skipThrough(cold.archivedThrough);
  const coldFiles = checkpoint.coldFiles ?? [];
  cold.reserveFor(coldFiles);
  for (const name of coldFiles) cold.loadColdFile(name);
  for (const name of compactionLeftovers(await readdir(dir), [...archives, ...coldFiles])) await unlink(join(dir, name));
  for (const event of checkpoint.audit) state.audit.append(deepFreeze(event));
  let seq = checkpoint.seq;
  const checkpointBytes = await stat(checkpointPath).then((s) => s.size, () => 0);

  const segments = await listSegments(dir);
  const sealed = new Map<string, number>();
  let activeBytes = 0;
  for (const [i, name] of segments.entries()) {
    const file = join(dir, name);
    const isLast = i === segments.length - 1;
    const parsed = forEachSegmentEntry(await readFile(file), file, { allowTornTail: isLast }, (entry, lineNo) => {
      const step = replayStep(entry.seq, seq);
      if (step === 'skip') return; // already folded into the checkpoint
      if (step === 'gap') throw new JournalCorruptionError(file, lineNo, `seq ${entry.seq} does not follow ${seq}`);
      try {
        state.applyFromDisk(entry.ops, entry.seq);
      } catch (error) {
        throw new JournalCorruptionError(file, lineNo, (error as Error).message);
      }
      seq = entry.seq;
    });
    if (parsed.torn) {
      // Crash in the middle of a group-commit write: that batch was never acknowledged.
      await truncate(file, parsed.validBytes);
      if (fsync) {
        const handle = await openFile(file, 'r+');
        await handle.sync().finally(() => handle.close());
      }
    }
    if (isLast) activeBytes = parsed.validBytes;
    else sealed.set(name, parsed.validBytes);
  }
  return { seq, checkpointSeq: checkpoint.seq, checkpointBytes, sealed, activeSegment: segments.at(-1) ?? segmentName(seq + 1), activeBytes };
}
