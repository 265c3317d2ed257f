import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { ControlRecord, RepositoryRecord, TaskRecord } from '../../src/domain/records.js';
import { agentToolGroupsOf } from '../../src/sessions/gate-calls.js';
import { publishPathSettings } from '../../src/publish/protected-paths.js';
import { sendStops, stopTargets } from '../../src/intake/stop-tasks.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { ADMIN_TOKEN, createQueuedTask, driveTask, insertRepository, startApiHarness, type ApiHarness } from '../support/api-harness.js';

let h: ApiHarness;
beforeEach(async () => {
  h = await startApiHarness();
});
afterEach(async () => {
  await h.close();
});

const body = (over: Record<string, unknown> = {}) => ({ requestId: randomUUID(), operator: 'alice', reason: 'testing the control plane', ...over });

async function transitions(taskId: string, to?: string) {
  return (await h.store.audit({ actorId: taskActorId(taskId) })).filter((e) => e.action === 'task.transition' && (!to || e.toState === to));
}

describe('authentication', () => {
  const REPO = encodeURIComponent('default:acme/widget');
  const routes: [string, string][] = [
    ['GET', '/api/gitea-workflow/overview'],
    ['GET', '/api/gitea-workflow/tasks'],
    ['GET', '/api/gitea-workflow/tasks/t-1'],
    ['GET', '/api/gitea-workflow/audit?format=ndjson'],
    ['GET', '/api/gitea-workflow/machines'],
    ['GET', '/api/gitea-workflow/actors?kind=task'],
    ['GET', `/api/gitea-workflow/actors/${encodeURIComponent('task:t-1')}`],
    ['GET', '/api/gitea-workflow/events'],
    ['POST', '/api/gitea-workflow/events/ticket'],
    ['POST', '/api/gitea-workflow/control/pause'],
    ['POST', '/api/gitea-workflow/control/resume'],
    ['POST', `/api/gitea-workflow/repos/${REPO}/disable`],
    ['POST', `/api/gitea-workflow/repos/${REPO}/enable`],
    ['POST', '/api/gitea-workflow/tasks/t-1/cancel'],
    ['POST', '/api/gitea-workflow/tasks/t-1/unblock'],
    ['POST', '/api/gitea-workflow/tasks/t-1/abort'],
  ];

  it('answers 401 {error:"unauthorized"} without a token, with a wrong one, and with a non-bearer scheme, and changes nothing', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    await insertRepository(h.store, 'default:acme/widget');
    const auditBefore = (await h.store.audit()).length;
    for (const [method, path] of routes) {
      const payload = method === 'POST' ? body() : undefined;
      for (const token of [null, 'wrong-token', `${ADMIN_TOKEN}x`, ADMIN_TOKEN.slice(0, -1), '']) {
        const res = await h.call(method, path, payload, token);
        expect(res.status, `${method} ${path} with ${token === null ? 'no token' : 'a wrong token'}`).toBe(401);
        expect(res.body).toEqual({ error: 'unauthorized' });
      }
      const basic = await fetch(`${h.url}${path}`, { method, headers: { authorization: `Basic ${ADMIN_TOKEN}` } });
      expect(basic.status).toBe(401);
      await basic.body?.cancel();
    }
    expect((await h.store.audit()).length).toBe(auditBefore);
    expect((await h.store.get<TaskRecord>('tasks', 't-1'))!.state).toBe('queued');
    expect(await h.store.get('control', 'global')).toBeUndefined();
    expect(await h.store.count('control_requests')).toBe(0);
  });

  it('accepts the right token (case-insensitive scheme)', async () => {
    const res = await fetch(`${h.url}/api/gitea-workflow/overview`, { headers: { authorization: `bearer ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    await res.body?.cancel();
  });
});

describe('validation', () => {
  it('rejects unknown keys (model, MCP, git parameters included), a missing or blank reason and a malformed requestId or operator with 400', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    const bad: [string, unknown][] = [
      ['unknown key', body({ extra: 1 })],
      ['model parameter', body({ model: 'gpt-5' })],
      ['mcp parameter', body({ mcpServers: { gitea: { command: 'sh' } } })],
      ['git parameter', body({ gitCommand: 'push --force' })],
      ['missing reason', { requestId: randomUUID(), operator: 'alice' }],
      ['blank reason', body({ reason: '   ' })],
      ['too long reason', body({ reason: 'x'.repeat(501) })],
      ['control characters in reason', body({ reason: 'line\nforged' })],
      ['short requestId', body({ requestId: 'abc' })],
      ['requestId with spaces', body({ requestId: 'has spaces in it' })],
      ['missing requestId', { operator: 'alice', reason: 'r' }],
      ['operator not a login', body({ operator: 'alice; drop' })],
      ['not an object', ['requestId']],
    ];
    for (const [name, payload] of bad) {
      for (const path of ['/api/gitea-workflow/tasks/t-1/cancel', '/api/gitea-workflow/control/pause']) {
        const res = await h.call('POST', path, payload);
        expect(res.status, `${name} → ${path}`).toBe(400);
        expect(res.body.error).toBe('invalid_request');
      }
    }
    const unknown = await h.call('POST', '/api/gitea-workflow/control/pause', body({ model: 'x' }));
    expect(unknown.body.issues[0].code).toBe('unrecognized_keys');
    const missing = await h.call('POST', '/api/gitea-workflow/control/pause', { requestId: randomUUID(), operator: 'alice' });
    expect(missing.body.issues.map((i: { path: string }) => i.path)).toEqual(['reason']);
    // Nothing happened: the task is still queued, no control record, no request stored.
    expect((await h.store.get<TaskRecord>('tasks', 't-1'))!.state).toBe('queued');
    expect(await h.store.get('control', 'global')).toBeUndefined();
    expect(await h.store.count('control_requests')).toBe(0);
    expect(await transitions('t-1', 'cancelled')).toHaveLength(0);
  });

  it('rejects malformed JSON, a wrong media type, and invalid query parameters', async () => {
    const raw = await fetch(`${h.url}/api/gitea-workflow/control/pause`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: '{"requestId":',
    });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toEqual({ error: 'invalid_json' });
    const text = await fetch(`${h.url}/api/gitea-workflow/control/pause`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'text/plain' },
      body: JSON.stringify(body()),
    });
    expect(text.status).toBe(415);
    await text.body?.cancel();
    for (const q of ['state=bogus', 'page=0', 'pageSize=101', 'sort=createdAt']) {
      expect((await h.call('GET', `/api/gitea-workflow/tasks?${q}`)).status, q).toBe(400);
    }
    for (const q of ['from=yesterday', 'format=csv', 'limit=0']) {
      expect((await h.call('GET', `/api/gitea-workflow/audit?${q}`)).status, q).toBe(400);
    }
  });
});

describe('pause and resume', () => {
  it('sets the control record with CAS versions, audits the operator and reason, and replays a repeated requestId', async () => {
    const req = body({ reason: 'maintenance window' });
    const first = await h.call('POST', '/api/gitea-workflow/control/pause', req);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ ok: true, changed: true, control: { globalPaused: true, pauseReason: 'maintenance window', updatedBy: 'admin:alice', version: 1 } });
    const control = (await h.store.get<ControlRecord>('control', 'global'))!;
    expect(control).toMatchObject({ globalPaused: true, pauseReason: 'maintenance window', updatedBy: 'admin:alice', version: 1 });
    expect(h.controlChanges).toBe(1);

    const again = await h.call('POST', '/api/gitea-workflow/control/pause', req);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replay')).toBe('true');
    expect((await h.store.get<ControlRecord>('control', 'global'))!.version).toBe(1);
    expect(h.controlChanges).toBe(1);
    const audits = (await h.store.audit()).filter((e) => e.action === 'control.pause');
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ actor: 'admin:alice', metadata: { reason: 'maintenance window', requestId: req.requestId } });

    const overview = await h.call('GET', '/api/gitea-workflow/overview');
    expect(overview.body.control).toMatchObject({ globalPaused: true, pauseReason: 'maintenance window' });

    // Pausing again with a new request changes nothing but is still answered and audited.
    const twice = await h.call('POST', '/api/gitea-workflow/control/pause', body());
    expect(twice.body).toMatchObject({ ok: true, changed: false });
    expect((await h.store.get<ControlRecord>('control', 'global'))!.version).toBe(1);

    const resume = await h.call('POST', '/api/gitea-workflow/control/resume', body({ operator: 'bob' }));
    expect(resume.body).toMatchObject({ ok: true, changed: true, control: { globalPaused: false, pauseReason: null, updatedBy: 'admin:bob', version: 2 } });
    expect(await h.store.get<ControlRecord>('control', 'global')).toMatchObject({ globalPaused: false, version: 2 });
    expect(h.controlChanges).toBe(3);
  });

  it('refuses a requestId reused for another action with 409 request_id_conflict', async () => {
    const req = body();
    expect((await h.call('POST', '/api/gitea-workflow/control/pause', req)).status).toBe(200);
    const other = await h.call('POST', '/api/gitea-workflow/control/resume', req);
    expect(other.status).toBe(409);
    expect(other.body).toEqual({ error: 'request_id_conflict' });
    expect((await h.store.get<ControlRecord>('control', 'global'))!.globalPaused).toBe(true);
  });
});

describe('repositories', () => {
  it('disables and enables a repository (URL-encoded repoKey), with CAS on version and audit; unknown repo → 404', async () => {
    await insertRepository(h.store, 'default:acme/widget');
    const path = `/api/gitea-workflow/repos/${encodeURIComponent('default:acme/widget')}`;
    const req = body({ reason: 'runaway bot' });
    const off = await h.call('POST', `${path}/disable`, req);
    expect(off.status).toBe(200);
    expect(off.body).toEqual({ ok: true, changed: true, repoKey: 'default:acme/widget', status: 'disabled', version: 2 });
    expect(await h.store.get<RepositoryRecord>('repositories', 'default:acme/widget')).toMatchObject({ status: 'disabled', version: 2 });
    expect((await h.call('POST', `${path}/disable`, req)).body).toEqual(off.body);
    expect((await h.store.get<RepositoryRecord>('repositories', 'default:acme/widget'))!.version).toBe(2);
    const audit = (await h.store.audit()).filter((e) => e.action === 'control.repo_disable');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: 'admin:alice', fromState: 'active', toState: 'disabled', metadata: { repoKey: 'default:acme/widget', reason: 'runaway bot' } });
    expect(h.controlChanges).toBe(1);

    const overview = await h.call('GET', '/api/gitea-workflow/overview');
    expect(overview.body.repos).toEqual([expect.objectContaining({ repoKey: 'default:acme/widget', status: 'disabled' })]);

    const on = await h.call('POST', `${path}/enable`, body());
    expect(on.body).toMatchObject({ status: 'active', version: 3 });

    const missing = await h.call('POST', `/api/gitea-workflow/repos/${encodeURIComponent('default:acme/nope')}/disable`, body());
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ error: 'repo_not_found' });
  });
});

describe('task controls', () => {
  it('cancels a queued task once: transition + audit by admin:<operator>, a repeat replays, a second request → 409 with the state', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    const req = body({ reason: 'wrong repository' });
    const first = await h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', req);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ ok: true, taskId: 't-1', fromState: 'queued', toState: 'cancelled', stateVersion: 3 });
    expect(await h.store.get<TaskRecord>('tasks', 't-1')).toMatchObject({ state: 'cancelled', stoppedBy: 'admin:alice', stateVersion: 3 });
    const t = await transitions('t-1', 'cancelled');
    expect(t).toHaveLength(1);
    expect(t[0]).toMatchObject({ actor: 'admin:alice', fromState: 'queued', metadata: { event: { type: 'CANCEL', by: 'admin:alice', requestId: req.requestId } } });

    const repeat = await h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', req);
    expect(repeat.status).toBe(200);
    expect(repeat.body).toEqual(first.body);
    expect(await transitions('t-1', 'cancelled')).toHaveLength(1);
    const controls = (await h.store.audit({ taskId: 't-1' })).filter((e) => e.action === 'control.task_cancel');
    expect(controls).toHaveLength(1);
    expect(controls[0]).toMatchObject({ actor: 'admin:alice', level: 'security', metadata: { reason: 'wrong repository', requestId: req.requestId } });

    const second = await h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', body());
    expect(second.status).toBe(409);
    expect(second.body).toEqual({ error: 'illegal_state', state: 'cancelled' });
    // The refusal is answered before the runtime sees it: no event, no alert.
    expect((await h.store.audit({ taskId: 't-1' })).filter((e) => e.action === 'runtime.event_rejected')).toHaveLength(0);
    expect((await h.store.audit({ taskId: 't-1' })).filter((e) => e.action === 'control.task_cancel')).toHaveLength(2);
  });

  it('two concurrent requests with one requestId make one transition and get the same answer', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    const req = body();
    const [a, b] = await Promise.all([
      h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', req),
      h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', req),
    ]);
    expect(a.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(await transitions('t-1', 'cancelled')).toHaveLength(1);
    expect((await h.store.audit({ taskId: 't-1' })).filter((e) => e.action === 'control.task_cancel')).toHaveLength(1);
  });

  // Cancel and abort reach every non-terminal state, retry_wait, preparing, verifying_reply and
  // publishing included.
  const claim = (id: string) => ({ type: 'CLAIM', leaseId: `lease-${id}` });
  const ready = { type: 'WORKSPACE_READY' };
  const INTO: Array<[string, (id: string) => Array<{ type: string; [k: string]: unknown }>, 'cancelled' | 'aborting']> = [
    ['queued', () => [], 'cancelled'],
    ['preparing', (id) => [claim(id)], 'aborting'],
    ['running', (id) => [claim(id), ready], 'aborting'],
    ['publishing', (id) => [claim(id), ready, { type: 'TURN_REPLIED', publish: true }], 'aborting'],
    ['verifying_reply', (id) => [claim(id), ready, { type: 'TURN_REPLIED' }], 'aborting'],
    ['retry_wait', (id) => [claim(id), { type: 'PREPARE_FAILED', errorCode: 'git_failed', retryable: true, retryAt: 1 }], 'cancelled'],
    ['waiting_user', (id) => [claim(id), ready, { type: 'TURN_WAITING_USER' }, { type: 'REPLY_CONFIRMED' }], 'cancelled'],
    ['blocked_workspace', (id) => [claim(id), { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' }], 'cancelled'],
  ];
  async function taskIn(taskId: string, state: string): Promise<void> {
    await createQueuedTask(h.store, h.runtime, { taskId });
    for (const e of INTO.find(([s]) => s === state)![1](taskId)) expect((await h.runtime.send(taskActorId(taskId), e as never)).ok).toBe(true);
    expect((await h.store.get<TaskRecord>('tasks', taskId))!.state).toBe(state);
  }

  for (const action of ['cancel', 'abort'] as const) {
    it(`${action} stops a task in every non-terminal state: nothing in flight → cancelled, work in flight → aborting (its host is asked to stop it)`, async () => {
      for (const [state, , after] of INTO) {
        const id = `t-${action}-${state}`;
        await taskIn(id, state);
        const res = await h.call('POST', `/api/gitea-workflow/tasks/${id}/${action}`, body());
        expect(res.status, state).toBe(200);
        expect(res.body, state).toMatchObject({ ok: true, taskId: id, fromState: state, toState: after });
        expect(await h.store.get<TaskRecord>('tasks', id), state).toMatchObject({ state: after, stoppedBy: 'admin:alice' });
        expect(h.aborts.at(-1), state).toBe(id);
      }
    });
  }

  it('a task already aborting answers 200 alreadyStopping and is sent nothing; a terminal or unknown task is refused', async () => {
    await taskIn('t-run', 'running');
    expect((await h.call('POST', '/api/gitea-workflow/tasks/t-run/abort', body())).body).toMatchObject({ toState: 'aborting' });
    const version = (await h.store.get<TaskRecord>('tasks', 't-run'))!.stateVersion;
    for (const action of ['cancel', 'abort']) {
      const again = await h.call('POST', `/api/gitea-workflow/tasks/t-run/${action}`, body());
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ ok: true, fromState: 'aborting', toState: 'aborting', alreadyStopping: true, stateVersion: version });
    }
    expect((await h.store.get<TaskRecord>('tasks', 't-run'))!.stateVersion).toBe(version);
    expect(await transitions('t-run', 'aborting')).toHaveLength(1);

    await taskIn('t-done', 'queued');
    await h.call('POST', '/api/gitea-workflow/tasks/t-done/cancel', body());
    const ended = await h.call('POST', '/api/gitea-workflow/tasks/t-done/abort', body());
    expect(ended.status).toBe(409);
    expect(ended.body).toEqual({ error: 'illegal_state', state: 'cancelled' });

    const missing = await h.call('POST', '/api/gitea-workflow/tasks/nope/cancel', body());
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ error: 'task_not_found' });
  });

  it('aborts a running task into aborting and asks the executor to interrupt, once', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-run' });
    await driveTask(h.runtime, 't-run', 'running');
    const req = body({ reason: 'agent is looping' });
    const res = await h.call('POST', '/api/gitea-workflow/tasks/t-run/abort', req);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, fromState: 'running', toState: 'aborting' });
    expect(await h.store.get<TaskRecord>('tasks', 't-run')).toMatchObject({ state: 'aborting', stoppedBy: 'admin:alice' });
    expect(h.aborts).toEqual(['t-run']);
    expect((await h.call('POST', '/api/gitea-workflow/tasks/t-run/abort', req)).body).toEqual(res.body);
    expect(h.aborts).toEqual(['t-run']);
    expect(await transitions('t-run', 'aborting')).toHaveLength(1);
    expect((await h.store.audit({ taskId: 't-run' })).filter((e) => e.action === 'control.task_abort')).toHaveLength(1);
  });

  it('a stopped task says who stopped it, why and how the stop ended, in its detail and in the list; a finished task says so', async () => {
    const send = async (id: string, e: { type: string; [k: string]: unknown }, by?: string) =>
      expect((await h.runtime.send(taskActorId(id), e as never, by ? { by } : undefined)).ok).toBe(true);
    const detail = async (id: string) => (await h.call('GET', `/api/gitea-workflow/tasks/${id}`)).body;
    // An operator's abort, confirmed by the work in flight (what the executor sends).
    await taskIn('t-op', 'running');
    await h.call('POST', '/api/gitea-workflow/tasks/t-op/abort', body({ reason: 'wrong repository' }));
    const stopAt = (await transitions('t-op', 'aborting'))[0]!.timestamp;
    expect((await detail('t-op')).stop).toEqual({ kind: 'operator', by: 'admin:alice', login: 'alice', reason: 'wrong repository', at: stopAt, outcome: 'stopping' });
    await send('t-op', { type: 'ABORT_CONFIRMED' });
    const op = await detail('t-op');
    expect(op.task.state).toBe('aborted');
    expect(op.stop).toEqual({ kind: 'operator', by: 'admin:alice', login: 'alice', reason: 'wrong repository', at: stopAt, outcome: 'stopped' });
    expect(op.finished).toBe(true);
    // A stop comment on the thread (intake's own stop path), the service restarting while it stops.
    await taskIn('t-comment', 'publishing');
    const resourceKey = (await h.store.get<TaskRecord>('tasks', 't-comment'))!.resourceKey;
    await sendStops(h.runtime, await stopTargets(h.store, resourceKey), 'gitea:user:bob');
    await send('t-comment', { type: 'RECOVER_INTERRUPTED', retryAt: Date.now() });
    expect((await detail('t-comment')).stop).toMatchObject({ kind: 'stop_comment', by: 'gitea:user:bob', login: 'bob', reason: null, outcome: 'stopped_at_restart' });
    // An abort the work in flight never confirmed: failed, abort_timeout.
    await taskIn('t-timeout', 'verifying_reply');
    await h.call('POST', '/api/gitea-workflow/tasks/t-timeout/cancel', body({ reason: 'no longer needed' }));
    await send('t-timeout', { type: 'ABORT_TIMEOUT' });
    expect(await detail('t-timeout')).toMatchObject({ error: 'abort_timeout', stop: { kind: 'operator', reason: 'no longer needed', outcome: 'timed_out' } });
    // Nothing in flight: cancelled at once.
    await taskIn('t-queued', 'queued');
    await h.call('POST', '/api/gitea-workflow/tasks/t-queued/cancel', body({ reason: 'duplicate' }));
    expect((await detail('t-queued')).stop).toMatchObject({ kind: 'operator', reason: 'duplicate', outcome: 'stopped' });
    // Not stopped: no stop; still at work: not finished.
    await taskIn('t-busy', 'running');
    expect(await detail('t-busy')).toMatchObject({ stop: null, finished: false });

    const list = (await h.call('GET', '/api/gitea-workflow/tasks?pageSize=100')).body.items;
    const stopOf = (id: string) => list.find((t: { taskId: string }) => t.taskId === id).stop;
    expect(stopOf('t-op')).toEqual(op.stop);
    expect(stopOf('t-comment')).toMatchObject({ kind: 'stop_comment', login: 'bob', outcome: 'stopped_at_restart' });
    expect(stopOf('t-timeout')).toMatchObject({ outcome: 'timed_out' });
    expect(stopOf('t-busy')).toBeNull();
  });

  it('unblocks a blocked_workspace task back to queued; refuses it elsewhere', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    const early = await h.call('POST', '/api/gitea-workflow/tasks/t-1/unblock', body());
    expect(early.body).toEqual({ error: 'illegal_state', state: 'queued' });
    await driveTask(h.runtime, 't-1', 'blocked_workspace');
    const res = await h.call('POST', '/api/gitea-workflow/tasks/t-1/unblock', body({ operator: 'carol', reason: 'workspace cleaned by hand' }));
    expect(res.body).toMatchObject({ ok: true, fromState: 'blocked_workspace', toState: 'queued' });
    expect(await h.store.get<TaskRecord>('tasks', 't-1')).toMatchObject({ state: 'queued', errorCode: null });
    expect((await transitions('t-1')).at(-1)).toMatchObject({ actor: 'admin:carol', fromState: 'blocked_workspace', toState: 'queued' });
  });

  it('after a crash between the transition and its record, a retried requestId answers from the transition and sends nothing', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 't-1' });
    const req = body();
    // The transition happened (its event carries the requestId), the control request was never stored.
    const sent = await h.runtime.send(taskActorId('t-1'), { type: 'CANCEL', by: 'admin:alice', requestId: req.requestId } as never, { by: 'admin:alice' });
    expect(sent.ok).toBe(true);
    const res = await h.call('POST', '/api/gitea-workflow/tasks/t-1/cancel', req);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, fromState: 'queued', toState: 'cancelled' });
    expect(await transitions('t-1', 'cancelled')).toHaveLength(1);
    expect((await h.store.audit({ taskId: 't-1' })).filter((e) => e.action === 'runtime.event_rejected')).toHaveLength(0);
  });

  it('allows the agent more tools on one repository (audited, idempotent by requestId); an unknown group names the field; the gate reads it', async () => {
    await insertRepository(h.store, 'default:acme/widget');
    const path = `/api/gitea-workflow/repos/${encodeURIComponent('default:acme/widget')}/agent-tools`;
    const req = body({ reason: 'triage bot labels issues', groups: ['labels'] });
    const on = await h.call('POST', path, req);
    expect(on.status).toBe(200);
    expect(on.body).toEqual({ ok: true, changed: true, repoKey: 'default:acme/widget', agentToolGroups: ['labels'], version: 2 });
    expect((await h.call('POST', path, req)).body).toEqual(on.body);
    expect(await agentToolGroupsOf(h.store, 'default:acme/widget')).toEqual(['labels']);
    const audit = (await h.store.audit()).filter((e) => e.action === 'control.repo_agent_tools');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: 'admin:alice', level: 'security', fromState: 'none', toState: 'labels', metadata: { groups: ['labels'] } });

    const bad = await h.call('POST', path, body({ groups: ['merge'] }));
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('groups');
    expect(await agentToolGroupsOf(h.store, 'default:acme/widget')).toEqual(['labels']);

    const off = await h.call('POST', path, body({ groups: [] }));
    expect(off.body).toMatchObject({ changed: true, agentToolGroups: [], version: 3 });
    expect(await agentToolGroupsOf(h.store, 'default:acme/widget')).toEqual([]);
  });

  it('sets what the publisher may commit on one repository (audited, idempotent by requestId); a bad path names itself; the publisher reads it', async () => {
    await insertRepository(h.store, 'default:acme/widget');
    const path = `/api/gitea-workflow/repos/${encodeURIComponent('default:acme/widget')}/publish-paths`;
    const settings = async () => publishPathSettings(await h.store.get<RepositoryRecord>('repositories', 'default:acme/widget'));
    expect(await settings()).toEqual({ allowCiChanges: false, protectedPaths: [] });
    const req = body({ reason: 'CI here is reviewed by hand', allowCiChanges: true, protectedPaths: ['deploy/', 'Makefile', 'deploy'] });
    const on = await h.call('POST', path, req);
    expect(on.status).toBe(200);
    expect(on.body).toEqual({ ok: true, changed: true, repoKey: 'default:acme/widget', publishPaths: { allowCiChanges: true, protectedPaths: ['Makefile', 'deploy'] }, version: 2 });
    expect((await h.call('POST', path, req)).body).toEqual(on.body);
    expect(await settings()).toEqual({ allowCiChanges: true, protectedPaths: ['Makefile', 'deploy'] });
    const audit = (await h.store.audit()).filter((e) => e.action === 'control.repo_publish_paths');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      actor: 'admin:alice',
      level: 'security',
      fromState: 'allowCiChanges=false;protectedPaths=',
      toState: 'allowCiChanges=true;protectedPaths=Makefile,deploy',
      metadata: { repoKey: 'default:acme/widget', allowCiChanges: true, protectedPaths: ['Makefile', 'deploy'] },
    });

    const bad = await h.call('POST', path, body({ allowCiChanges: false, protectedPaths: ['../outside'] }));
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('../outside');
    expect((await settings()).allowCiChanges).toBe(true);
    expect((await h.call('POST', path, body({ allowCiChanges: false }))).body).toMatchObject({ changed: true, publishPaths: { allowCiChanges: false, protectedPaths: [] }, version: 3 });
    expect((await h.call('POST', `/api/gitea-workflow/repos/${encodeURIComponent('default:no/such')}/publish-paths`, body({ allowCiChanges: true }))).status).toBe(404);
  });

  it('switches "request changes on the bot\'s PR starts a task" per repository: off by default, audited, idempotent, any letter case', async () => {
    await insertRepository(h.store, 'default:acme/widget');
    const path = (key: string) => `/api/gitea-workflow/repos/${encodeURIComponent(key)}/review-triggers`;
    const stored = async () => (await h.store.get<RepositoryRecord>('repositories', 'default:acme/widget'))?.reviewTriggers;
    expect(await stored()).toBeUndefined();
    const req = body({ reason: 'the bot answers reviews of its PRs', requestChanges: true });
    const on = await h.call('POST', path('default:ACME/Widget'), req);
    expect(on.status).toBe(200);
    expect(on.body).toEqual({ ok: true, changed: true, repoKey: 'default:acme/widget', reviewTriggers: { requestChanges: true }, version: 2 });
    expect((await h.call('POST', path('default:ACME/Widget'), req)).body).toEqual(on.body);
    expect(await stored()).toEqual({ requestChanges: true });
    const audit = (await h.store.audit()).filter((e) => e.action === 'control.repo_review_triggers');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: 'admin:alice', fromState: 'requestChanges=false', toState: 'requestChanges=true' });
    expect((await h.call('POST', path('default:acme/widget'), body({ requestChanges: 'yes' }))).status).toBe(400);
    expect((await h.call('POST', path('default:acme/widget'), body({ requestChanges: false }))).body).toMatchObject({ changed: true, reviewTriggers: { requestChanges: false }, version: 3 });
    expect((await h.call('POST', path('default:no/such'), body({ requestChanges: true }))).status).toBe(404);
  });

  it("switches a reader's notice (only writers can ask) per repository: on by default, audited, idempotent, any letter case", async () => {
    await insertRepository(h.store, 'default:acme/widget');
    const path = (key: string) => `/api/gitea-workflow/repos/${encodeURIComponent(key)}/reader-notices`;
    const stored = async () => (await h.store.get<RepositoryRecord>('repositories', 'default:acme/widget'))?.readerNotices;
    expect(await stored()).toBeUndefined();
    const req = body({ reason: 'readers here are bots that mention everyone', enabled: false });
    const off = await h.call('POST', path('default:ACME/Widget'), req);
    expect(off.status).toBe(200);
    expect(off.body).toEqual({ ok: true, changed: true, repoKey: 'default:acme/widget', readerNotices: { enabled: false }, version: 2 });
    expect((await h.call('POST', path('default:ACME/Widget'), req)).body).toEqual(off.body);
    expect(await stored()).toEqual({ enabled: false });
    const audit = (await h.store.audit()).filter((e) => e.action === 'control.repo_reader_notices');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: 'admin:alice', level: 'security', fromState: 'enabled=true', toState: 'enabled=false' });
    expect((await h.call('POST', path('default:acme/widget'), body({ enabled: 'no' }))).status).toBe(400);
    expect((await h.call('POST', path('default:acme/widget'), body({ enabled: true }))).body).toMatchObject({ changed: true, readerNotices: { enabled: true }, version: 3 });
    expect((await h.call('POST', path('default:acme/widget'), body({ enabled: true }))).body).toMatchObject({ changed: false, version: 3 });
    expect((await h.call('POST', path('default:no/such'), body({ enabled: false }))).status).toBe(404);
  });
});
