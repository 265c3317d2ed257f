import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../src/store/sqlite-store.js';
import { storeDirs } from '../support/store-helpers.js';

const env = storeDirs();
afterEach(() => env.cleanup());

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const child = fileURLToPath(new URL('../support/store-crash-child.ts', import.meta.url));

/** Runs the child until it acknowledged `acks` transactions, then SIGKILLs it. Returns the acked keys. */
function runAndKill(dir: string, cycle: number, acks: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', child, dir, String(cycle)], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const acked: string[] = [];
    let buffer = '';
    let stderr = '';
    let killed = false;
    proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split('\n');
      buffer = lines.pop()!;
      for (const line of lines) if (line.startsWith('ack ')) acked.push(line.slice(4));
      if (!killed && acked.length >= acks) {
        killed = true;
        proc.kill('SIGKILL');
      }
    });
    proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    proc.on('error', reject);
    proc.on('exit', (_code, signal) => {
      if (signal === 'SIGKILL') resolve(acked);
      else reject(new Error(`child exited on its own (${String(_code)}): ${stderr}`));
    });
  });
}

describe('store crash safety', () => {
  it('SQLite: every acknowledged transaction survives SIGKILL at arbitrary points', async () => {
    const dir = await env.dir();
    const acknowledged: string[] = [];
    for (const [cycle, acks] of [1, 40, 700, 3000, 150].entries()) {
      acknowledged.push(...(await runAndKill(dir, cycle, acks)));

      const store = createSqliteStore({ dir, indexes: { tasks: ['cycle'] } });
      await store.open();
      for (const key of acknowledged) expect(await store.get('tasks', key), key).toBeDefined();
      const audit = await store.audit();
      const seqs = audit.map((e) => e.seq);
      expect(new Set(seqs).size).toBe(seqs.length);
      expect(new Set(audit.map((e) => e.taskId)).size).toBe(audit.length);
      // Each transaction wrote its record and its audit event together, or neither.
      expect(audit.length).toBe((await store.count('tasks')) + (await store.archivedCount('tasks')));
      for (const key of acknowledged.slice(-20)) expect(await store.audit({ taskId: key })).toHaveLength(1);
      let archivedThisCycle = 0;
      for await (const r of store.scanArchived<{ cycle: string }>('tasks')) if (r.cycle === String(cycle)) archivedThisCycle += 1;
      expect((await store.byIndex('tasks', 'cycle', String(cycle))).length + archivedThisCycle).toBeGreaterThanOrEqual(acks);
      if (acks >= 40) expect(archivedThisCycle).toBeGreaterThan(0);
      await store.close();
    }
  });
});
