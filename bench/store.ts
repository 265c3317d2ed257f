// The service's start and memory on each embedded store engine, in one run: restart → ready (spawn to
// `/readyz` answering 200) on a store holding 10,000 queued tasks, and the process's RSS on a store
// holding 100,000 finished tasks with what the retention keeps of them (records archived an hour after
// finishing, audit). SQLite (today) beside the journal engine as it was before the store moved to
// SQLite: that commit's own service and its own journal engine, which fills its stores
// (bench/baseline-commit.ts; today's tree has no journal engine). Both are the compiled build, as
// production runs it (`npm run build`; the baseline's build is kept between runs).
//
// The stores hold the same tasks: one queued and one finished task are made by today's real intake,
// actor runtime, receipts and retention sweep in a template store, and copied N times with their
// identifiers (delivery, task, repository, issue, comments) renumbered — records, archived flags and
// audit events as the template has them — into each engine through the store contract. (Making 100,000
// tasks through intake and the runtime on each engine would take minutes; the copies are the same records.)
// The older store microbenchmark (durable transitions/s) is `npm run bench:store-transitions`.
// Run: npm run bench:store
import { spawn, spawnSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DEFAULTS } from '../src/config/keys.js';
import { STORE_INDEXES, type CommentRecord } from '../src/domain/records.js';
import { startSandboxEnvironment } from '../src/demo/sandbox-environment.js';
import { createIntake } from '../src/intake/intake.js';
import { pendingReceiptRecord, receiptCommentKey } from '../src/receipts/receipt-record.js';
import { DAY_MS, sweepRetention } from '../src/retention/retention-sweep.js';
import { ActorRuntime } from '../src/runtime/actor-runtime.js';
import { COLLECTIONS, createStore, SqlStore, type AuditEventInput, type CollectionName, type StoredRecord } from '../src/store/index.js';
import { taskActorId, taskKind } from '../src/tasks/task-actor.js';
import { taskIdFor } from '../src/webhook/normalize-comment.js';
import { createCommentRegistry } from '../test/support/comment-registry.js';
import { baselineTree } from './baseline-commit.js';

const QUEUED = Number(process.env['BENCH_RESTART_TASKS'] ?? 10_000);
const STORED = Number(process.env['BENCH_RSS_TASKS'] ?? 100_000);
const REPOS = 50;
const TARGET_RESTART_MS = 2_000;
const TARGET_RSS_MB = 150;
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// The template tasks, and their copies.

const SECRET = 'bench-secret';
const TEMPLATE_DELIVERY = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
const TEMPLATE_TASK = taskIdFor(`default:${TEMPLATE_DELIVERY}`);
const TEMPLATE_REPO = 'benchrepotemplate';
const TOKENS = { comment: '987654321', issue: '987654322', received: '987654323', cancelled: '987654324' } as const;
/** What makes a record one task's own: a key holding one of these is copied per task, any other once per key. */
const TASK_TOKENS = [TEMPLATE_DELIVERY, TEMPLATE_TASK, ...Object.values(TOKENS)];

function signedComment(): { rawBody: Buffer; headers: Record<string, string> } {
  const at = '2026-12-01T10:00:00Z';
  const html = `http://127.0.0.1/acme/${TEMPLATE_REPO}/issues/${TOKENS.issue}`;
  const body = Buffer.from(
    JSON.stringify({
      action: 'created',
      issue: { id: Number(TOKENS.issue), number: Number(TOKENS.issue), title: 't', html_url: html },
      comment: { id: Number(TOKENS.comment), body: '@ccweb-bot please fix the build', html_url: `${html}#issuecomment-${TOKENS.comment}`, created_at: at, updated_at: at },
      repository: {
        id: 1,
        owner: { login: 'acme' },
        name: TEMPLATE_REPO,
        full_name: `acme/${TEMPLATE_REPO}`,
        clone_url: `http://127.0.0.1/acme/${TEMPLATE_REPO}.git`,
        default_branch: 'main',
        permissions: { admin: false, push: true, pull: true },
      },
      sender: { login: 'alice' },
      is_pull: false,
    }),
  );
  return {
    rawBody: body,
    headers: {
      'content-type': 'application/json',
      'x-gitea-delivery': TEMPLATE_DELIVERY,
      'x-gitea-event': 'issue_comment',
      'x-gitea-event-type': 'issue_comment',
      'x-gitea-signature': createHmac('sha256', SECRET).update(body).digest('hex'),
    },
  };
}

