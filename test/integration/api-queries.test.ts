import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { CommentRecord, DeliveryRecord } from '../../src/domain/records.js';
import { allMachines } from '../../visualizer/graph/machine-registry.js';
import { machineGraph } from '../../visualizer/graph/machine-graph.js';
import { taskMachine, TASK_STATES } from '../../machines/task-lifecycle.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { ADMIN_TOKEN, createQueuedTask, driveTask, insertRepository, startApiHarness, type ApiHarness } from '../support/api-harness.js';

let h: ApiHarness;
beforeEach(async () => {
  h = await startApiHarness();
});
afterEach(async () => {
  await h.close();
});

const body = (over: Record<string, unknown> = {}) => ({ requestId: randomUUID(), operator: 'alice', reason: 'test', ...over });

describe('task list', () => {
  it('pages newest first and filters by repoKey, resourceKey and state', async () => {
    const base = Date.parse('2026-01-01T00:00:00Z');
    for (let i = 1; i <= 5; i++) {
      await createQueuedTask(h.store, h.runtime, {
        taskId: `t-${i}`,
        repoKey: i % 2 ? 'default:acme/widget' : 'default:acme/gadget',
        createdAt: new Date(base + i * 60_000).toISOString(),
      });
    }
    const p1 = await h.call('GET', '/api/gitea-workflow/tasks?pageSize=2');
    expect(p1.body).toMatchObject({ page: 1, pageSize: 2, total: 5 });
    expect(p1.body.items.map((t: { taskId: string }) => t.taskId)).toEqual(['t-5', 't-4']);
    const p3 = await h.call('GET', '/api/gitea-workflow/tasks?pageSize=2&page=3');
    expect(p3.body.items.map((t: { taskId: string }) => t.taskId)).toEqual(['t-1']);
    const p4 = await h.call('GET', '/api/gitea-workflow/tasks?pageSize=2&page=4');
    expect(p4.body.items).toEqual([]);

    const widget = await h.call('GET', `/api/gitea-workflow/tasks?repoKey=${encodeURIComponent('default:acme/widget')}`);
    expect(widget.body.items.map((t: { taskId: string }) => t.taskId)).toEqual(['t-5', 't-3', 't-1']);

    await h.call('POST', '/api/gitea-workflow/tasks/t-3/cancel', body());
    const cancelled = await h.call('GET', '/api/gitea-workflow/tasks?state=cancelled');
    expect(cancelled.body.items.map((t: { taskId: string }) => t.taskId)).toEqual(['t-3']);
    const widgetQueued = await h.call('GET', `/api/gitea-workflow/tasks?state=queued&repoKey=${encodeURIComponent('default:acme/widget')}`);
    expect(widgetQueued.body.items.map((t: { taskId: string }) => t.taskId)).toEqual(['t-5', 't-1']);

    const t4 = (await h.store.get<{ resourceKey: string }>('tasks', 't-4'))!;
    const byResource = await h.call('GET', `/api/gitea-workflow/tasks?resourceKey=${encodeURIComponent(t4.resourceKey)}`);
    expect(byResource.body.items.map((t: { taskId: string }) => t.taskId)).toEqual(['t-4']);
  });

  it('overview counts running and queued per repository and shows leases', async () => {
    await insertRepository(h.store, 'default:acme/widget');
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    await createQueuedTask(h.store, h.runtime, { taskId: 't-2' });
    await createQueuedTask(h.store, h.runtime, { taskId: 't-3', repoKey: 'default:acme/gadget' });
    await driveTask(h.runtime, 't-1', 'running');
    await h.store.transact((tx) =>
      tx.put('leases', 'default:acme/widget', { repoKey: 'default:acme/widget', leaseId: 'lease-t-1', owner: 'worker-1', taskId: 't-1', expiresAt: '2030-01-01T00:00:00.000Z', state: 'held' }),
    );
    const o = await h.call('GET', '/api/gitea-workflow/overview');
    expect(o.body).toMatchObject({ running: 1, queued: 2, control: { globalPaused: false } });
    expect(o.body.repos).toEqual([
      { repoKey: 'default:acme/gadget', status: 'unregistered', running: 0, queued: 1, byState: { queued: 1 } },
      { repoKey: 'default:acme/widget', status: 'active', running: 1, queued: 1, byState: { queued: 1, running: 1 } },
    ]);
    expect(o.body.leases).toEqual([expect.objectContaining({ repoKey: 'default:acme/widget', taskId: 't-1', state: 'held' })]);
  });
});

