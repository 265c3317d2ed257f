// The live stream of a node that shares its database: it follows the audit of every node only while a
// stream is open (a follower per node for nobody would read every other node's events), and what a
// stream gets is every transition committed after it was told "connected".
import Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { followAudit, type FollowedStore } from '../../src/api/audit-follower.js';
import { createLiveEvents } from '../../src/api/live-events.js';
import { AUDIT_CHANNEL, type SqlStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createTestRuntime } from '../support/test-runtime.js';

const ADMIN_TOKEN = 'admin-token-for-the-live-feed-test-0123456789';
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** A transition another node committed: its audit event, announced on the channel (as PostgreSQL does at commit). */
async function remoteTransition(store: Store, taskId: string, toState: string): Promise<void> {
  await store.transact(async (tx) => {
    await tx.appendAudit({ action: 'task.transition', actor: 'scheduler', actorId: `task:${taskId}`, taskId, fromState: 'queued', toState, stateVersion: 3 });
    await tx.notify(AUDIT_CHANNEL, '');
  });
}

/** The live events' routes on a port of 127.0.0.1, closed after the test; the stream's URL. */
async function serve(live: ReturnType<typeof createLiveEvents>): Promise<string> {
  const server = new Koa().use(live.router.routes()).listen(0, '127.0.0.1');
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  );
  await new Promise((r) => server.once('listening', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/gitea-workflow/events`;
}

/** Reads a stream until `needle` arrives; rejects if it ends first. */
function streamText(res: Response): { until(needle: string): Promise<void>; text(): string } {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  return {
    async until(needle) {
      while (!text.includes(needle)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended before ${needle}: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
    },
    text: () => text,
  };
}

it('follows the audit only while a stream is open, and the stream gets what commits after it connected', async () => {
  const { store, runtime, close } = await createTestRuntime([]);
  cleanups.push(() => close());
  let listening = 0;
  const sql = store as SqlStore;
  const counted: FollowedStore = {
    audit: (query) => sql.audit(query),
    lastAuditSeq: () => sql.lastAuditSeq(),
    listen: async (channel, listener) => {
      listening += 1;
      const stop = await sql.listen(channel, listener);
      return () => {
        listening -= 1;
        stop();
      };
    },
  };
  const live = createLiveEvents({ store, runtime, adminToken: ADMIN_TOKEN, auditFeed: (listener) => followAudit(counted, AUDIT_CHANNEL, listener) });
  cleanups.push(() => live.close());
  const url = await serve(live);

  await remoteTransition(store, 't-before', 'running');
  expect(listening, 'no stream open: nothing follows the audit').toBe(0);

  const abort = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: AbortSignal.any([abort.signal, AbortSignal.timeout(5_000)]) });
  const stream = streamText(res);
  await stream.until(': connected');
  expect(listening).toBe(1);
  await remoteTransition(store, 't-after', 'running');
  await stream.until('t-after');
  expect(stream.text()).not.toContain('t-before');

  abort.abort();
  await expect.poll(() => listening, { timeout: 5_000 }).toBe(0);
  expect(live.clients()).toBe(0);
});

it('a feed that cannot start ends the stream without "connected", and the next stream starts a new one', async () => {
  const { store, runtime, close } = await createTestRuntime([]);
  cleanups.push(() => close());
  const sql = store as SqlStore;
  let failures = 1;
  const flaky: FollowedStore = {
    audit: (query) => sql.audit(query),
    lastAuditSeq: async () => {
      if (failures-- > 0) throw new Error('the database did not answer');
      return sql.lastAuditSeq();
    },
    listen: (channel, listener) => sql.listen(channel, listener),
  };
  const live = createLiveEvents({ store, runtime, adminToken: ADMIN_TOKEN, auditFeed: (listener) => followAudit(flaky, AUDIT_CHANNEL, listener) });
  cleanups.push(() => live.close());
  const url = await serve(live);
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };

  const failed = await (await fetch(url, { headers, signal: AbortSignal.timeout(5_000) })).text();
  expect(failed).not.toContain(': connected');
  expect(live.clients()).toBe(0);

  const abort = new AbortController();
  // Bounded: a stream left on a dead feed would wait for its events for ever.
  const res = await fetch(url, { headers, signal: AbortSignal.any([abort.signal, AbortSignal.timeout(5_000)]) });
  const stream = streamText(res);
  await stream.until(': connected');
  await remoteTransition(store, 't-later', 'running');
  await stream.until('t-later');
  abort.abort();
});

