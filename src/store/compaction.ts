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
  /** `[collection, key]` of each record in `coldFile`, in file order. */
  coldKeys: Array<[string, string]>;
  auditArchive: string | null;
}

export function runCompaction(params: { dir: string; segments: string[]; fsync: boolean }): Promise<CompactionResult> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const worker = new Worker(new URL('./compaction-worker.mjs', import.meta.url), { workerData: params });
    worker.once('message', (message: CompactionResult & { ok: boolean; message?: string }) => {
      settled = true;
      if (message.ok) resolve({ seq: message.seq, folded: message.folded, coldFile: message.coldFile, coldKeys: message.coldKeys, auditArchive: message.auditArchive });
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