describe('task detail', () => {
  it('returns the task, its comments with Gitea links, errors, the correlation chain and the full audit chain', async () => {
    const task = await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    const delivery: DeliveryRecord = {
      deliveryKey: task.deliveryKey,
      deliveryId: task.deliveryId,
      eventType: 'issue_comment',
      receivedAt: new Date().toISOString(),
      signatureValid: true,
      normalized: true,
      taskId: 't-1',
      status: 'accepted',
      reason: null,
      payloadHash: 'sha256:x',
      response: { status: 202, body: {} },
      expiresAt: new Date().toISOString(),
    };
    const comment: CommentRecord = {
      commentKey: 't-1:status:running',
      taskId: 't-1',
      kind: 'status',
      resourceKey: task.resourceKey,
      turnId: null,
      commentId: 555,
      marker: 'm',
      bodyHash: 'sha256:y',
      status: 'confirmed',
      errorCode: null,
      createdAt: new Date().toISOString(),
      updatedAt: new Date().toISOString(),
    };
    await h.store.transact(async (tx) => {
      await tx.insert('webhook_deliveries', delivery.deliveryKey, delivery);
      await tx.insert('comments', comment.commentKey, comment);
      await tx.insert('comments', 't-1:t:reply', { ...comment, commentKey: 't-1:t:reply', kind: 'mcp_final', commentId: 777, htmlUrl: 'https://gitea.example.com/acme/widget/issues/1#issuecomment-777' });
      // A delivery event without a taskId is part of the chain through the deliveryId.
      await tx.appendAudit({ action: 'webhook.accept', actor: 'gitea:user:alice', deliveryId: task.deliveryId });
      await tx.appendAudit({ action: 'receipt.post', actor: 'system', taskId: 't-1', commentId: 555, errorCode: 'gitea_unavailable', level: 'alert' });
      // The session actor's events about another task stay out.
      await tx.appendAudit({ action: 'unrelated', actor: 'system', taskId: 't-other' });
    });
    await driveTask(h.runtime, 't-1', 'blocked_workspace');
    const d = await h.call('GET', '/api/gitea-workflow/tasks/t-1');
    expect(d.status).toBe(200);
    expect(d.body.task).toMatchObject({ taskId: 't-1', state: 'blocked_workspace', errorCode: 'workspace_dirty' });
    expect(d.body.delivery).toMatchObject({ deliveryId: task.deliveryId, status: 'accepted' });
    const actions = d.body.audit.map((e: { action: string }) => e.action);
    expect(actions).toEqual(['task.transition', 'task.transition', 'webhook.accept', 'receipt.post', 'task.transition', 'task.transition']);
    const seqs = d.body.audit.map((e: { seq: number }) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(d.body.comments[0].url).toBe(`${task.commentUrl.replace(/#.*/, '')}#issuecomment-555`);
    expect(d.body.correlation).toMatchObject({
      deliveryKey: task.deliveryKey,
      taskId: 't-1',
      sessionKey: task.sessionKey,
      trigger: { commentId: task.commentId, url: task.commentUrl },
      comments: [
        { commentId: 555, url: `${task.commentUrl.replace(/#.*/, '')}#issuecomment-555` },
        { commentId: 777, kind: 'mcp_final', url: 'https://gitea.example.com/acme/widget/issues/1#issuecomment-777' },
      ],
    });
    expect(d.body.errors).toEqual(
      expect.arrayContaining([{ source: 'task', errorCode: 'workspace_dirty' }, expect.objectContaining({ action: 'receipt.post', errorCode: 'gitea_unavailable' })]),
    );
    expect((await h.call('GET', '/api/gitea-workflow/tasks/nope')).status).toBe(404);
  });

  it('never hands a non-http link to the page', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1', commentUrl: 'javascript:alert(1)' });
    const d = await h.call('GET', '/api/gitea-workflow/tasks/t-1');
    expect(d.body.task.commentUrl).toBeNull();
    expect(d.body.correlation.trigger.url).toBeNull();
    const list = await h.call('GET', '/api/gitea-workflow/tasks');
    expect(list.body.items[0].commentUrl).toBeNull();
  });
});

