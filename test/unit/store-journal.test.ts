// The embedded journal engine's own files (journal segments, checkpoint, audit archives, compaction), on it
// and on the PostgreSQL replica built on it. The contract every engine keeps is test/unit/store.test.ts.
import { appendFile, readFile, readdir, writeFile, copyFile, stat, mkdir } from 'node:fs/promises';
import { execa } from 'execa';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { JournalCorruptionError, type AuditEvent } from '../../src/store/index.js';
import { onPostgres, storeDirs } from '../support/store-helpers.js';

const env = storeDirs('journal');
afterEach(() => env.cleanup());

const INDEXES = { tasks: ['repoKey', 'state'], webhook_deliveries: ['taskId'] };

async function journalText(dir: string): Promise<string> {
  const names = (await readdir(dir)).filter((n) => n.startsWith('journal-')).sort();
  let text = '';
  for (const name of names) text += await readFile(join(dir, name), 'utf8');
  return text;
}

function expectUniqueSeqs(events: AuditEvent[]) {
  const seqs = events.map((e) => e.seq);
  expect(new Set(seqs).size).toBe(seqs.length);
  expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
  expect(new Set(events.map((e) => e.eventId)).size).toBe(events.length);
}

/** On PostgreSQL the replica is only a cache: one that cannot be read is rebuilt from the database's log. */
async function expectRebuiltReplica(dir: string, keys: string[]): Promise<void> {
  const rebuilt = await env.open({ dir });
  expect((await rebuilt.list('tasks')).length).toBe(keys.length);
  for (const key of keys) expect((await rebuilt.get('tasks', key))).toEqual({});
  expect((rebuilt as unknown as { rebuiltBecause?: string }).rebuiltBecause).toMatch(/could not be read/);
}

describe('store journal: torn and corrupt lines', () => {
  it('drops a torn last journal line and keeps working', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    await store.transact((tx) => tx.insert('tasks', 'a', { v: 1 }));
    await store.transact((tx) => tx.insert('tasks', 'b', { v: 2 }));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    const file = join(dir, segment!);
    const goodSize = (await stat(file)).size;
    await appendFile(file, '{"seq":3,"ops":[["p","tasks","c",{"v":');

    const again = await env.open({ dir });
    expect((await again.list('tasks'))).toEqual([{ v: 1 }, { v: 2 }]);
    expect((await stat(file)).size).toBe(goodSize);
    await again.transact((tx) => tx.insert('tasks', 'c', { v: 3 }));
    await again.close();
    const third = await env.open({ dir });
    expect((await third.list('tasks'))).toEqual([{ v: 1 }, { v: 2 }, { v: 3 }]);
  });

  it('drops a torn tail of zero bytes (file extended, data not written)', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    await store.transact((tx) => tx.insert('tasks', 'a', { v: 1 }));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    await appendFile(join(dir, segment!), Buffer.alloc(300));
    const again = await env.open({ dir });
    expect((await again.list('tasks'))).toEqual([{ v: 1 }]);
  });

  it('refuses to open a journal corrupted before its last line, naming file and line', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    for (let i = 0; i < 3; i++) await store.transact((tx) => tx.insert('tasks', `t${i}`, {}));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    const file = join(dir, segment!);
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines[1] = lines[1]!.slice(0, 10) + 'garbage';
    await writeFile(file, lines.join('\n'));
    if (onPostgres) return expectRebuiltReplica(dir, ['t0', 't1', 't2']);

    const error = await env.open({ dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalCorruptionError);
    expect((error as Error).message).toContain(file);
    expect((error as Error).message).toContain('line 2');
  });

  it('refuses a seq gap in the journal', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    for (let i = 0; i < 3; i++) await store.transact((tx) => tx.insert('tasks', `t${i}`, {}));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    const file = join(dir, segment!);
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines.splice(1, 1);
    await writeFile(file, lines.join('\n'));
    if (onPostgres) return expectRebuiltReplica(dir, ['t0', 't1', 't2']);
    await expect(env.open({ dir })).rejects.toThrow(/line 2: seq 3 does not follow 1/);
  });
});

