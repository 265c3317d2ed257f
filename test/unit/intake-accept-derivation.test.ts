// The compact write model: an accepted comment journalled as ONE `intake.accept/1` record
// must leave exactly the records and audit events the generic path (each record written on its own)
// leaves — in memory right after the write, after a reopen (journal replay), and after a compaction
// (the worker expands the record too) followed by a reopen. Audit events are compared without their
// `eventId` (random in one path, `audit-<seq>` in the other); clocks are fixed, so timestamps compare.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createCommentRegistry, learningIntake } from '../support/comment-registry.js';
import { createIntake, type IntakeOptions } from '../../src/intake/accept-comment.js';
import { ActorRuntime, type ActorKind } from '../../src/runtime/actor-runtime.js';
import { COLLECTIONS, DurableStore } from '../../src/store/index.js';
import { TASK_KIND, taskKind } from '../../src/tasks/task-actor.js';
import { createQuotaCheck } from '../../src/usage/quota-check.js';
import { loadFixture, signedHeaders, type FixtureName } from '../support/webhook-fixtures.js';

const NOW = new Date('2026-03-04T05:06:07.089Z');
const dirs: string[] = [];

beforeEach(() => {
  // Only Date: the store's timers and the fsync'd journal keep running for real.
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(NOW);
});
afterEach(() => {
  vi.useRealTimers();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface Env {
  dir: string;
  store: DurableStore;
  runtime: ActorRuntime;
  handle(name: FixtureName, deliveryId: string, mutate: (p: any) => void): Promise<{ status: number; body: unknown }>;
  close(): Promise<void>;
}

async function env(writeModel: 'compact' | 'records', extra: Partial<IntakeOptions> = {}, kinds: ActorKind[] = [taskKind()]): Promise<Env> {
  const dir = mkdtempSync(join(tmpdir(), `ccweb-derive-${writeModel}-`));
  dirs.push(dir);
  const store = new DurableStore({ dir: join(dir, 'store'), indexes: STORE_INDEXES });
  await store.open();
  const runtime = new ActorRuntime({ store, kinds });
  const comments = createCommentRegistry();
  const intake = createIntake({
    store,
    runtime,
    botLogin: 'ccweb-bot',
    secrets: ['s'],
    fetchPermission: async () => 'write',
    // Gitea holds each comment posted (comment-registry.ts).
    commentOnGitea: comments.lookup,
    // The same path in both stores, so `workspacePath` compares.
    workspaceRoot: '/srv/ccweb/workspaces',
    writeModel,
    ...extra,
  });
  return {
    dir,
    store,
    runtime,
    async handle(name, deliveryId, mutate) {
      const fixture = loadFixture(name);
      const payload = JSON.parse(fixture.body.toString('utf8'));
      mutate(payload);
      const body = Buffer.from(JSON.stringify(payload, null, 2));
      const headers = Object.fromEntries(Object.entries(signedHeaders(fixture.headers, body, 's', { 'X-Gitea-Delivery': deliveryId })).map(([k, v]) => [k.toLowerCase(), v]));
      return learningIntake(intake, comments).handle({ rawBody: body, headers });
    },
    async close() {
      runtime.stopAll();
      await intake.close();
      await store.close();
    },
  };
}

/** Everything a reader can see: hot records per collection (in list order), archived ones by key, the audit log. */
async function contents(store: DurableStore, archivedKeys: Array<[string, string]>) {
  const hot = Object.fromEntries(await Promise.all(COLLECTIONS.map(async (c) => [c, await store.list(c)])));
  const archived = await Promise.all(archivedKeys.map(async ([c, k]) => [c, k, (await store.get(c as never, k)) ?? null]));
  const audit = (await store.audit()).map(({ eventId: _id, ...rest }) => rest);
  return { hot, archived, audit };
}

const comments: Array<[FixtureName, (p: any) => void]> = [
  // First comment of the repository: registers it and opens the session.
  ['issue_comment_created_on_issue', (p) => { p.comment.id = 9001; p.comment.body = '@ccweb-bot please fix the build'; }],
  // Same issue again: neither repository nor session is new.
  ['issue_comment_created_on_issue', (p) => { p.comment.id = 9002; p.comment.body = '@ccweb-bot and add a test\n\nwith "quotes" and ünïcode'; }],
  // A pull request of the same repository: a new session, refs in the task.
  ['pull_request_comment_created', (p) => { p.comment.id = 9003; p.comment.body = '@ccweb-bot review this'; }],
];

async function acceptAll(e: Env, ids: string[]): Promise<void> {
  for (const [i, [name, mutate]] of comments.entries()) {
    const res = await e.handle(name, ids[i]!, mutate);
    expect(res.status).toBe(202);
  }
}

async function archivedKeysOf(e: Env, ids: string[]): Promise<Array<[string, string]>> {
  const keys: Array<[string, string]> = [];
  for (const id of ids) {
    const d = await e.store.get<{ taskId: string }>('webhook_deliveries', `default:${id}`);
    keys.push(['webhook_deliveries', `default:${id}`]);
    if (d) keys.push(['tasks', d.taskId], ['actors', `task:${d.taskId}`], ['comments', `${d.taskId}:status:received`]);
  }
  for (const t of await e.store.list<{ triggerKey: string }>('comment_triggers')) keys.push(['comment_triggers', t.triggerKey]);
  for (const r of ['default:alice/widgets:issue:7', 'default:alice/widgets:pull:8']) keys.push(['sessions', r]);
  return keys;
}

function journalOps(dir: string): string[] {
  const storeDir = join(dir, 'store');
  return readdirSync(storeDir)
    .filter((f) => f.startsWith('journal-'))
    .flatMap((f) => readFileSync(join(storeDir, f), 'utf8').split('\n').filter(Boolean))
    .flatMap((line) => (JSON.parse(line) as { ops: unknown[][] }).ops.map((op) => String(op[0])));
}

async function reopen(e: Env): Promise<DurableStore> {
  await e.close();
  const store = new DurableStore({ dir: join(e.dir, 'store'), indexes: STORE_INDEXES });
  await store.open();
  return store;
}

describe('intake.accept/1: one compact record, the same records and audit events as the generic path', () => {
  it('in memory, after replay, and after compaction + replay', async () => {
    const ids = comments.map(() => randomUUID());
    const compact = await env('compact');
    const records = await env('records');
    await acceptAll(compact, ids);
    await acceptAll(records, ids);
    const keys = await archivedKeysOf(records, ids);
    expect(keys.length).toBeGreaterThan(12);

    const expected = await contents(records.store, keys);
    expect(expected.hot.tasks).toHaveLength(3);
    expect(expected.audit.map((a) => a.action)).toContain('repository.register');
    expect(await contents(compact.store, keys)).toEqual(expected);
    // The compact path journalled one derived op per comment and no task, actor or audit op of its own.
    expect(journalOps(compact.dir)).toEqual(['x', 'x', 'x']);

    const replayedCompact = await reopen(compact);
    const replayedRecords = await reopen(records);
    const afterReplay = await contents(replayedRecords, keys);
    expect(await contents(replayedCompact, keys)).toEqual(afterReplay);

    await replayedCompact.compact();
    await replayedRecords.compact();
    await replayedCompact.close();
    await replayedRecords.close();
    const folded = new DurableStore({ dir: join(compact.dir, 'store'), indexes: STORE_INDEXES });
    const foldedRecords = new DurableStore({ dir: join(records.dir, 'store'), indexes: STORE_INDEXES });
    await folded.open();
    await foldedRecords.open();
    expect(folded.stats().compactions + folded.stats().lastCheckpointSeq).toBeGreaterThan(0);
    // Delivery, trigger and session records now come from a cold file, audit events from an archive.
    expect(await folded.archivedCount('webhook_deliveries')).toBe(3);
    expect(await contents(folded, keys)).toEqual(await contents(foldedRecords, keys));
    await folded.close();
    await foldedRecords.close();
  });

  it('with a daily quota configured: the usage counters are written next to the compact record', async () => {
    const ids = comments.map(() => randomUUID());
    const quota = createQuotaCheck({ limits: { userTasksPerDay: 10 } });
    const compact = await env('compact', { quota });
    const records = await env('records', { quota });
    await acceptAll(compact, ids);
    await acceptAll(records, ids);
    const keys = await archivedKeysOf(records, ids);
    expect((await records.store.list('usage')).length).toBeGreaterThan(0);
    expect(await contents(compact.store, keys)).toEqual(await contents(records.store, keys));
    await compact.close();
    await records.close();
  });

  it('a text too long for the task record, or a task machine the format does not encode, takes the generic path', async () => {
    const long = await env('compact');
    const res = await long.handle('issue_comment_created_on_issue', randomUUID(), (p) => { p.comment.body = '@ccweb-bot ' + 'x'.repeat(5000); });
    expect(res.status).toBe(202);
    expect(journalOps(long.dir)).not.toContain('x');
    expect((await long.store.list('tasks'))[0]).toMatchObject({ instructionRef: expect.any(String) });
    await long.close();

    const other = await env('compact', {}, [{ ...taskKind(), machineVersion: 2 }]);
    expect((await other.handle('issue_comment_created_on_issue', randomUUID(), (p) => { p.comment.body = '@ccweb-bot hi'; })).status).toBe(202);
    expect(journalOps(other.dir)).not.toContain('x');
    expect((await other.store.list<{ kind: string; machineVersion: number }>('actors')).find((a) => a.kind === TASK_KIND)?.machineVersion).toBe(2);
    await other.close();
  });

  it('announces the queued task to onTransition listeners once it is durable, as the generic path does', async () => {
    const notices: Record<string, unknown[]> = { compact: [], records: [] };
    for (const model of ['compact', 'records'] as const) {
      const e = await env(model);
      e.runtime.onTransition((n) => notices[model]!.push(n));
      await e.handle('issue_comment_created_on_issue', 'c0ffee00-0000-4000-8000-000000000001', (p) => { p.comment.body = '@ccweb-bot go'; });
      await e.close();
    }
    expect(notices['compact']).toHaveLength(1);
    expect(notices['compact']).toEqual(notices['records']);
  });
});
