// `ccweb-gitea export-audit`: the audit history as NDJSON (one event per line), read offline.
import { createWriteStream } from 'node:fs';
import { join, resolve } from 'node:path';
import { once } from 'node:events';
import { readAuditOffline, type AuditFilter } from './read-audit-offline.js';
import { UsageError } from './usage-error.js';

export interface ExportAuditOptions {
  dataDir: string;
  taskId?: string;
  from?: string;
  to?: string;
  out?: string;
}

function time(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw new UsageError(`${flag} ${value} is not a date: use ISO-8601, e.g. 2026-05-01 or 2026-05-01T12:00:00Z`);
  return t;
}

/** Writes the events; returns how many. `stdout` is used when `out` is not given. */
export async function exportAudit(options: ExportAuditOptions, stdout: NodeJS.WritableStream): Promise<number> {
  const filter: AuditFilter = {};
  if (options.taskId !== undefined) filter.taskId = options.taskId;
  const from = time('--from', options.from);
  const to = time('--to', options.to);
  if (from !== undefined) filter.from = from;
  if (to !== undefined) filter.to = to;
  const sink = options.out ? createWriteStream(resolve(options.out)) : stdout;
  const n = await readAuditOffline(join(options.dataDir, 'store'), filter, (e) => {
    sink.write(`${JSON.stringify(e)}\n`);
  });
  if (options.out) {
    sink.end();
    await once(sink, 'finish');
  }
  return n;
}
