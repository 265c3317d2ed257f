// The operators' API and the real webhook intake on one store: an operator's disable is what
// intake reads, and a webhook's task is what the operator sees and can cancel.
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { createApp } from '../../src/http/create-app.js';
import { createControlRouter } from '../../src/api/control-router.js';
import type { RepositoryRecord } from '../../src/domain/records.js';
import { startIntakeHarness, type IntakeHarness } from '../support/intake-harness.js';
import { loadFixture, mutatedDelivery, withFreshDeliveryId } from '../support/webhook-fixtures.js';

/** A fixture comment with its own comment id, under a fresh delivery id (a new webhook, not a redelivery). */
function newComment(commentId: number): { body: Buffer; headers: Record<string, string> } {
  const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
    p.comment.id = commentId;
  });
  return withFreshDeliveryId(d);
}
import { ADMIN_TOKEN } from '../support/api-harness.js';

let intake: IntakeHarness | undefined;
let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await intake?.close();
  intake = undefined;
  server = undefined;
});

describe('operator API with the webhook intake', () => {
  it('disable → intake answers 409 repository_disabled; enable → the next comment becomes a task the operator lists and cancels', async () => {
    intake = await startIntakeHarness();
    const app = createApp({ routers: [createControlRouter({ store: intake.store, runtime: intake.runtime, adminToken: ADMIN_TOKEN })] });
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const api = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/gitea-workflow`;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${api}${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const control = (reason: string) => ({ requestId: randomUUID(), operator: 'alice', reason });

    const payload = JSON.parse(loadFixture('issue_comment_created_on_issue').body.toString('utf8'));
    const repoKey = `default:${payload.repository.full_name}`;
    await intake.store.transact((tx) =>
      tx.insert<RepositoryRecord>('repositories', repoKey, {
        repoKey,
        instanceId: 'default',
        owner: payload.repository.owner.login,
        name: payload.repository.name,
        cloneUrl: 'https://gitea.example.com/x.git',
        workspacePath: '/w/x',
        defaultBranch: 'main',
        status: 'active',
        registeredAt: '2026-01-01T00:00:00Z',
        lastFetchAt: null,
        version: 1,
      }),
    );

    const off = await call('POST', `/repos/${encodeURIComponent(repoKey)}/disable`, control('noisy repository'));
    expect(off).toMatchObject({ status: 200, body: { status: 'disabled' } });
    const first = newComment(910001);
    expect(await intake.post(first.body, first.headers)).toMatchObject({ status: 409, body: { error: 'repository_disabled' } });
    // No task runs; the thread's one notice of the day that the bot is disabled is a task that never runs.
    const notices = await intake.store.list<{ taskId: string; state: string }>('tasks');
    expect(notices.map((t) => t.state)).toEqual(['rejected']);

    expect((await call('POST', `/repos/${encodeURIComponent(repoKey)}/enable`, control('calm again'))).body).toMatchObject({ status: 'active' });
    const second = newComment(910002);
    const accepted = await intake.post(second.body, second.headers);
    expect(accepted.status).toBe(202);
    const taskId = accepted.body.taskId as string;

    const list = await call('GET', `/tasks?repoKey=${encodeURIComponent(repoKey)}`);
    expect(list.body.items.map((t: { taskId: string; state: string }) => [t.taskId, t.state]).sort()).toEqual([[taskId, 'queued'], [notices[0]!.taskId, 'rejected']].sort());
    const detail = await call('GET', `/tasks/${encodeURIComponent(taskId)}`);
    expect(detail.body.delivery).toMatchObject({ status: 'accepted' });
    expect(detail.body.audit.some((e: { deliveryId?: string; action: string }) => e.action.startsWith('webhook.'))).toBe(true);

    const cancel = await call('POST', `/tasks/${encodeURIComponent(taskId)}/cancel`, control('not wanted'));
    expect(cancel).toMatchObject({ status: 200, body: { fromState: 'queued', toState: 'cancelled' } });
  });
});