interface Template {
  records: Array<{ collection: CollectionName; key: string; text: string; archived: boolean; own: boolean }>;
  /** `firstOfRepository`: made once per repository (its registration), so copied for a repository's first task only. */
  audit: Array<{ text: string; own: boolean; firstOfRepository: boolean }>;
}

/** One task made by the real intake (and, `finished`, cancelled, its receipts sent, and swept an hour later), as stored. */
async function makeTemplate(finished: boolean): Promise<Template> {
  const dir = mkdtempSync(join(tmpdir(), 'ccweb-bench-template-'));
  const store = createStore({ dir, indexes: STORE_INDEXES });
  await store.open();
  try {
    const runtime = new ActorRuntime({ store, kinds: [taskKind()] });
    const comments = createCommentRegistry();
    const intake = createIntake({ store, runtime, botLogin: 'ccweb-bot', secrets: [SECRET], fetchPermission: async () => 'write', commentOnGitea: comments.lookup, workspaceRoot: join(dir, 'workspaces') });
    const delivery = signedComment();
    comments.learn(delivery);
    const r = await intake.handle(delivery);
    if (r.status !== 202 || r.body['taskId'] !== TEMPLATE_TASK) throw new Error(`template: intake answered ${r.status} ${JSON.stringify(r.body)}`);
    if (finished) {
      await runtime.send(taskActorId(TEMPLATE_TASK), { type: 'CANCEL', by: 'admin:bench' } as never, { by: 'admin:bench' });
      await runtime.settled();
      // Its receipts went out, as the outbox records them.
      await store.transact(async (tx) => {
        const received = (await tx.get<CommentRecord>('comments', receiptCommentKey(TEMPLATE_TASK, 'received')))!;
        await tx.put('comments', received.commentKey, { ...received, status: 'sent', commentId: Number(TOKENS.received) });
        const failure = pendingReceiptRecord({ taskId: TEMPLATE_TASK, resourceKey: received.resourceKey }, 'cancelled');
        await tx.insert('comments', failure.commentKey, { ...failure, status: 'sent', commentId: Number(TOKENS.cancelled) });
      });
      // What the running service's retention sweep has done an hour later (CCWEB_ARCHIVE_AFTER_MINUTES's default).
      const later = Date.now() + (DEFAULTS.archiveAfterMinutes + 1) * 60_000;
      const policy = { deliveryRetentionMs: DEFAULTS.deliveryRetentionDays * DAY_MS, taskRetentionMs: null, archiveAfterMs: DEFAULTS.archiveAfterMinutes * 60_000 };
      const swept = await sweepRetention(store, policy, { now: () => later });
      if (swept.archived !== 1) throw new Error(`template: the sweep archived ${swept.archived} tasks`);
    }
    await runtime.settled();
    runtime.stopAll();
    const own = (text: string) => TASK_TOKENS.some((t) => text.includes(t));
    const template: Template = { records: [], audit: [] };
    for (const collection of COLLECTIONS) {
      for await (const [key, record, archived] of store.entries<StoredRecord>(collection)) {
        template.records.push({ collection, key, text: JSON.stringify(record), archived, own: own(key) });
      }
    }
    for (const { eventId: _id, seq: _seq, timestamp: _at, ...input } of await store.audit()) {
      const text = JSON.stringify(input);
      template.audit.push({ text, own: own(text), firstOfRepository: input.action === 'repository.register' });
    }
    return template;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The i-th task's identifiers in place of the template's. */
function renumber(i: number): (text: string) => string {
  const deliveryId = `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
  const values: Record<string, string> = {
    [TEMPLATE_DELIVERY]: deliveryId,
    [TEMPLATE_TASK]: taskIdFor(`default:${deliveryId}`),
    [TEMPLATE_REPO]: `r${i % REPOS}`,
    [TOKENS.issue]: String(1 + Math.floor(i / REPOS)),
    [TOKENS.comment]: String(1_000_000 + i),
    [TOKENS.received]: String(10_000_000 + 2 * i),
    [TOKENS.cancelled]: String(10_000_001 + 2 * i),
  };
  const pattern = new RegExp(Object.keys(values).join('|'), 'g');
  return (text) => text.replace(pattern, (m) => values[m]!);
}

interface Copy {
  rows: Array<{ collection: CollectionName; key: string; record: StoredRecord; archived: boolean }>;
  audit: AuditEventInput[];
}

/** Task i as `template` holds it, renumbered; shared records (a repository's) once per key over `shared`. */
function copyOf(template: Template, i: number, shared: Set<string>): Copy {
  const map = renumber(i);
  const copy: Copy = { rows: [], audit: [] };
  for (const r of template.records) {
    const key = map(r.key);
    if (!r.own) {
      if (shared.has(`${r.collection}\0${key}`)) continue;
      shared.add(`${r.collection}\0${key}`);
    }
    copy.rows.push({ collection: r.collection, key, record: JSON.parse(map(r.text)) as StoredRecord, archived: r.archived });
  }
  for (const a of template.audit) {
    if (a.firstOfRepository && i >= REPOS) continue;
    const text = map(a.text);
    if (!a.own) {
      if (shared.has(`audit\0${text}`)) continue;
      shared.add(`audit\0${text}`);
    }
    copy.audit.push(JSON.parse(text) as AuditEventInput);
  }
  return copy;
}

/**
 * Copies `template` as tasks from..to-1 into `store`. SQLite through `importRows` (what migrate-store
 * writes with: each row and event as given, seqs in order); the journal engine through transactions,
 * folded by a compaction every 10,000 tasks as the running engine does by itself (its archives go to
 * the cold tier, out of memory).
 */
/** The journal engine (DurableStore) of the baseline tree, as much of it as the fill uses: its transactions' bodies are synchronous. */
interface JournalEngine {
  open(): Promise<void>;
  close(): Promise<void>;
  transact(fn: (tx: { insert(c: CollectionName, key: string, record: StoredRecord): unknown; archive(c: CollectionName, key: string): unknown; appendAudit(event: AuditEventInput): unknown }) => void): Promise<void>;
  count(collection: CollectionName): number;
  archivedCount(collection: CollectionName): number;
  compact(): Promise<void>;
  compactionIdle(): Promise<void>;
}

/** A journal store in `dir`, made by the baseline tree's own code (run from its sources through tsx). */
async function baselineJournalStore(baselineRoot: string, dir: string): Promise<JournalEngine> {
  const baseline = (await import(pathToFileURL(join(baselineRoot, 'src', 'store', 'index.ts')).href)) as {
    DurableStore: new (options: { dir: string; indexes: typeof STORE_INDEXES }) => JournalEngine;
  };
  return new baseline.DurableStore({ dir, indexes: STORE_INDEXES });
}

async function fill(store: JournalEngine | SqlStore, template: Template, from: number, to: number, shared: Set<string>, seq: { next: number }): Promise<void> {
  const PER_BATCH = 500;
  for (let start = from; start < to; start += PER_BATCH) {
    const copies = Array.from({ length: Math.min(to, start + PER_BATCH) - start }, (_, k) => copyOf(template, start + k, shared));
    if (store instanceof SqlStore) {
      const at = new Date().toISOString();
      await store.importRows(
        copies.flatMap((c) => c.rows),
        copies.flatMap((c) => c.audit.map((input) => ({ ...input, eventId: `audit-${randomUUID()}`, seq: seq.next++, timestamp: at }))),
      );
    } else {
      await store.transact((tx) => {
        for (const c of copies) {
          for (const r of c.rows) {
            tx.insert(r.collection, r.key, r.record);
            if (r.archived) tx.archive(r.collection, r.key);
          }
          for (const input of c.audit) tx.appendAudit(input);
        }
      });
      if ((start - from + PER_BATCH) % 10_000 === 0) {
        await store.compact();
        await store.compactionIdle();
      }
    }
  }
}

type Engine = 'journal' | 'sqlite';

/** A data directory whose store holds `queued` queued tasks and then `finished` finished ones, in `engine`'s files. */
async function prefill(engine: Engine, baselineRoot: string, templates: { queued: Template; finished: Template }, queued: number, finished: number): Promise<{ dataDir: string; seconds: number }> {
  const dataDir = mkdtempSync(join(tmpdir(), `ccweb-bench-${engine}-`));
  const dir = join(dataDir, 'store');
  const t0 = performance.now();
  const store = engine === 'journal' ? await baselineJournalStore(baselineRoot, dir) : createStore({ dir, indexes: STORE_INDEXES });
  await store.open();
  const shared = new Set<string>();
  const seq = { next: 1 };
  await fill(store, templates.queued, 0, queued, shared, seq);
  await fill(store, templates.finished, queued, queued + finished, shared, seq);
  const tasks = (await store.count('tasks')) + (await store.archivedCount('tasks'));
  if (tasks !== queued + finished) throw new Error(`${engine}: ${tasks} tasks stored, ${queued + finished} meant`);
  // As a running instance would have left it: the journal folded into its checkpoint (archives in the
  // cold tier), SQLite's WAL folded into the database file.
  if (store instanceof SqlStore) await store.checkpoint();
  else {
    await store.compact();
    await store.compactionIdle();
  }
  await store.close();
  return { dataDir, seconds: (performance.now() - t0) / 1000 };
}

function bytesUnder(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    total += st.isDirectory() ? bytesUnder(path) : st.size;
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// The service process.

interface Boot {
  listeningMs: number;
  apiMs: number;
  readyMs: number;
  rssMb: number;
  rssSettledMb?: number;
  peakMb: number;
}

const procStatusMb = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN) / 1024;

/**
 * `node <mainJs>` on the sandbox (Gitea double, scripted model, real app-server and gitea-mcp) over
 * `dataDir` (null: an empty one): milliseconds from spawn to `/readyz` answering 200; VmRSS 2 s
 * later (and, `settle`, 15 s later); VmHWM. Killed with SIGKILL after (the data directory is kept).
 */
async function boot(mainJs: string, dataDir: string | null, settle: boolean): Promise<Boot> {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-bench-boot-'));
  const env = await startSandboxEnvironment(root);
  try {
    const t0 = performance.now();
    const child = spawn(process.execPath, [mainJs], {
      cwd: join(mainJs, '..', '..', '..'),
      env: { ...process.env, ...env.env, CCWEB_LOG_LEVEL: 'info', ...(dataDir ? { CCWEB_DATA_DIR: dataDir } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    try {
      const lines: string[] = [];
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no "listening" line in 120 s:\n${lines.slice(-20).join('\n')}`)), 120_000);
        let buf = '';
        const onData = (d: Buffer) => {
          buf += d.toString();
          for (let nl; (nl = buf.indexOf('\n')) >= 0; buf = buf.slice(nl + 1)) {
            const line = buf.slice(0, nl);
            lines.push(line);
            if (!line.includes('ccweb-gitea listening')) continue;
            try {
              resolve((JSON.parse(line) as { url: string }).url);
              clearTimeout(timer);
            } catch {
              /* not the JSON line */
            }
          }
        };
        child.stdout!.on('data', onData);
        child.stderr!.on('data', onData);
        child.once('exit', (code, signal) => reject(new Error(`service exited (${code ?? signal}) before listening:\n${lines.slice(-20).join('\n')}`)));
      });
      const listeningMs = performance.now() - t0;
      // What the earlier figures measured: the operators' API answers (the store is open, actors restored).
      for (const deadline = performance.now() + 120_000; ; await sleep(5)) {
        const res = await fetch(`${url}/api/gitea-workflow/overview`, { headers: { Authorization: `Bearer ${env.adminToken}` } }).catch(() => null);
        if (res?.ok) break;
        if (performance.now() > deadline) throw new Error(`the API did not answer in 120 s: ${res ? res.status : 'no answer'}`);
      }
      const apiMs = performance.now() - t0;
      // Ready: the store takes a durable write, the app-server is initialised, Gitea and gitea-mcp answer.
      let last = '';
      for (const deadline = performance.now() + 120_000; ; await sleep(5)) {
        const res = await fetch(`${url}/readyz`).catch(() => null);
        if (res?.status === 200) break;
        last = res ? `${res.status} ${await res.text()}` : 'no answer';
        if (performance.now() > deadline) throw new Error(`not ready in 120 s: ${last}`);
      }
      const readyMs = performance.now() - t0;
      await sleep(2_000);
      const rssMb = procStatusMb(child.pid!, 'VmRSS');
      let rssSettledMb: number | undefined;
      if (settle) {
        await sleep(13_000);
        rssSettledMb = procStatusMb(child.pid!, 'VmRSS');
      }
      const peakMb = procStatusMb(child.pid!, 'VmHWM');
      return { listeningMs, apiMs, readyMs, rssMb, ...(rssSettledMb !== undefined ? { rssSettledMb } : {}), peakMb };
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
  } finally {
    await env.close();
    rmSync(root, { recursive: true, force: true });
  }
}

