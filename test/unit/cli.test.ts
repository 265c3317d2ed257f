// The command line: parsing, help on every level, usage errors (exit 2), the configuration
// reference staying equal to docs/configuration.md, and export-audit reading a store offline.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { configReferenceTable } from '../../src/cli/config-reference.js';
import { COMMAND_HELP, COMMANDS } from '../../src/cli/help.js';
import { DOCTOR_CHECKS, runDoctor } from '../../src/cli/doctor.js';
import { runCli } from '../../src/cli/index.js';
import { CONFIG_KEYS, KEYS } from '../../src/config/keys.js';
import { loadConfig } from '../../src/config/index.js';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createStore } from '../../src/store/index.js';
import { repoRoot } from '../support/codex-harness.js';
import { copyFixture, expectedDump } from '../support/journal-fixtures.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function cli(argv: string[], env: Record<string, string> = {}, cwd = process.cwd()) {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (d: Buffer) => (stdout += d.toString()));
  err.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await runCli(argv, { stdout: out, stderr: err, env, cwd });
  return { code, stdout, stderr };
}

describe('help', () => {
  it('the overview lists every command and is printed by --help, -h and help', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const r = await cli(argv);
      expect(r.code).toBe(0);
      for (const c of ['serve', 'doctor', 'demo', 'visualize', 'export-audit', 'migrate-store', 'config-reference']) expect(r.stdout).toContain(`  ${c} `);
    }
  });

  it.each(COMMANDS)('%s --help prints its usage with an example, and `help %s` the same', async (command) => {
    const a = await cli([command, '--help']);
    const b = await cli(['help', command]);
    expect(a.code).toBe(0);
    expect(a.stdout).toMatch(new RegExp(`^Usage: ccweb-gitea ${command}`));
    expect(a.stdout).toMatch(/Examples?:\n {2}\S/);
    expect(b.stdout).toBe(a.stdout);
  });
});

describe('help doctor', () => {
  it('names every check doctor runs, each with what it checks (the list is built from the checks)', async () => {
    const help = (await cli(['help', 'doctor'])).stdout;
    // What a run reports (without configuration every check is still reported, most as skipped).
    const ran = [...new Set((await runDoctor({ env: { PATH: process.env.PATH, HOME: tmpdir() }, cwd: tmpdir() })).map((r) => r.check))];
    expect(ran).toEqual(DOCTOR_CHECKS);
    for (const check of ran) expect(help, check).toMatch(new RegExp(`^ {2}${check} +\\S`, 'm'));
    expect(help).toMatch(/^ {2}token-scopes +\S/m);
  });
});

describe('--version', () => {
  it("prints package.json's version with --version, -V and version", async () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    for (const argv of [['--version'], ['-V'], ['version']]) {
      const r = await cli(argv);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`ccweb-gitea ${pkg.version}\n`);
    }
  });
});