describe('store segments and compaction', () => {
  async function fill(store: Awaited<ReturnType<typeof env.open>>, from: number, to: number) {
    const pending: Promise<unknown>[] = [];
    for (let i = from; i < to; i++) {
      pending.push(
        store.transact(async (tx) => {
          const key = `t${i % 40}`;
          const current = await tx.get<{ stateVersion: number }>('tasks', key);
          if (current) await tx.put('tasks', key, { repoKey: 'r', state: `s${i}`, pad: 'x'.repeat(100), stateVersion: 0 }, { expectVersion: current.stateVersion, versionField: 'stateVersion' });
          else await tx.insert('tasks', key, { repoKey: 'r', state: `s${i}`, stateVersion: 1 });
          if (i % 7 === 0) await tx.delete('tasks', `t${(i + 3) % 40}`);
          await tx.appendAudit({ action: 'task.transition', actor: 'system', taskId: key, actorId: `task:${key}`, stateVersion: i });
        }),
      );
    }
    await Promise.all(pending);
  }

  it('rotates segments and compacts them in a worker; same state and audit after reopen', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, segmentBytes: 4096, indexes: INDEXES });
    await fill(store, 0, 300);
    await store.compactionIdle();
    await fill(store, 300, 600);
    await store.compact();
    expect(store.stats().compactions).toBeGreaterThanOrEqual(1);
    expect(store.stats().lastCheckpointSeq).toBe(600);
    await fill(store, 600, 700); // some tail left in the journal, not yet compacted
    const tasks = (await store.list('tasks'));
    const audit = (await store.audit());
    expect(audit).toHaveLength(700);
    expectUniqueSeqs(audit);
    await store.close();

    const again = await env.open({ dir, indexes: INDEXES });
    expect((await again.list('tasks'))).toEqual(tasks);
    expect((await again.audit())).toEqual(audit);
    expect((await again.byIndex('tasks', 'state', 's699'))).toHaveLength(1);
    await again.compact();
    expect(again.stats().segments).toBe(0);
    await again.close();
    const third = await env.open({ dir, indexes: INDEXES });
    expect((await third.audit())).toEqual(audit);
    expect((await third.list('tasks'))).toEqual(tasks);
  });

  it('compacts automatically as segments seal (worker under vitest)', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, segmentBytes: 2048 });
    for (let round = 0; round < 5; round++) {
      await fill(store, round * 100, round * 100 + 100);
      await store.compactionIdle();
    }
    expect(store.lastCompactionError).toBeUndefined();
    expect(store.stats().compactions).toBeGreaterThanOrEqual(1);
    expect(store.stats().lastCheckpointSeq).toBeGreaterThan(0);
    const audit = (await store.audit());
    await store.close();
    const again = await env.open({ dir });
    expect((await again.audit())).toEqual(audit);
    expectUniqueSeqs((await again.audit()));
  });

  it('a crash between checkpoint and segment deletion neither loses nor duplicates anything', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, segmentBytes: 1 << 30 });
    await fill(store, 0, 100);
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    await copyFile(join(dir, segment!), join(dir, 'saved'));
    await store.compact();
    const audit = (await store.audit());
    const tasks = (await store.list('tasks'));
    await store.close();
    // Put the folded segment back, as if the process died before unlinking it.
    await copyFile(join(dir, 'saved'), join(dir, segment!));

    const again = await env.open({ dir });
    expect((await again.audit())).toEqual(audit);
    expect((await again.list('tasks'))).toEqual(tasks);
    await fill(again, 100, 120);
    await again.compact();
    await again.close();
    const third = await env.open({ dir });
    expect((await third.audit())).toHaveLength(120);
    expectUniqueSeqs((await third.audit()));
  });
});

describe('store audit archives', () => {
  it('moves audit events out of the checkpoint into archives; ignores an unlisted (crash leftover) archive', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    for (let i = 0; i < 30; i++) await store.transact((tx) => tx.appendAudit({ action: 'a', actor: 'system', taskId: `t${i}` }));
    await store.compact();
    for (let i = 30; i < 40; i++) await store.transact((tx) => tx.appendAudit({ action: 'a', actor: 'system', taskId: `t${i}` }));
    await store.compact();
    const audit = (await store.audit());
    await store.close();

    const checkpoint = JSON.parse(await readFile(join(dir, 'checkpoint.json'), 'utf8'));
    expect(checkpoint.audit).toEqual([]);
    expect(checkpoint.auditArchives).toHaveLength(2);
    // A compaction that died before its checkpoint: archive written, not listed.
    const leftover = 'audit-0000000000000041-0000000000000050.ndjson';
    await writeFile(join(dir, leftover), audit.slice(30).map((e) => JSON.stringify(e)).join('\n') + '\n');

    const again = await env.open({ dir });
    expect((await again.audit())).toEqual(audit);
    expect((await readdir(dir)).includes(leftover)).toBe(false);
    expectUniqueSeqs((await again.audit()));
  });

  it('filters by level in the archives and in memory; an event without a level is info', async () => {
    const store = await env.open({ dir: await env.dir() });
    const levels = [undefined, 'security', 'alert', 'info', 'security'] as const;
    const write = (round: number) =>
      store.transact(async (tx) => {
        for (const [i, level] of levels.entries()) await tx.appendAudit({ action: `a${round}.${i}`, actor: 'system', taskId: 't', ...(level ? { level } : {}) });
      });
    await write(0);
    await store.compact(); // round 0 is archived, round 1 stays in memory
    await write(1);
    expect((await store.audit({ level: 'security' })).map((e) => e.action)).toEqual(['a0.1', 'a0.4', 'a1.1', 'a1.4']);
    expect((await store.audit({ level: 'info', taskId: 't' })).map((e) => e.action)).toEqual(['a0.0', 'a0.3', 'a1.0', 'a1.3']);
    expect((await store.audit({ level: 'alert', limit: 1 })).map((e) => e.action)).toEqual(['a0.2']);
    await store.close();
  });
});

