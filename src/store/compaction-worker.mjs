// Compaction runs here, off the main thread: it reads the previous checkpoint and the sealed
// segments from disk itself (the main thread never clones its state to us), folds them, and writes
// the new checkpoint through lowdb + the durable adapter. The main thread deletes the segments
// only after we report success, so a crash at any point leaves a loadable store: segments whose
// seq is already inside the checkpoint are skipped on replay.
import { parentPort, workerData } from 'node:worker_threads';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Low } from 'lowdb';
import { DurableJsonFile, writeFileDurably } from './durable-json-file.mjs';
import { CHECKPOINT_FILE, CHECKPOINT_FORMAT, auditArchiveName, parseSegment } from './journal-files.mjs';

export function emptyCheckpoint() {
  return { format: CHECKPOINT_FORMAT, seq: 0, auditSeq: 0, collections: {}, audit: [], auditArchives: [] };
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
  const folded = [];
  for (const name of segments) {
    const file = join(dir, name);
    const { entries } = parseSegment(await readFile(file, 'utf8'), file);
    for (const entry of entries) {
      if (entry.seq <= seq) continue;
      if (entry.seq !== seq + 1) throw new Error(`${file}: seq ${entry.seq} follows ${seq}`);
      for (const op of entry.ops) {
        if (op[0] === 'p') collection(op[1]).set(op[2], op[3]);
        else if (op[0] === 'd') collection(op[1]).delete(op[2]);
        else if (op[0] === 'a') {
          // Audit events are append-only and keyed by seq: never duplicated, never dropped.
          if (op[1].seq > auditSeq) {
            newEvents.push(op[1]);
            auditSeq = op[1].seq;
          }
        } else throw new Error(`${file}: unknown op ${JSON.stringify(op[0])}`);
      }
      seq = entry.seq;
    }
    folded.push(name);
  }

  data.auditArchives = [...(data.auditArchives ?? [])];
  if (newEvents.length > 0) {
    // Written (durably) before the checkpoint that lists it; an unlisted archive is a leftover.
    const name = auditArchiveName(newEvents[0].seq, newEvents[newEvents.length - 1].seq);
    await writeFileDurably(join(dir, name), newEvents.map((event) => JSON.stringify(event)).join('\n') + '\n', { fsync });
    data.auditArchives.push(name);
  }
  data.audit = [];
  data.seq = seq;
  data.auditSeq = auditSeq;
  data.collections = {};
  for (const [name, map] of collections) data.collections[name] = [...map];
  await db.write();
  return { seq, folded };
}

if (parentPort && workerData) {
  compact(workerData).then(
    (result) => parentPort.postMessage({ ok: true, ...result }),
    (error) => parentPort.postMessage({ ok: false, message: String(error && error.stack ? error.stack : error) }),
  );
}