describe('demo options', () => {
  it('ports from flags, else CCWEB_PORT / DEMO_GITEA_PORT / DEMO_MODEL_PORT, else free ones; bad values are usage errors', async () => {
    const { parseDemoArgs } = await import('../../src/cli/demo-args.js');
    expect(parseDemoArgs([], {})).toEqual({ once: false, gitea: null, port: 0, giteaPort: 0, modelPort: 0, nodes: 1 });
    expect(parseDemoArgs(['--nodes', '2'], {}).nodes).toBe(2);
    expect(parseDemoArgs(['--gitea', 'double'], {}).gitea).toBe('double');
    expect(() => parseDemoArgs(['--gitea', 'fake'], {})).toThrow(/--gitea must be real or double, got "fake"/);
    expect(() => parseDemoArgs(['--gitea', 'real', '--nodes', '2'], {})).toThrow(/--nodes 2\|3 runs on the Gitea double only/);
    expect(() => parseDemoArgs(['--nodes', '4'], {})).toThrow(/--nodes must be 1, 2 or 3, got "4"/);
    expect(parseDemoArgs(['--once', '--gitea-port', '3000'], { CCWEB_PORT: '8080', DEMO_GITEA_PORT: '4000', DEMO_MODEL_PORT: '5000' })).toEqual({
      once: true,
      gitea: null,
      port: 8080,
      giteaPort: 3000,
      modelPort: 5000,
      nodes: 1,
    });
    expect(() => parseDemoArgs(['--port', '70000'], {})).toThrow(/--port must be a port number/);
    expect(() => parseDemoArgs([], { DEMO_MODEL_PORT: 'abc' })).toThrow(/DEMO_MODEL_PORT must be a port number/);
    const r = await cli(['demo', '--gitea-port', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--gitea-port must be a port number[\s\S]*Usage: ccweb-gitea demo/);
  });
});

describe('usage errors exit 2 with help on stderr', () => {
  it('an unknown command', async () => {
    const r = await cli(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown command frobnicate[\s\S]*Usage: ccweb-gitea <command>/);
    expect(r.stdout).toBe('');
  });

  it('a mistyped command or help topic: did you mean the nearest one', async () => {
    const r = await cli(['docter']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^ccweb-gitea: unknown command docter: did you mean doctor\?\n/);
    expect((await cli(['help', 'sreve'])).stderr).toMatch(/^ccweb-gitea: help: unknown command sreve: did you mean serve\?\n/);
    expect((await cli(['export-adit'])).stderr).toMatch(/did you mean export-audit\?/);
    // Nothing near: no suggestion.
    expect((await cli(['frobnicate'])).stderr).toMatch(/^ccweb-gitea: unknown command frobnicate\n/);
  });

  it('no command at all', async () => {
    const r = await cli([]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Usage: ccweb-gitea <command>');
  });

  it('an unknown option or a stray argument, with that command’s help', async () => {
    const a = await cli(['doctor', '--frob']);
    expect(a.code).toBe(2);
    expect(a.stderr).toMatch(/doctor: Unknown option '--frob'[\s\S]*Usage: ccweb-gitea doctor/);
    const b = await cli(['export-audit', 'extra']);
    expect(b.code).toBe(2);
    expect(b.stderr).toMatch(/unexpected argument extra[\s\S]*Usage: ccweb-gitea export-audit/);
    const c = await cli(['help', 'frobnicate']);
    expect(c.code).toBe(2);
  });

  it('a bad date for export-audit', async () => {
    const r = await cli(['export-audit', '--data-dir', tmpdir(), '--from', 'yesterday-ish']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--from yesterday-ish is not a date/);
  });
});

describe('configuration reference', () => {
  it('has one row per key and docs/configuration.md holds exactly this table', async () => {
    const table = configReferenceTable();
    expect(table.split('\n').length).toBe(CONFIG_KEYS.length + 2);
    for (const key of CONFIG_KEYS) expect(table).toContain(`| \`${KEYS[key].env}\` | \`${key}\` |`);
    const doc = readFileSync(join(repoRoot, 'docs', 'configuration.md'), 'utf8');
    expect(doc, 'regenerate with: ccweb-gitea config-reference').toContain(table);
    expect((await cli(['config-reference'])).stdout).toBe(`${table}\n`);
  });
});

describe('visualize', () => {
  it('writes every machine export into the given directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-vis-'));
    dirs.push(dir);
    const r = await cli(['visualize', dir]);
    expect(r.code).toBe(0);
    const files = r.stdout.trim().split('\n');
    for (const machine of ['task', 'repo-lock', 'session', 'reply-verifier', 'app-server']) {
      expect(files.some((f) => f === join(dir, `${machine}.svg`)), machine).toBe(true);
    }
    expect(readFileSync(files.find((f) => f.endsWith('.mmd'))!, 'utf8')).toMatch(/stateDiagram/);
  });
});

describe('retention keys', () => {
  it('validate with a fix, and stay unset unless given', () => {
    const base = { CCWEB_WEBHOOK_SECRET: 's'.repeat(20), CCWEB_GITEA_URL: 'https://g.example', CCWEB_GITEA_TOKEN: 't', CCWEB_ADMIN_TOKEN: 'a' };
    const ok = loadConfig({ env: { ...base, CCWEB_DELIVERY_RETENTION_DAYS: '7', CCWEB_TASK_RETENTION_DAYS: '365' }, argv: [], resolveCodexCommand: () => 'codex' });
    expect([ok.deliveryRetentionDays, ok.taskRetentionDays]).toEqual([7, 365]);
    const unset = loadConfig({ env: base, argv: [], resolveCodexCommand: () => 'codex' });
    expect([unset.deliveryRetentionDays, unset.taskRetentionDays]).toEqual([undefined, undefined]);
    expect(() => loadConfig({ env: { ...base, CCWEB_DELIVERY_RETENTION_DAYS: '0' }, argv: [], resolveCodexCommand: () => 'codex' })).toThrow(
      /CCWEB_DELIVERY_RETENTION_DAYS \("deliveryRetentionDays" in the config file\) is invalid .*e\.g\. 30/,
    );
  });
});

