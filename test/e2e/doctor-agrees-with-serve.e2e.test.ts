// doctor agrees with serve: for every setup serve refuses to start with (src/service/start-refusals.ts
// lists them, and only that file makes serve's refusals: test/unit/start-refusals.test.ts), the real
// service process (`node --import tsx src/main.ts`) exits with that refusal's code, and
// `ccweb-gitea doctor --only <its check>` fails that check and exits 1. The table below has one row
// per refusal: TypeScript refuses to compile it when a refusal is added without one. A control run
// first shows each of those checks passing and serve starting on the setup every row changes one
// thing of: the real Gitea, the real Codex app-server and sandbox, the real gitea-mcp, a real
// PostgreSQL for the database rows.
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResult } from '../../src/cli/doctor.js';
import { START_REFUSALS, type RefusalId, type SetupRefusalId } from '../../src/service/start-refusals.js';
import { repoRoot } from '../support/codex-harness.js';
import { fixtureDir } from '../support/journal-fixtures.js';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createStore } from '../../src/store/index.js';
import { SCHEMA_VERSION } from '../../src/store/sql/schema.js';
import { sqliteBinding } from '../../src/store/sql/sqlite-driver.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-agree-'));
let env: RealServiceEnvironment;
let postgres: ThrowawayPostgres;
let busy: Server;
let busyPort: number;
let n = 0;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs argv to its exit; `noUserNamespaces`: on a host without user namespaces (a user namespace whose limit for nested ones is 0). */
function run(argv: string[], runEnv: Record<string, string>, opts: { noUserNamespaces?: boolean; timeoutMs?: number; until?: RegExp } = {}): Promise<Run> {
  const [cmd, ...args] = opts.noUserNamespaces ? ['unshare', '-U', '-r', 'sh', '-c', 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', 'sh', ...argv] : argv;
  return new Promise((resolve) => {
    const child = spawn(cmd!, args, { cwd: repoRoot, env: runEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const seen = () => {
      // A service that started: stopped at once (SIGTERM), reported as exit null.
      if (opts.until?.test(stdout)) child.kill('SIGTERM');
    };
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      seen();
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 90_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code: opts.until?.test(stdout) ? null : code, stdout, stderr });
    });
  });
}

const serve = (e: Record<string, string>, opts: { noUserNamespaces?: boolean } = {}) =>
  run([process.execPath, '--import', 'tsx', join(repoRoot, 'src', 'main.ts')], e, { ...opts, until: /ccweb-gitea listening/ });

async function doctor(e: Record<string, string>, checks: readonly string[], opts: { noUserNamespaces?: boolean } = {}): Promise<{ code: number | null; results: CheckResult[]; out: string }> {
  const r = await run([process.execPath, join(repoRoot, 'bin', 'ccweb-gitea.js'), 'doctor', '--json', '--only', [...new Set(checks)].join(',')], e, opts);
  const results = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as CheckResult);
  return { code: r.code, results, out: r.stdout + r.stderr };
}

/** The working setup: the real environment, a data directory of its own, any free port. */
function base(extra: Record<string, string> = {}): Record<string, string> {
  const inherited: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CCWEB_') && v !== undefined) inherited[k] = v;
  return { ...inherited, ...env.env, CCWEB_PORT: '0', CCWEB_LOG_LEVEL: 'info', CCWEB_DATA_DIR: join(root, `data-${++n}`), ...extra };
}

interface Row {
  /** The setup: the working one with this changed. */
  setup: () => Promise<Record<string, string>> | Record<string, string>;
  noUserNamespaces?: boolean;
  /** What doctor's line for the check says. */
  says: RegExp;
}

/** A database with `statements` run in it (a store another version left). */
async function database(name: string, ...statements: string[]): Promise<string> {
  const url = await postgres.createDatabase(name);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  for (const statement of statements) await c.query(statement);
  await c.end();
  return url;
}

