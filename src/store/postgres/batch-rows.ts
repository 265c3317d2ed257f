// What one group-committed batch of transactions writes to PostgreSQL, decided purely: the log
// lines, each touched record's final value (a key written by several transactions of the batch is
// written once, as the journal's compaction would fold it), and the checks the database makes
// before anything is written — keys the batch inserts must be absent, compare-and-swaps must find
// the version they expected — so PostgreSQL itself refuses a second writer's stale view.
import type { Op } from '../memory-state.js';
import type { CasExpectation } from '../transaction.js';
import type { AuditEvent, StoredRecord } from '../types.js';

export interface CommittedEntry {
  seq: number;
  ops: readonly Op[];
  line: string;
  expectations: readonly CasExpectation[];
}

export interface BatchRows {
  firstSeq: number;
  lastSeq: number;
  log: { seq: string[]; line: string[] };
  /** Records whose final value in the batch is stored (hot or archived). */
  upserts: { collection: string[]; key: string[]; body: string[]; version: (string | null)[]; archived: boolean[]; seq: string[] };
  deletes: { collection: string[]; key: string[] };
  /** Keys the batch creates: they must not exist when it starts. */
  absent: { collection: string[]; key: string[] };
  /** Versions the batch's first write of a key compared against. */
  cas: { collection: string[]; key: string[]; field: string[]; expected: string[] };
  audit: { seq: string[]; at: string[]; action: string[]; level: string[]; taskId: (string | null)[]; deliveryId: (string | null)[]; actorId: (string | null)[]; event: string[] };
}

type RecordOp = Exclude<Op, readonly ['a', AuditEvent] | readonly ['x', ...unknown[]]>;

function* flatten(ops: readonly Op[]): Generator<Op> {
  for (const op of ops) {
    if (op[0] === 'x') yield* flatten(op[3]);
    else yield op;
  }
}

const versionOf = (body: StoredRecord): string | null => {
  const v = typeof body['stateVersion'] === 'number' ? body['stateVersion'] : body['version'];
  return typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : null;
};

const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

export function batchRows(entries: readonly CommittedEntry[]): BatchRows {
  if (entries.length === 0) throw new Error('batchRows: an empty batch');
  const rows: BatchRows = {
    firstSeq: entries[0]!.seq,
    lastSeq: entries.at(-1)!.seq,
    log: { seq: [], line: [] },
    upserts: { collection: [], key: [], body: [], version: [], archived: [], seq: [] },
    deletes: { collection: [], key: [] },
    absent: { collection: [], key: [] },
    cas: { collection: [], key: [], field: [], expected: [] },
    audit: { seq: [], at: [], action: [], level: [], taskId: [], deliveryId: [], actorId: [], event: [] },
  };
  const touched = new Set<string>();
  const final = new Map<string, { op: RecordOp; seq: number }>();
  for (const [i, entry] of entries.entries()) {
    if (i > 0 && entry.seq !== entries[i - 1]!.seq + 1) throw new Error(`batchRows: seq ${entry.seq} does not follow ${entries[i - 1]!.seq}`);
    rows.log.seq.push(String(entry.seq));
    rows.log.line.push(entry.line);
    // A compare-and-swap on a key an earlier transaction of this batch wrote was checked against
    // that write, in memory; only the batch's first look at a key is the database's to check.
    for (const e of entry.expectations) {
      const id = `${e.collection}\u0000${e.key}`;
      if (touched.has(id)) continue;
      rows.cas.collection.push(e.collection);
      rows.cas.key.push(e.key);
      rows.cas.field.push(e.field);
      rows.cas.expected.push(String(e.expected));
    }
    for (const op of flatten(entry.ops)) {
      if (op[0] === 'a') {
        const event = op[1];
        rows.audit.seq.push(String(event.seq));
        rows.audit.at.push(event.timestamp);
        rows.audit.action.push(event.action);
        rows.audit.level.push(event.level ?? 'info');
        rows.audit.taskId.push(text(event.taskId));
        rows.audit.deliveryId.push(text(event.deliveryId));
        rows.audit.actorId.push(text(event.actorId));
        rows.audit.event.push(JSON.stringify(event));
        continue;
      }
      if (op[0] === 'x') continue; // flattened above
      const id = `${op[1]}\u0000${op[2]}`;
      if (!touched.has(id)) {
        touched.add(id);
        if (op[0] !== 'd' && op[4] === true) {
          rows.absent.collection.push(op[1]);
          rows.absent.key.push(op[2]);
        }
      }
      final.set(id, { op: op as RecordOp, seq: entry.seq });
    }
  }
  for (const { op, seq } of final.values()) {
    if (op[0] === 'd') {
      rows.deletes.collection.push(op[1]);
      rows.deletes.key.push(op[2]);
      continue;
    }
    const body = op[3] as StoredRecord;
    rows.upserts.collection.push(op[1]);
    rows.upserts.key.push(op[2]);
    rows.upserts.body.push(JSON.stringify(body));
    rows.upserts.version.push(versionOf(body));
    rows.upserts.archived.push(op[0] === 'c');
    rows.upserts.seq.push(String(seq));
  }
  return rows;
}