describe('export-audit', () => {
  it('streams the audit of the store as NDJSON, filtered by task and time, while the store is open in another owner', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'ccweb-cli-'));
    dirs.push(dataDir);
    const store = createStore({ dir: join(dataDir, 'store'), indexes: STORE_INDEXES });
    await store.open();
    for (let i = 0; i < 60; i++) {
      await store.transact((tx) => tx.appendAudit({ action: 'test.event', actor: 'test', taskId: i % 2 === 0 ? 'task-even' : 'task-odd', metadata: { i } }));
    }
    await store.transact((tx) => tx.appendAudit({ action: 'test.after', actor: 'test', taskId: 'task-even' }));

    const all = await cli(['export-audit', '--data-dir', dataDir]);
    expect(all.code).toBe(0);
    const events = all.stdout.trim().split('\n').map((l) => JSON.parse(l) as { seq: number; taskId: string; action: string });
    expect(events.length).toBe(61);
    expect(events.map((e) => e.seq)).toEqual([...events.map((e) => e.seq)].sort((a, b) => a - b));
    expect(new Set(events.map((e) => e.seq)).size).toBe(61);
    expect(all.stderr).toBe('61 audit event(s)\n');

    const even = await cli(['export-audit', '--task', 'task-even', '--out', 'even.ndjson'], { CCWEB_DATA_DIR: dataDir }, dataDir);
    expect(even.stdout).toBe('');
    const lines = readFileSync(join(dataDir, 'even.ndjson'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { taskId: string; action: string });
    expect(lines.length).toBe(31);
    expect(lines.every((e) => e.taskId === 'task-even')).toBe(true);
    expect(lines.at(-1)!.action).toBe('test.after');

    const future = await cli(['export-audit', '--data-dir', dataDir, '--from', new Date(Date.now() + 60_000).toISOString()]);
    expect(future.stdout).toBe('');
    const past = await cli(['export-audit', '--data-dir', dataDir, '--to', '2000-01-01']);
    expect(past.stdout).toBe('');
    await store.close();
    // With no service running, the read-only connection creates -wal and -shm (as the reading user, root
    // say): it removes them again, or the service user could not open its store.
    expect(readdirSync(join(dataDir, 'store')).sort()).toEqual(['store.db']);
    expect((await cli(['export-audit', '--data-dir', dataDir])).stderr).toBe('61 audit event(s)\n');
    expect(readdirSync(join(dataDir, 'store')).sort()).toEqual(['store.db']);
  });

  it('streams the audit of a journal store an earlier version left (not yet migrated), from its archives, checkpoint and journal', async () => {
    const { parent: dataDir } = copyFixture('history');
    dirs.push(dataDir);
    const expected = expectedDump('history').audit;
    const all = await cli(['export-audit', '--data-dir', dataDir]);
    expect(all.code).toBe(0);
    expect(all.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown)).toEqual(expected);
    expect(all.stderr).toBe(`${expected.length} audit event(s)\n`);
    const one = await cli(['export-audit', '--data-dir', dataDir, '--task', 't6']);
    expect(one.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown)).toEqual(expected.filter((e) => e.taskId === 't6'));
    expect(expected.filter((e) => e.taskId === 't6').length).toBeGreaterThan(2);
  });

  it('fails with exit 1 when there is no store', async () => {
    const r = await cli(['export-audit', '--data-dir', join(tmpdir(), 'ccweb-no-such-dir')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no store at/);
  });
});

describe('bin/ccweb-gitea.js', () => {
  it('runs the TypeScript CLI through tsx', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [join(repoRoot, 'bin', 'ccweb-gitea.js'), 'export-audit', '--help']);
    expect(stdout).toBe(COMMAND_HELP['export-audit']);
  });

  it('exits 2 on an unknown command', async () => {
    const run = promisify(execFile)(process.execPath, [join(repoRoot, 'bin', 'ccweb-gitea.js'), 'nope']);
    await expect(run).rejects.toMatchObject({ code: 2 });
  });
});