describe('audit export', () => {
  it('streams NDJSON as a download, one parseable event per line, filtered by task, delivery and time', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    await createQueuedTask(h.store, h.runtime, { taskId: 't-2' });
    await h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', body({ reason: 'has "quotes" and unicode ✓' }));
    const res = await h.call('GET', '/api/gitea-workflow/audit?taskId=t-1&format=ndjson');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="audit-t-1.ndjson"');
    expect(res.text.endsWith('\n')).toBe(true);
    const lines = res.text.trimEnd().split('\n');
    const events = lines.map((l) => JSON.parse(l) as { taskId: string; action: string; seq: number; metadata?: { reason?: string } });
    expect(events.map((e) => e.action)).toEqual(['task.transition', 'task.transition', 'task.transition', 'control.task_cancel']);
    expect(events.every((e) => e.taskId === 't-1')).toBe(true);
    expect(events.at(-1)!.metadata!.reason).toBe('has "quotes" and unicode ✓');

    const all = await h.store.audit();
    const cut = all[3]!.timestamp;
    const from = await h.call('GET', `/api/gitea-workflow/audit?from=${encodeURIComponent(cut)}`);
    expect(from.body.events.length).toBeGreaterThan(0);
    expect(from.body.events.every((e: { timestamp: string }) => e.timestamp >= cut)).toBe(true);
    const to = await h.call('GET', `/api/gitea-workflow/audit?to=${encodeURIComponent('2000-01-01T00:00:00Z')}`);
    expect(to.body.events).toEqual([]);
    const page = await h.call('GET', '/api/gitea-workflow/audit?limit=2');
    expect(page.body.events.map((e: { seq: number }) => e.seq)).toEqual(all.slice(0, 2).map((e) => e.seq));
    const next = await h.call('GET', `/api/gitea-workflow/audit?limit=2&afterSeq=${page.body.nextAfterSeq}`);
    expect(next.body.events.map((e: { seq: number }) => e.seq)).toEqual(all.slice(2, 4).map((e) => e.seq));
  });
});

describe('audit by every correlation id', () => {
  it('filters by turn id, Gitea comment id and delivery key, alone or with the task; an unknown id finds nothing', async () => {
    const task = await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    await createQueuedTask(h.store, h.runtime, { taskId: 't-2' });
    await h.store.transact(async (tx) => {
      await tx.appendAudit({ action: 'codex.turn_completed', actor: 'system', taskId: 't-1', turnId: 'turn-a' });
      await tx.appendAudit({ action: 'gate.call', actor: 'system', taskId: 't-1', metadata: { turnId: 'turn-a' } });
      await tx.appendAudit({ action: 'codex.turn_completed', actor: 'system', taskId: 't-2', turnId: 'turn-b' });
      await tx.appendAudit({ action: 'receipt.progress_edited', actor: 'system', taskId: 't-1', commentId: 77 });
      await tx.appendAudit({ action: 'webhook.accepted', actor: 'system', deliveryId: task.deliveryId });
    });
    const get = async (q: string) => {
      const r = await h.call('GET', `/api/gitea-workflow/audit?${q}`);
      expect(r.status, q).toBe(200);
      return r.body.events as Array<{ action: string; taskId: string }>;
    };
    expect((await get('turnId=turn-a')).map((e) => e.action)).toEqual(['codex.turn_completed', 'gate.call']);
    expect((await get('turnId=turn-a&taskId=t-2'))).toEqual([]);
    expect((await get('commentId=77')).map((e) => e.action)).toEqual(['receipt.progress_edited']);
    const byKey = await get(`deliveryKey=${encodeURIComponent(task.deliveryKey)}`);
    expect(byKey.length).toBeGreaterThan(0);
    expect(byKey).toEqual(await get(`deliveryId=${encodeURIComponent(task.deliveryId)}`));
    expect(await get('turnId=nope')).toEqual([]);
    const bad = await h.call('GET', '/api/gitea-workflow/audit?commentId=x');
    expect(bad.status).toBe(400);
  });
});

describe('overview: the concurrency limit', () => {
  it('says the cap, the busy slots and how many queued tasks wait for a slot', async () => {
    await h.close();
    h = await startApiHarness(undefined, { concurrency: () => ({ limit: 1, busy: 1 }) });
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    await createQueuedTask(h.store, h.runtime, { taskId: 't-2', repoKey: 'default:acme/gadget' });
    await driveTask(h.runtime, 't-1', 'running');
    const o = await h.call('GET', '/api/gitea-workflow/overview');
    expect(o.body).toMatchObject({ running: 1, queued: 1, concurrency: { limit: 1, busy: 1, free: 0, waiting: 1 } });
  });

  it('without a scheduler to ask, the busy slots are the running tasks and the cap is unknown', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    const o = await h.call('GET', '/api/gitea-workflow/overview');
    expect(o.body.concurrency).toEqual({ limit: null, busy: 0, free: null, waiting: 0 });
  });
});

