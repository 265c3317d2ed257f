// Starts one compaction worker. The worker file is plain .mjs so it loads the same way under node,
// tsx and vitest (none of which give worker threads a TypeScript loader by default).
import { Worker } from 'node:worker_threads';

export interface CompactionResult {
  /** Highest journal seq now inside the checkpoint. */
  seq: number;
  /** Segment file names folded; safe to delete. */
  folded: string[];
  /** The cold file and audit archive this compaction wrote, if any. */
  coldFile: string | null;
  /** `[collection, key]` of each record in `coldFile`, in file order: one JSON array per line. */
  coldKeys: string;
  auditArchive: string | null;
  /** The nice value the compaction thread ran at (getPriority() there). */
  nice: number;
}

/**
 * The compaction thread's nice value (compaction-worker.mjs says why). Linux only: elsewhere (macOS)
 * setpriority(0) would lower the whole process, request path included.
 */
const COMPACTION_NICE = process.platform === 'linux' ? 10 : undefined;

export function runCompaction(params: { dir: string; segments: string[]; fsync: boolean }): Promise<CompactionResult> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const worker = new Worker(new URL('./compaction-worker.mjs', import.meta.url), { workerData: { ...params, nice: COMPACTION_NICE } });
    worker.once('message', (message: CompactionResult & { ok: boolean; message?: string }) => {
      settled = true;
      if (message.ok) resolve({ seq: message.seq, folded: message.folded, coldFile: message.coldFile, coldKeys: message.coldKeys, auditArchive: message.auditArchive, nice: message.nice });
      else reject(new Error(`compaction failed: ${message.message}`));
    });
    worker.once('error', (error) => {
      settled = true;
      reject(error);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`compaction worker exited with code ${code}`));
    });
  });
}
