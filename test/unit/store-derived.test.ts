// Derived records in the store (`tx.derive`, src/store/derived/): one journal op that stands for
// several records and audit events. Checked here with the one format there is, intake.accept/1.
import { appendFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readAuditOffline } from '../../src/cli/read-audit-offline.js';
import type { AcceptedCommentV1 } from '../../src/store/derived/intake-accept-v1.mjs';
import { JournalCorruptionError, UniqueViolationError } from '../../src/store/index.js';
import { onPostgres, storeDirs } from '../support/store-helpers.js';

const env = storeDirs('journal');
afterEach(() => env.cleanup());

const FORMAT = 'intake.accept/1';

function accepted(n: number, first = true): Omit<AcceptedCommentV1, 'a0'> {
  const taskId = `gitea-task-${n}`;
  return {
    at: '2026-01-02T03:04:05.000Z',
    receivedAt: '2026-01-02T03:04:05.000Z',
    expiresAt: '2026-02-01T03:04:05.000Z',
    deliveryKey: `default:d-${n}`,
    deliveryId: `d-${n}`,
    eventType: 'issue_comment',
    payloadHash: 'sha256:00',
    taskId,
    triggerKey: `default:o/r:comment:${n}:created:x`,
    by: 'gitea:user:bob',
    task: { repoKey: 'default:o/r', resourceKey: 'default:o/r:issue:1', kind: 'issue', number: 1, owner: 'o', repo: 'r', commentId: n, commentUrl: 'u', author: 'bob', instruction: 'hi', refs: null },
    repository: first ? { instanceId: 'default', repoId: 1, cloneUrl: 'c', defaultBranch: 'main', workspacePath: '/w' } : null,
    session: first ? { hostRef: 'gitea-main' } : null,
  };
}

describe('store: derived records', () => {
  it('reserves audit seqs in call order between ordinary audit events; records readable in the transaction, not writable', async () => {
    const store = await env.open({ dir: await env.dir() });
    const a0 = await store.transact(async (tx) => {
      await tx.appendAudit({ action: 'before', actor: 't' });
      const first = await tx.derive(FORMAT, accepted(1));
      // Readable for the rest of the transaction…
      expect(await tx.get('tasks', 'gitea-task-1')).toMatchObject({ state: 'queued', queueSeq: first });
      // …but written by the derived record only.
      await expect(tx.put('tasks', 'gitea-task-1', { x: 1 })).rejects.toThrow(/derived record/);
      await expect(tx.archive('tasks', 'gitea-task-1')).rejects.toThrow(/derived record/);
      await tx.appendAudit({ action: 'after', actor: 't' });
      return first;
    });
    expect(a0).toBe(2);
    const audit = await store.audit();
    expect(audit.map((e) => [e.seq, e.action])).toEqual([
      [1, 'before'],
      [2, 'webhook.accept'],
      [3, 'repository.register'],
      [4, 'task.transition'],
      [5, 'task.transition'],
      [6, 'after'],
    ]);
    expect(new Set(audit.map((e) => e.eventId)).size).toBe(6);
    expect(await store.get('webhook_deliveries', 'default:d-1')).toMatchObject({ taskId: 'gitea-task-1' });
    // Delivery, trigger and session go to the cold tier as the generic path archives them.
    expect(await store.count('webhook_deliveries')).toBe(0);
    expect(await store.archivedCount('sessions')).toBe(1);
    expect(Object.isFrozen(await store.get('tasks', 'gitea-task-1'))).toBe(true);
  });

  it('a refused derive leaves the transaction as it was: none of its records is readable or blocks a later write', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    await store.transact((tx) => tx.derive(FORMAT, accepted(1)));
    // The delivery and trigger are new, the task is not: the task is checked after the delivery was
    // already looked at, so a write-as-you-check derive would leave the delivery behind.
    const clash = { ...accepted(2, false), taskId: 'gitea-task-1' };
    const fresh = accepted(2, false);
    await store.transact(async (tx) => {
      await expect(tx.derive(FORMAT, clash)).rejects.toThrow(UniqueViolationError);
      expect(await tx.get('webhook_deliveries', fresh.deliveryKey as string)).toBeUndefined();
      // The caller may go on: the same comment under its own task id derives cleanly.
      await tx.derive(FORMAT, fresh);
    });
    expect(await store.get('tasks', fresh.taskId as string)).toMatchObject({ state: 'queued' });
  });

  it('an existing key (hot or archived) is a unique violation and nothing of the transaction is applied', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    await store.transact((tx) => tx.derive(FORMAT, accepted(1)));
    // Same task id again under another delivery: the task exists (hot).
    const again = { ...accepted(2, false), taskId: 'gitea-task-1' };
    await expect(store.transact((tx) => tx.derive(FORMAT, again))).rejects.toBeInstanceOf(UniqueViolationError);
    // The delivery exists in the cold tier only (archived, then compacted into a cold file).
    await store.compact();
    const sameDelivery = { ...accepted(3, false), deliveryKey: 'default:d-1' };
    await expect(store.transact(async (tx) => {
      await tx.insert('control', 'marker', { v: 1 });
      await tx.derive(FORMAT, sameDelivery);
    })).rejects.toBeInstanceOf(UniqueViolationError);
    expect(await store.get('control', 'marker')).toBeUndefined();
    expect(await store.get('tasks', 'gitea-task-3')).toBeUndefined();
    expect((await store.audit()).length).toBe(4);
    // Deleted, then derived again, in one transaction: refused (both would apply).
    await expect(store.transact(async (tx) => {
      await tx.delete('tasks', 'gitea-task-1');
      await tx.derive(FORMAT, { ...accepted(4, false), taskId: 'gitea-task-1' });
    })).rejects.toThrow(/written earlier in this transaction/);
    expect(await store.get('tasks', 'gitea-task-1')).toMatchObject({ deliveryKey: 'default:d-1' });
  });

  it('replays from the journal to the same state; an unknown format is corruption naming file and line', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    await store.transact((tx) => tx.derive(FORMAT, accepted(1)));
    await store.transact((tx) => tx.derive(FORMAT, accepted(2, false)));
    const before = { tasks: await store.list('tasks'), actors: await store.list('actors'), audit: await store.audit(), delivery: await store.get('webhook_deliveries', 'default:d-2') };
    await store.close();
    const reopened = await env.open({ dir });
    expect({ tasks: await reopened.list('tasks'), actors: await reopened.list('actors'), audit: await reopened.audit(), delivery: await reopened.get('webhook_deliveries', 'default:d-2') }).toEqual(before);
    // The offline audit export (no store opened) sees the derived events too.
    const offline: number[] = [];
    await reopened.close();
    await readAuditOffline(dir, {}, (e) => offline.push(e.seq));
    expect(offline).toEqual(before.audit.map((e) => e.seq));

    const segment = readdirSync(dir).find((f) => f.startsWith('journal-'))!;
    appendFileSync(join(dir, segment), `{"seq":3,"ops":[["x","intake.accept/99",{"a0":8}]]}\n{"seq":4,"ops":[]}\n`);
    if (onPostgres) {
      // The replica is only a cache of the database: one it cannot read is rebuilt from the log.
      const rebuilt = await env.open({ dir });
      expect({ tasks: await rebuilt.list('tasks'), actors: await rebuilt.list('actors'), audit: await rebuilt.audit() }).toEqual({ tasks: before.tasks, actors: before.actors, audit: before.audit });
      return;
    }
    const error = await env.open({ dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalCorruptionError);
    expect((error as Error).message).toMatch(/line 3: unknown derived-record format "intake\.accept\/99"/);
  });
});