/** Reads SSE frames from a fetch response until `until` matches one. */
async function readEvents(res: Response, until: (e: { event: string; data: any }) => boolean): Promise<{ event: string; data: any }[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const seen: { event: string; data: any }[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended after ${JSON.stringify(seen)}`);
    buffer += decoder.decode(value, { stream: true });
    let idx: number;
    while ((idx = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, idx);
      buffer = buffer.slice(idx + 2);
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      if (event && data) {
        const e = { event, data: JSON.parse(data) };
        seen.push(e);
        if (until(e)) {
          await reader.cancel();
          return seen;
        }
      }
    }
  }
}

describe('live events', () => {
  it('streams every durable transition to a bearer client, and control changes', async () => {
    const res = await fetch(`${h.url}/api/gitea-workflow/events`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reading = readEvents(res, (e) => e.event === 'control');
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    await h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', body());
    await h.call('POST', '/api/gitea-workflow/control/pause', body());
    const events = await reading;
    const transitions = events.filter((e) => e.event === 'transition').map((e) => e.data);
    expect(transitions.map((t) => [t.actorId, t.from, t.to, t.stateVersion])).toEqual([
      [taskActorId('t-1'), null, 'queued', 2],
      [taskActorId('t-1'), 'queued', 'cancelled', 3],
    ]);
    expect(transitions[1]).toMatchObject({ kind: 'task', taskId: 't-1', by: 'admin:alice', event: 'CANCEL' });
    expect(typeof transitions[1].time).toBe('string');
    expect(events.at(-1)!.data).toMatchObject({ globalPaused: true, updatedBy: 'admin:alice' });
  });

  it('admits a one-time ticket once; the admin token is never accepted in the URL', async () => {
    const t = await h.call('POST', '/api/gitea-workflow/events/ticket');
    expect(t.status).toBe(200);
    const url = `${h.url}/api/gitea-workflow/events?ticket=${encodeURIComponent(t.body.ticket)}`;
    const first = await fetch(url);
    expect(first.status).toBe(200);
    await first.body?.cancel();
    const second = await fetch(url);
    expect(second.status).toBe(401);
    await second.body?.cancel();
    for (const q of [`ticket=${ADMIN_TOKEN}`, `token=${ADMIN_TOKEN}`, 'ticket=']) {
      const r = await fetch(`${h.url}/api/gitea-workflow/events?${q}`);
      expect(r.status, q).toBe(401);
      await r.body?.cancel();
    }
  });
});

describe('machines and actors', () => {
  it('serves every machine of machines/index.ts, serialized from its definition, with a layout', async () => {
    const res = await h.call('GET', '/api/gitea-workflow/machines');
    const ids = res.body.machines.map((m: { id: string }) => m.id);
    expect(ids).toEqual(allMachines().map((m) => m.id));
    expect(ids).toEqual(expect.arrayContaining(['task', 'repoLock', 'session', 'replyVerifier']));
    const task = res.body.machines.find((m: { id: string }) => m.id === 'task');
    expect(task.graph).toEqual(JSON.parse(JSON.stringify(machineGraph(taskMachine))));
    expect(task.graph.nodes.map((n: { id: string }) => n.id)).toEqual([...TASK_STATES]);
    expect(task.layout.nodes.map((n: { id: string }) => n.id).sort()).toEqual([...TASK_STATES].sort());
    // Every transition of the machine is drawn by some line.
    const drawn = new Set(task.layout.edges.flatMap((e: { edgeIds: string[] }) => e.edgeIds));
    expect(task.graph.edges.filter((e: { id: string }) => !drawn.has(e.id))).toEqual([]);
  });

  it('lists actors of a kind and returns an actor with its path from the audit log', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    await createQueuedTask(h.store, h.runtime, { taskId: 't-2' });
    await h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', body());
    const list = await h.call('GET', '/api/gitea-workflow/actors?kind=task');
    expect(list.body.items.map((a: { actorId: string }) => a.actorId).sort()).toEqual([taskActorId('t-1'), taskActorId('t-2')]);
    expect(list.body.kinds).toEqual(['task']);
    expect((await h.call('GET', '/api/gitea-workflow/actors?kind=lock')).body.items).toEqual([]);
    const one = await h.call('GET', `/api/gitea-workflow/actors/${encodeURIComponent(taskActorId('t-1'))}`);
    expect(one.body.actor).toMatchObject({ actorId: taskActorId('t-1'), machineId: 'task', state: 'cancelled', status: 'done' });
    expect(one.body.path.map((p: { from: string | null; to: string; event: string | null }) => [p.from, p.to, p.event])).toEqual([
      [null, 'received', null],
      ['received', 'queued', 'ACCEPT'],
      ['queued', 'cancelled', 'CANCEL'],
    ]);
    expect((await h.call('GET', `/api/gitea-workflow/actors/${encodeURIComponent('task:nope')}`)).status).toBe(404);
  });
});

describe('static pages', () => {
  it('serves /admin and /visualizer with a strict content security policy', async () => {
    for (const path of ['/admin', '/admin/admin.js', '/admin/operator-client.js', '/visualizer', '/visualizer/visualizer.js']) {
      const res = await fetch(`${h.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      const text = await res.text();
      expect(text).not.toContain('innerHTML');
    }
  });
});