const ROWS: Record<SetupRefusalId, Row> = {
  config_invalid: { setup: () => base({ CCWEB_PORT: 'eighty' }), says: /CCWEB_PORT/ },
  weak_secret: { setup: () => base({ CCWEB_ADMIN_TOKEN: 'x' }), says: /CCWEB_ADMIN_TOKEN is shorter than 16 characters/ },
  data_dir_not_storage: { setup: () => base({ CCWEB_DATA_DIR: '/proc/self/ccweb-data' }), says: /which is not storage \[CCWEB_DATA_DIR\]/ },
  data_dir_unusable: {
    setup: () => {
      const file = join(root, `a-file-${++n}`);
      writeFileSync(file, 'x');
      return base({ CCWEB_DATA_DIR: file });
    },
    says: /is not usable \(E[A-Z]+\) \[CCWEB_DATA_DIR\]/,
  },
  store_needs_migration: {
    setup: async () => {
      // A data directory an earlier version wrote: its store is a journal (test/fixtures/journal-stores/).
      const e = base();
      cpSync(fixtureDir('journal-only'), join(e['CCWEB_DATA_DIR']!, 'store'), { recursive: true });
      return e;
    },
    says: /holds the store of an earlier ccweb-gitea .*\[CCWEB_DATA_DIR\]/,
  },
  store_unreadable: {
    setup: () => {
      // Another file where the store should be (a mistaken copy, a half-restored backup).
      const e = base();
      mkdirSync(join(e['CCWEB_DATA_DIR']!, 'store'), { recursive: true });
      writeFileSync(join(e['CCWEB_DATA_DIR']!, 'store', 'store.db'), 'not a database, but text that was copied here\n'.repeat(200));
      return e;
    },
    says: /store\.db is not a SQLite database \[CCWEB_DATA_DIR\]/,
  },
  store_schema_too_new: {
    setup: async () => {
      // A store a newer version wrote: its schema number is above this version's.
      const e = base();
      const store = createStore({ dir: join(e['CCWEB_DATA_DIR']!, 'store'), indexes: STORE_INDEXES });
      await store.open();
      await store.close();
      const db = sqliteBinding().open(join(e['CCWEB_DATA_DIR']!, 'store', 'store.db'), { readonly: false });
      db.prepare(`UPDATE store_meta SET value = ? WHERE name = 'schema'`).run(String(SCHEMA_VERSION + 1));
      db.close();
      return e;
    },
    says: /has store schema \d+, written by a newer ccweb-gitea \(this one knows \d+\) \[CCWEB_DATA_DIR\]/,
  },
  codex_command_missing: { setup: () => base({ CCWEB_CODEX_COMMAND: join(root, 'no-such-codex') }), says: /the Codex command .* was not found .*\[CCWEB_CODEX_COMMAND\]/ },
  codex_home_unusable: { setup: () => base({ CODEX_HOME: join(root, 'no-such-codex-home') }), says: /CODEX_HOME \S+ does not exist \[CODEX_HOME\]/ },
  gitea_mcp_command_missing: { setup: () => base({ CCWEB_GITEA_MCP_COMMAND: join(root, 'no-such-gitea-mcp') }), says: /the gitea-mcp command .* was not found .*\[CCWEB_GITEA_MCP_COMMAND\]/ },
  agent_isolation_unavailable: { setup: () => base(), noUserNamespaces: true, says: /^sandbox: .*Creating new namespace failed/ },
  gitea_token_rejected: { setup: () => base({ CCWEB_GITEA_TOKEN: 'wrong-token-0123456789abcdef' }), says: /rejects the token \(HTTP 401 on GET \/api\/v1\/user\) \[CCWEB_GITEA_TOKEN\]/ },
  gitea_url_not_gitea: { setup: () => base({ CCWEB_GITEA_URL: `${env.gitea.url}/not-gitea` }), says: /does not answer like Gitea \(404 on GET \/api\/v1\/user\) \[CCWEB_GITEA_URL\]/ },
  address_unusable: { setup: () => base({ CCWEB_PORT: String(busyPort) }), says: /port 127\.0\.0\.1:\d+ is already in use by another process \[CCWEB_PORT\]/ },
  database_unreachable: {
    setup: () => base({ CCWEB_DATABASE_URL: postgres.url.replace(/\/postgres$/, '/no_such_database') }),
    says: /^cannot reach postgres:\/\/127\.0\.0\.1:\d+\/no_such_database: .*does not exist \[CCWEB_DATABASE_URL\]/,
  },
  database_schema_too_new: {
    setup: async () => base({ CCWEB_DATABASE_URL: await database(`agree_newer_${++n}`, 'CREATE TABLE store_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)', "INSERT INTO store_meta VALUES ('schema', '99')") }),
    says: /schema is version 99, newer than this ccweb-gitea knows .*\[CCWEB_DATABASE_URL\]/,
  },
  database_needs_migration: {
    // What an earlier version's PostgreSQL store left (its records table), as far as a node looks.
    setup: async () => base({ CCWEB_DATABASE_URL: await database(`agree_earlier_${++n}`, 'CREATE TABLE ccweb_records (collection text, key text, body jsonb)') }),
    says: /holds the store of an earlier ccweb-gitea \(its ccweb_records table\), which `ccweb-gitea migrate-store` moves .*\[CCWEB_DATABASE_URL\]/,
  },
};

