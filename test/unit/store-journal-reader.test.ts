// The reader of an earlier version's journal store (src/upgrade/journal-reader.ts) gives what that
// version's own engine read from the same files (test/fixtures/journal-stores/: history with overwrites,
// deletes, archives superseded in cold files and in the journal, derived records, an escaped key;
// the journal alone; crash leftovers and a torn last line; the layout from before indexes), and
// changes nothing on disk.
import { createHash } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { holdsJournalStore, openJournalStore } from '../../src/upgrade/journal-reader.js';
import { copyFixture, dumpOf, expectedDump, fixtureDir, JOURNAL_FIXTURES } from '../support/journal-fixtures.js';

const parents: string[] = [];
afterEach(() => {
  for (const parent of parents.splice(0)) rmSync(parent, { recursive: true, force: true });
});

function copy(name: (typeof JOURNAL_FIXTURES)[number]): string {
  const { parent, dir } = copyFixture(name);
  parents.push(parent);
  return dir;
}

function filesDigest(dir: string): string {
  const hash = createHash('sha256');
  for (const name of readdirSync(dir).sort()) hash.update(`${name}\n`).update(readFileSync(join(dir, name))).update(String(statSync(join(dir, name)).mtimeMs));
  return hash.digest('hex');
}

describe('journal store reader', () => {
  it.each(JOURNAL_FIXTURES)('reads %s as the journal engine did, writing nothing', async (name) => {
    const dir = copy(name);
    const before = filesDigest(dir);
    expect(holdsJournalStore(dir)).toBe(true);
    const store = await openJournalStore(dir);
    expect(await dumpOf(store.records(), store.audit())).toEqual(expectedDump(name));
    // Read twice, the same (the files are streamed again, not consumed).
    expect(await dumpOf(store.records(), store.audit())).toEqual(expectedDump(name));
    expect(filesDigest(dir)).toBe(before);
  });

  it('the fixtures hold what they are named for', () => {
    const names = (fixture: (typeof JOURNAL_FIXTURES)[number]) => readdirSync(fixtureDir(fixture));
    expect(names('history').filter((n) => n.startsWith('journal-')).length).toBeGreaterThan(1);
    expect(names('history').filter((n) => /^cold-.*\.ndjson$/.test(n)).length).toBe(2);
    expect(names('journal-only')).toEqual(['journal-0000000000000001.ndjson']);
    expect(names('old-layout').some((n) => /^audit-.*\.idx$/.test(n))).toBe(false);
    expect(readFileSync(join(fixtureDir('old-layout'), 'checkpoint.json'), 'utf8').trim().split('\n')).toHaveLength(1);
    const leftovers = names('crash-leftovers');
    const listed = JSON.parse(readFileSync(join(fixtureDir('crash-leftovers'), 'checkpoint.json'), 'utf8')) as { coldFiles: string[]; auditArchives: string[] };
    expect(leftovers.filter((n) => /^(cold|audit)-.*\.ndjson$/.test(n) && ![...listed.coldFiles, ...listed.auditArchives].includes(n)).length).toBe(2);
    const last = leftovers.filter((n) => n.startsWith('journal-')).sort().at(-1)!;
    expect(readFileSync(join(fixtureDir('crash-leftovers'), last), 'utf8').endsWith('\n')).toBe(false);
    const history = expectedDump('history');
    expect(history.records.some((r) => r.key.includes('"') && r.key.includes('\n') && r.archived)).toBe(true);
    expect(history.records.some((r) => r.collection === 'actors' && r.key.startsWith('task:gitea-task-'))).toBe(true);
  });

  it('refuses a line broken before the last one, naming file and line', async () => {
    const dir = copy('history');
    const first = readdirSync(dir).filter((n) => n.startsWith('journal-')).sort()[0]!;
    const lines = readFileSync(join(dir, first), 'utf8').split('\n');
    lines[1] = lines[1]!.slice(0, 20);
    writeFileSync(join(dir, first), lines.join('\n'));
    await expect(openJournalStore(dir)).rejects.toThrow(`store journal ${join(dir, first)} is corrupt at line 2`);
  });

  it('refuses a torn line that is not the last of the last segment', async () => {
    const dir = copy('crash-leftovers');
    const last = readdirSync(dir).filter((n) => n.startsWith('journal-')).sort().at(-1)!;
    appendFileSync(join(dir, last), '\n{"seq":21,"ops":[]}\n');
    await expect(openJournalStore(dir)).rejects.toThrow(/corrupt at line 1: /);
  });

  it('refuses a gap in the journal and an unknown collection', async () => {
    const dir = copy('journal-only');
    const file = join(dir, 'journal-0000000000000001.ndjson');
    const text = readFileSync(file, 'utf8');
    writeFileSync(file, `${text}{"seq":99,"ops":[]}\n`);
    await expect(openJournalStore(dir)).rejects.toThrow(/corrupt at line 8: seq 99 does not follow 7/);
    writeFileSync(file, `${text}{"seq":8,"ops":[["p","nope","k",{}]]}\n`);
    await expect(openJournalStore(dir)).rejects.toThrow(/corrupt at line 8: unknown collection "nope"/);
  });

  it('skips a journal audit event the checkpoint holds already, as compaction did; refuses one out of order after it', async () => {
    const dir = copy('history');
    const file = join(dir, 'journal-0000000000000048.ndjson');
    const text = readFileSync(file, 'utf8');
    const expected = expectedDump('history').audit;
    const auditSeq = (JSON.parse(readFileSync(join(dir, 'checkpoint.json'), 'utf8').split('\n')[0]!.replace(/"collections":\{$/, '"collections":{}}')) as { auditSeq: number }).auditSeq;
    const held = expected.find((e) => e.seq === auditSeq)!;
    const last = expected.at(-1)!;
    expect(last.seq).toBeGreaterThan(auditSeq + 1);
    const next = { ...last, eventId: 'audit-next', seq: last.seq + 1 };
    writeFileSync(file, `${text}${JSON.stringify({ seq: 49, ops: [['a', held], ['a', next]] })}\n`);
    const events = [];
    for await (const e of (await openJournalStore(dir)).audit()) events.push(e);
    expect(events).toEqual([...expected, next]);
    // After the checkpoint's events, a journal event that does not follow the one before is disorder the engine refused.
    writeFileSync(file, `${text}${JSON.stringify({ seq: 49, ops: [['a', { ...next, seq: auditSeq + 1 }]] })}\n`);
    const store = await openJournalStore(dir);
    await expect((async () => {
      for await (const e of store.audit()) void e;
    })()).rejects.toThrow(`audit event ${auditSeq + 1} does not follow ${last.seq}`);
  });

  it('refuses a derived record of a format it does not know (a journal a newer version wrote), naming it', async () => {
    const dir = copy('journal-only');
    appendFileSync(join(dir, 'journal-0000000000000001.ndjson'), '{"seq":8,"ops":[["x","intake.accept/9",{"a0":5}]]}\n');
    await expect(openJournalStore(dir)).rejects.toThrow(/corrupt at line 8: unknown derived-record format "intake.accept\/9"/);
  });

  it('refuses a checkpoint it does not know, and a directory without a journal store', async () => {
    const dir = copy('old-layout');
    writeFileSync(join(dir, 'checkpoint.json'), JSON.stringify({ format: 'ccweb-store/moved-to-sqlite', seq: 0 }));
    await expect(openJournalStore(dir)).rejects.toThrow(/has an unknown format "ccweb-store\/moved-to-sqlite"/);
    for (const name of readdirSync(dir)) rmSync(join(dir, name));
    expect(holdsJournalStore(dir)).toBe(false);
    await expect(openJournalStore(dir)).rejects.toThrow(/holds no journal store/);
  });

  it('a cold entry its index marks dead is not read as a record', async () => {
    const dir = copy('history');
    const cold = readdirSync(dir).filter((n) => /^cold-.*\.idx$/.test(n)).sort()[0]!;
    const index = readFileSync(join(dir, cold));
    const lines = readFileSync(join(dir, cold.replace(/\.idx$/, '.ndjson')), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as [string, string]);
    const expected = expectedDump('history');
    const isArchivedHere = (r: (typeof expected.records)[number]) => r.archived && lines.some(([c, k], i) => c === r.collection && k === r.key && index.readUInt32LE(i * 16 + 8) !== 0);
    const here = expected.records.filter(isArchivedHere);
    expect(here.length).toBeGreaterThan(3);
    for (let i = 0; i < index.length; i += 16) index.writeUInt32LE(0, i + 8);
    writeFileSync(join(dir, cold), index);
    const store = await openJournalStore(dir);
    expect((await dumpOf(store.records(), store.audit())).records).toEqual(expected.records.filter((r) => !here.includes(r)));
  });
});