describe('store: several writes of one key in a transaction', () => {
  it('journals the key once, with its last value, and replays to the same state', async () => {
    const { mkdtempSync, readdirSync, readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { DurableStore } = await import('../../src/store/index.js');
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-coalesce-'));
    const store = new DurableStore({ dir });
    await store.open();
    await store.transact(async (tx) => {
      await tx.insert('tasks', 't', { state: 'received', stateVersion: 0 });
      await tx.put('tasks', 't', { state: 'queued', stateVersion: 0 }, { expectVersion: 0, versionField: 'stateVersion' });
      await tx.put('tasks', 't', { ...(await tx.get('tasks', 't')), note: 'x' });
      await tx.insert('tasks', 'gone', { a: 1 });
      await tx.delete('tasks', 'gone');
      await tx.appendAudit({ action: 'a1', actor: 'test' });
      await tx.appendAudit({ action: 'a2', actor: 'test' });
    });
    await store.close();
    const journal = readdirSync(dir).filter((f) => f.startsWith('journal-'));
    const line = readFileSync(join(dir, journal[0]!), 'utf8').trim().split('\n').at(-1)!;
    const ops = (JSON.parse(line) as { ops: unknown[][] }).ops;
    expect(ops.map((o) => [o[0], o[2] ?? (o[1] as { action: string }).action])).toEqual([['p', 't'], ['a', 'a1'], ['a', 'a2']]);
    const again = new DurableStore({ dir });
    await again.open();
    expect((await again.get('tasks', 't'))).toEqual({ state: 'queued', stateVersion: 1, note: 'x' });
    expect((await again.get('tasks', 'gone'))).toBeUndefined();
    await again.close();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('store checkpoint text', () => {
  it('is one JSON document with an entry per line, read back line by line, and old single-line checkpoints still load', async () => {
    const { toLineJson, parseLineJson } = await import('../../src/store/durable-json-file.mjs');
    const doc = {
      format: 'ccweb-store/1',
      seq: 7,
      collections: { tasks: [['a', { s: 'line\nbreak, "quoted" ],' }], ['b', { n: 2 }]], empty: [], leases: [['r', { held: true }]] },
      audit: [],
    };
    const text = toLineJson(doc);
    expect(JSON.parse(text)).toEqual(doc);
    expect(text.split('\n').length).toBeGreaterThan(6);
    expect(parseLineJson(text)).toEqual(doc);
    expect(parseLineJson(JSON.stringify(doc))).toEqual(doc);
    expect(() => parseLineJson(text.slice(0, text.lastIndexOf('\n')))).toThrow(/ends early/);
    expect(() => parseLineJson(text.replace('"b",{"n":2}', '"b",{"n":'))).toThrow();
  });
});

describe('durable file writes', () => {
  const env = storeDirs('journal');
  afterEach(() => env.cleanup());

  it('a text larger than one flush slice is written whole, a surrogate pair at a slice boundary intact', async () => {
    const { writeFileDurably } = await import('../../src/store/durable-json-file.mjs');
    const dir = await env.dir();
    const slice = 2 * 1024 * 1024;
    // '😀' (two UTF-16 units) straddles the first slice boundary; more such pairs further on.
    const text = `${'a'.repeat(slice - 1)}😀${'é'.repeat(slice)}${'😀'.repeat(slice / 2)}end`;
    await writeFileDurably(join(dir, 'big.json'), text, { fsync: true });
    const back = await readFile(join(dir, 'big.json'), 'utf8');
    expect(back.length).toBe(text.length);
    expect(back === text).toBe(true);
    expect((await readdir(dir)).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  // A real short write, not a double: the file-size limit (`ulimit -f`, whose signal Node ignores) makes
  // write(2) write part of a piece and return. Linux and bash only.
  it.runIf(process.platform === 'linux')('a short write fails the whole write: neither the file nor a temp file is left', async () => {
    const dir = await env.dir();
    const script = join(dir, 'write.mjs');
    await writeFile(
      script,
      [
        `const { writeFileDurably } = await import(${JSON.stringify(new URL('../../src/store/durable-json-file.mjs', import.meta.url).href)});`,
        // 3.5 MB under a 3 MB limit: the first 2 MB piece fits, the second is cut short.
        `try { await writeFileDurably(${JSON.stringify(join(dir, 'out', 'ck.json'))}, 'x'.repeat(3.5 * 1024 * 1024), { fsync: true }); console.log('resolved'); }`,
        `catch (error) { console.log('rejected', error.code); }`,
      ].join('\n'),
    );
    await mkdir(join(dir, 'out'));
    const { stdout } = await execa('bash', ['-c', `ulimit -f 3072; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(script)}`]);
    expect(stdout.trim()).toBe('rejected EFBIG');
    expect(await readdir(join(dir, 'out'))).toEqual([]);
  });
});
