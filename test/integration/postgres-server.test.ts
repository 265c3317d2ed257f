// The throwaway PostgreSQL of the store tests (test/support/postgres-server.ts): a row of a
// committed transaction survives a kill -9 of the server and its crash recovery, and stop() leaves
// no process and no folder behind. Real PostgreSQL (Debian's package, scripts/ensure-postgres.mjs).
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { until } from '../support/until.js';

const child = fileURLToPath(new URL('../support/postgres-server-child.ts', import.meta.url));

const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
};

/** The postmaster's children (checkpointer, walwriter, backends…), from /proc. */
const childrenOf = (ppid: number): number[] =>
  readdirSync('/proc')
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === ppid;
      } catch {
        return false;
      }
    });

async function withClient<T>(url: string, f: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await f(client);
  } finally {
    await client.end();
  }
}

describe('throwaway PostgreSQL', () => {
  let server: ThrowawayPostgres | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('keeps a committed row across a kill -9 and crash recovery, then stops leaving nothing behind', async () => {
    const lines: string[] = [];
    server = await startThrowawayPostgres({ log: (l) => lines.push(l) });
    expect(server.url).toBe(`postgres://postgres@127.0.0.1:${server.port}/postgres`);
    const settings = await withClient(server.url, async (c) => {
      const r = await c.query<{ name: string; setting: string }>(
        `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'listen_addresses') ORDER BY name`,
      );
      return Object.fromEntries(r.rows.map((row) => [row.name, row.setting]));
    });
    expect(settings).toEqual({ fsync: 'on', listen_addresses: '127.0.0.1', synchronous_commit: 'on' });

    const url = await server.createDatabase('durability');
    expect(url).toBe(`postgres://postgres@127.0.0.1:${server.port}/durability`);
    await withClient(url, async (c) => {
      await c.query('CREATE TABLE t (id int PRIMARY KEY, body text NOT NULL)');
      await c.query('BEGIN');
      await c.query(`INSERT INTO t VALUES (1, 'committed before the crash')`);
      await c.query('COMMIT');
    });

    const before = server.pid;
    const children = childrenOf(before);
    expect(children.length).toBeGreaterThan(0);
    await server.crash();
    expect([before, ...children].filter(alive)).toEqual([]);
    await server.restart();
    expect(server.pid).not.toBe(before);
    const rows = await withClient(url, async (c) => (await c.query<{ body: string }>('SELECT body FROM t WHERE id = 1')).rows);
    expect(rows).toEqual([{ body: 'committed before the crash' }]);
    // The restart did crash recovery (WAL replay), not a clean start.
    const serverLog = readFileSync(`${dirname(server.dataDir)}/server.log`, 'utf8');
    expect(serverLog).toMatch(/database system was interrupted|not properly shut down/);

    const last = server.pid;
    const folder = dirname(server.dataDir);
    await server.stop();
    server = undefined;
    expect(alive(last)).toBe(false);
    expect(existsSync(folder)).toBe(false);
    expect(lines.some((l) => l.includes('crashed'))).toBe(true);
  });

  // A test process that dies without stop() must not leave its server running (the suite's
  // leftover check would fail the whole run, and the server would hold a port and memory).
  for (const mode of ['exit', 'wait'] as const) {
    it(`leaves no server and no folder when its process ${mode === 'exit' ? 'exits without stop()' : 'is SIGKILLed'}`, async () => {
      const proc = spawn(process.execPath, ['--import', 'tsx', child, mode], { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise((r) => proc.once('exit', r)); // before `ready`: in 'exit' mode it follows at once
      let out = '';
      proc.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
      const [, pid, dataDir] = await until('the child started its server', () => /ready (\d+) (\S+)\n/.exec(out), 60_000);
      const folder = dirname(dataDir!);
      // (In 'exit' mode the child may already be gone, its hook run: `ready` said it was up.)
      const children = mode === 'wait' ? childrenOf(Number(pid)) : [];
      if (mode === 'wait') expect(children.length).toBeGreaterThan(0);
      if (mode === 'wait') proc.kill('SIGKILL');
      await exited;
      // The 'exit' hook removes the folder before the process is gone (the watchdog, the SIGKILL
      // case's guard, would only notice within a second or so).
      if (mode === 'exit') expect(existsSync(folder)).toBe(false);
      await until('the server and its children to be gone', () => ![Number(pid), ...children].some(alive), 30_000);
      await until('its folder to be removed', () => !existsSync(folder), 30_000);
    });
  }
});