const mb = (n: number) => `${n.toFixed(0)} MB`;
const bootLine = (b: Boot) => `listening ${b.listeningMs.toFixed(0).padStart(5)} ms, API ${b.apiMs.toFixed(0).padStart(5)} ms, ready ${b.readyMs.toFixed(0).padStart(5)} ms, RSS ${mb(b.rssMb)} 2 s after${b.rssSettledMb !== undefined ? `, ${mb(b.rssSettledMb)} 15 s after` : ''} (peak ${mb(b.peakMb)})`;

async function main(): Promise<void> {
  const started = performance.now();
  console.log(`store engines: the service's restart → ready with ${QUEUED.toLocaleString('en-US')} queued tasks, RSS with ${STORED.toLocaleString('en-US')} finished tasks stored`);
  console.log(`node ${process.version}, ${cpus().length} cpus, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} (other work on the machine shows here)`);
  const before = baselineTree();
  let t = performance.now();
  before.build();
  const build = spawnSync('npm', ['run', '-s', 'build'], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'inherit'] });
  if (build.status !== 0) throw new Error(`npm run build exited with ${build.status}`);
  console.log(`baseline: ${before.commit.slice(0, 12)}, the journal engine's last commit as the embedded store (${before.root}); builds ${((performance.now() - t) / 1000).toFixed(0)} s`);
  const mains: Record<Engine, string> = { journal: before.mainJs, sqlite: join(repoRoot, 'dist', 'src', 'main.js') };
  const label: Record<Engine, string> = { journal: 'journal, before (baseline)', sqlite: 'SQLite (today)' };
  const engines: Engine[] = ['journal', 'sqlite'];

  t = performance.now();
  const templates = { queued: await makeTemplate(false), finished: await makeTemplate(true) };
  const describe = (tp: Template) => `${tp.records.length} records (${tp.records.filter((r) => r.archived).length} archived), ${tp.audit.length} audit events`;
  console.log(`templates (${((performance.now() - t) / 1000).toFixed(1)} s): a queued task: ${describe(templates.queued)}; a finished one: ${describe(templates.finished)}\n`);

  const results: Record<Engine, { empty?: Boot; restart?: Boot; stored?: Boot }> = { journal: {}, sqlite: {} };
  console.log('empty store (process start-up alone, for reference)');
  for (const e of engines) {
    results[e].empty = await boot(mains[e], null, false);
    console.log(`  ${label[e].padEnd(28)}${bootLine(results[e].empty!)}`);
  }
  console.log(`${QUEUED.toLocaleString('en-US')} queued tasks`);
  for (const e of engines) {
    const { dataDir, seconds } = await prefill(e, before.root, templates, QUEUED, 0);
    try {
      results[e].restart = await boot(mains[e], dataDir, false);
      console.log(`  ${label[e].padEnd(28)}${bootLine(results[e].restart!)}   (store ${mb(bytesUnder(join(dataDir, 'store')) / 2 ** 20)} on disk, filled in ${seconds.toFixed(1)} s)`);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  console.log(`${STORED.toLocaleString('en-US')} finished tasks stored (archived by the retention sweep, with their audit)`);
  for (const e of engines) {
    const { dataDir, seconds } = await prefill(e, before.root, templates, 0, STORED);
    try {
      results[e].stored = await boot(mains[e], dataDir, true);
      console.log(`  ${label[e].padEnd(28)}${bootLine(results[e].stored!)}   (store ${mb(bytesUnder(join(dataDir, 'store')) / 2 ** 20)} on disk, filled in ${seconds.toFixed(1)} s)`);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }

  const j = results.journal;
  const s = results.sqlite;
  const verdict = (ok: boolean) => (ok ? 'PASS' : 'MISS');
  console.log(`\nresults (targets: restart → ready < ${TARGET_RESTART_MS} ms with ${QUEUED.toLocaleString('en-US')} unfinished; RSS < ${TARGET_RSS_MB} MB with ${STORED.toLocaleString('en-US')} stored)`);
  const restartLine = (what: string, of: (b: Boot) => number) =>
    console.log(`  restart → ${what}, ${QUEUED} queued: SQLite ${of(s.restart!).toFixed(0)} ms vs journal ${of(j.restart!).toFixed(0)} ms = ${(of(s.restart!) / of(j.restart!)).toFixed(2)}×  (over an empty store: ${(of(s.restart!) - of(s.empty!)).toFixed(0)} vs ${(of(j.restart!) - of(j.empty!)).toFixed(0)} ms)  ${verdict(of(s.restart!) < TARGET_RESTART_MS)}`);
  restartLine('/readyz 200', (b) => b.readyMs);
  restartLine('API answers', (b) => b.apiMs);
  console.log(`  RSS, ${STORED} stored, 2 s after ready: SQLite ${mb(s.stored!.rssMb)} vs journal ${mb(j.stored!.rssMb)} = ${(s.stored!.rssMb / j.stored!.rssMb).toFixed(2)}×  (15 s after: ${mb(s.stored!.rssSettledMb!)} vs ${mb(j.stored!.rssSettledMb!)}; empty store: ${mb(s.empty!.rssMb)} vs ${mb(j.empty!.rssMb)})  ${verdict(s.stored!.rssMb < TARGET_RSS_MB)}`);
  console.log(`  total time ${((performance.now() - started) / 1000).toFixed(0)} s, load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`bench failed: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  },
);
