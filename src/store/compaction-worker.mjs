// Compaction runs here, off the main thread: it reads the previous checkpoint and the sealed
// segments from disk itself (the main thread never clones its state to us), folds them, and writes
// the new checkpoint through lowdb + the durable adapter. The main thread deletes the segments
// only after we report success, so a crash at any point leaves a loadable store: segments whose
// seq is already inside the checkpoint are skipped on replay.
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Low } from 'lowdb';
import { DurableJsonFile, writeFileDurably } from './durable-json-file.mjs';
import { expandDerived } from './derived/index.mjs';
import { CHECKPOINT_FILE, CHECKPOINT_FORMAT, auditArchiveName, parseSegment } from './journal-files.mjs';
import {
  buildAuditArchive,
  buildColdFile,
  COLD_ENTRY_WORDS,
  closeQuietly,
  coldFileName,
  decodeColdIndex,
  encodeColdIndex,
  hash32,
  indexFileName,
  openForRead,
  readColdLine,
  recordId,
} from './cold-files.mjs';

export function emptyCheckpoint() {
  return { format: CHECKPOINT_FORMAT, seq: 0, auditSeq: 0, collections: {}, audit: [], auditArchives: [], coldFiles: [] };
}

async function compact({ dir, segments, fsync }) {
  const db = new Low(new DurableJsonFile(join(dir, CHECKPOINT_FILE), { fsync }), emptyCheckpoint());
  await db.read();
  const data = db.data;
  if (data.format !== CHECKPOINT_FORMAT) throw new Error(`unknown checkpoint format ${String(data.format)}`);

  // Maps keep insertion order, which is the order list() promises.
  const collections = new Map();
  for (const [name, entries] of Object.entries(data.collections)) collections.set(name, new Map(entries));
  const collection = (name) => {
    let map = collections.get(name);
    if (!map) collections.set(name, (map = new Map()));
    return map;
  };

  let seq = data.seq;
  let auditSeq = data.auditSeq;
  // Audit events leave the checkpoint for immutable archive files, one per compaction: the
  // checkpoint then stays proportional to live records, not to history.
  const newEvents = [...(data.audit ?? [])];
  // Records archived ('c') by the folded transactions go to a new cold file; a key written or
  // deleted afterwards ('p'/'d') supersedes any copy in an older cold file.
  const newCold = new Map();
  const touched = new Set();
  const folded = [];
  for (const name of segments) {
    const file = join(dir, name);
    const { entries } = parseSegment(await readFile(file, 'utf8'), file);
    for (const entry of entries) {
      if (entry.seq <= seq) continue;
      if (entry.seq !== seq + 1) throw new Error(`${file}: seq ${entry.seq} follows ${seq}`);
      for (const op of entry.ops) {
        // A derived record stands for the ops it expands to (derived/index.mjs), folded like any other.
        for (const o of op[0] === 'x' ? expandDerived(op[1], op[2]) : [op]) {
          if (o[0] === 'p' || o[0] === 'd' || o[0] === 'c') {
            const id = recordId(o[1], o[2]);
            newCold.delete(id);
            if (o[0] === 'p') collection(o[1]).set(o[2], o[3]);
            else collection(o[1]).delete(o[2]);
            if (o[0] === 'c') newCold.set(id, [o[1], o[2], o[3]]);
            touched.add(id);
          } else if (o[0] === 'a') {
            // Audit events are append-only and keyed by seq: never duplicated, never dropped.
            if (o[1].seq > auditSeq) {
              newEvents.push(o[1]);
              auditSeq = o[1].seq;
            }
          } else throw new Error(`${file}: unknown op ${JSON.stringify(o[0])}`);
        }
      }
      seq = entry.seq;
    }
    folded.push(name);
  }

  const coldFiles = [...(data.coldFiles ?? [])];
  await retireSupersededColdCopies(dir, coldFiles, touched, fsync);
  let coldFile = null;
  let coldKeys = '';
  if (newCold.size > 0) {
    // Data file and index are durable before the checkpoint that lists them; an unlisted pair is a leftover.
    coldFile = coldFileName(data.seq + 1, seq);
    const entries = [...newCold.values()];
    // The main thread matches its pending records to these exactly (hashes alone may collide). One
    // string of JSON lines, not an array of pairs: structured-cloning 100k pairs costs the main thread
    // ≈ 25 ms in one piece, a string ≈ 2 ms, and the lines can be read a slice at a time.
    coldKeys = entries.map(([collection, key]) => JSON.stringify([collection, key])).join('\n');
    const { text, index } = buildColdFile(entries);
    await writeFileDurably(join(dir, coldFile), text, { fsync });
    await writeFileDurably(join(dir, indexFileName(coldFile)), index, { fsync });
    coldFiles.push(coldFile);
  }

  data.auditArchives = [...(data.auditArchives ?? [])];
  let auditArchive = null;
  if (newEvents.length > 0) {
    // Written (durably) before the checkpoint that lists it; an unlisted archive is a leftover.
    auditArchive = auditArchiveName(newEvents[0].seq, newEvents[newEvents.length - 1].seq);
    const { text, index } = buildAuditArchive(newEvents);
    await writeFileDurably(join(dir, auditArchive), text, { fsync });
    await writeFileDurably(join(dir, indexFileName(auditArchive)), index, { fsync });
    data.auditArchives.push(auditArchive);
  }
  data.audit = [];
  data.seq = seq;
  data.auditSeq = auditSeq;
  data.coldFiles = coldFiles;
  data.collections = {};
  for (const [name, map] of collections) data.collections[name] = [...map];
  await db.write();
  return { seq, folded, coldFile, coldKeys, auditArchive };
}