const SETUP_REFUSALS = (Object.keys(START_REFUSALS) as RefusalId[]).filter((id): id is SetupRefusalId => START_REFUSALS[id].setup);

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  postgres = await startThrowawayPostgres({ parentDir: root });
  busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  busyPort = (busy.address() as { port: number }).port;
}, 600_000); // the first run on a machine builds Gitea

afterAll(async () => {
  await new Promise<void>((r) => busy?.close(() => r()));
  await postgres?.stop();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('doctor fails every setup serve refuses to start with [real gitea-mcp]', { timeout: 180_000 }, () => {
  it('the table has a row for each such refusal, and only for those', () => {
    expect(Object.keys(ROWS).sort()).toEqual([...SETUP_REFUSALS].sort());
  });

  it('control: on the working setup serve starts and every check a refusal names passes (a database too, on a fresh one)', async () => {
    const e = base();
    expect((await serve(e)).code, 'serve starts').toBeNull();
    const checks = SETUP_REFUSALS.map((id) => START_REFUSALS[id].check).filter((c) => c !== 'database');
    const d = await doctor(e, checks);
    expect(d.results.map((r) => r.check).sort()).toEqual([...new Set(checks)].sort()); // config's line is among them
    for (const r of d.results) expect(r.status, `${r.check}: ${r.detail}`).toBe('ok');
    expect(d.code).toBe(0);
    const withDatabase = await doctor(base({ CCWEB_DATABASE_URL: await database(`agree_fresh_${++n}`) }), ['database']);
    expect(withDatabase.results.find((r) => r.check === 'database')).toMatchObject({ status: 'ok', detail: expect.stringMatching(/answers; schema version 0; serve brings it to version \d+ at start$/) });
  });

  it.each(Object.keys(ROWS) as SetupRefusalId[])('%s: serve exits with its code, doctor fails its check (exit 1)', async (id) => {
    const row = ROWS[id];
    const { exitCode, check } = START_REFUSALS[id];
    const e = await row.setup();
    const opts = row.noUserNamespaces ? { noUserNamespaces: true } : {};
    const refused = await serve(e, opts);
    expect(refused.code, `serve: ${refused.stderr}${refused.stdout.slice(-2000)}`).toBe(exitCode);
    const d = await doctor(e, [check], opts);
    const line = d.results.find((r) => r.check === check && r.status === 'fail');
    expect(line, d.out).toBeDefined();
    expect(line!.detail).toMatch(row.says);
    expect(d.code).toBe(1);
  });
});

describe('refused only while another instance runs: doctor, run beside the running service, warns', { timeout: 120_000 }, () => {
  it('store_locked: serve exits 75; doctor warns that a second serve would refuse, and does not fail', async () => {
    const e = base();
    mkdirSync(join(e.CCWEB_DATA_DIR!, 'store'), { recursive: true });
    // This test's own process stands for a running service holding the data directory.
    writeFileSync(join(e.CCWEB_DATA_DIR!, 'store', 'LOCK'), String(process.pid));
    expect((await serve(e)).code).toBe(START_REFUSALS.store_locked.exitCode);
    const d = await doctor(e, ['store-lock']);
    expect(d.results.find((r) => r.check === 'store-lock')).toMatchObject({ status: 'warn', detail: `store in use by live process ${process.pid}`, fix: expect.stringContaining('would refuse to start (exit 75)') });
    expect(d.code).toBe(0);
  });
});