/**
 * Marks dead, in the indexes of older cold files, the copies of keys the folded transactions wrote
 * or deleted. A rewritten index only ever reflects journal entries that are already durable, so a
 * crash before the new checkpoint lands is harmless: replay makes the same decision again.
 */
async function retireSupersededColdCopies(dir, coldFiles, touched, fsync) {
  if (touched.size === 0 || coldFiles.length === 0) return;
  const hashes = new Map();
  for (const id of touched) {
    const h = hash32(id);
    const ids = hashes.get(h);
    if (ids) ids.push(id);
    else hashes.set(h, [id]);
  }
  for (const name of coldFiles) {
    const indexPath = join(dir, indexFileName(name));
    const words = decodeColdIndex(await readFile(indexPath));
    let changed = false;
    let fd = null;
    try {
      for (let i = 0; i < words.length; i += COLD_ENTRY_WORDS) {
        if (words[i + 2] === 0 || !hashes.has(words[i])) continue;
        fd ??= openForRead(join(dir, name));
        const [collection, key] = readColdLine(fd, words[i + 1], words[i + 2]);
        if (!hashes.get(words[i]).includes(recordId(collection, key))) continue;
        words[i + 2] = 0;
        changed = true;
      }
    } finally {
      if (fd !== null) closeQuietly(fd);
    }
    if (changed) await writeFileDurably(indexPath, encodeColdIndex(words), { fsync });
  }
}

if (parentPort && workerData) {
  // Background work: on Linux a thread's nice value is its own, so this lowers only this thread.
  // With two cores, a compaction at the same priority takes a whole core from the request path for
  // seconds (p99 of the webhook at 80 % load went from ≈ 30 to 60+ ms); at nice 10 it takes what the
  // request path leaves, and still ≈ 10 % when the machine is saturated, so it never stalls.
  if (typeof workerData.nice === 'number') {
    try {
      // Never raises it: a service started under `nice` keeps compaction at least as low.
      setPriority(Math.max(getPriority(), workerData.nice));
    } catch {
      // Not permitted or not supported here: compaction runs at the main thread's priority.
    }
  }
  compact(workerData).then(
    (result) => parentPort.postMessage({ ok: true, ...result, nice: getPriority() }),
    (error) => parentPort.postMessage({ ok: false, message: String(error && error.stack ? error.stack : error) }),
  );
}
