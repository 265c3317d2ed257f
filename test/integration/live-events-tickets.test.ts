// Several nodes behind one URL (active mode): the admin page asks one node for a stream
// ticket and the load balancer may open the stream on another. With the cluster's key a ticket is
// signed, so any node admits it, each once; a forged, altered or expired one is refused. Two live
// event routers (src/api/live-events.ts) on 127.0.0.1 stand for two nodes.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLiveEvents } from '../../src/api/live-events.js';
import { createApp } from '../../src/http/create-app.js';
import { createTestRuntime } from '../support/test-runtime.js';

const ADMIN = 'admin-token-for-tickets';
const KEY = 'k'.repeat(64);
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function node(key: string | undefined, ticketTtlMs?: number): Promise<string> {
  const rt = await createTestRuntime([]);
  const live = createLiveEvents({ runtime: rt.runtime, adminToken: ADMIN, ...(key ? { ticketKey: () => key } : {}), ...(ticketTtlMs !== undefined ? { ticketTtlMs } : {}) });
  const server: Server = createApp({ routers: [live.router] }).listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  cleanups.push(() => rt.close(), () => live.close(), () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function ticketFrom(base: string): Promise<string> {
  const res = await fetch(`${base}/api/gitea-workflow/events/ticket`, { method: 'POST', headers: { Authorization: `Bearer ${ADMIN}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { ticket: string }).ticket;
}

async function open(base: string, ticket: string): Promise<number> {
  const res = await fetch(`${base}/api/gitea-workflow/events?ticket=${encodeURIComponent(ticket)}`);
  await res.body?.cancel();
  return res.status;
}

describe('stream tickets across nodes', () => {
  it('a ticket from one node opens one stream on another, once per node; an altered one, or one of another key, never', async () => {
    const a = await node(KEY);
    const b = await node(KEY);
    const other = await node('o'.repeat(64));
    const t = await ticketFrom(a);
    expect(await open(b, t)).toBe(200);
    expect(await open(b, t)).toBe(401);
    const last = t.at(-1) === 'A' ? 'B' : 'A';
    expect(await open(a, `${t.slice(0, -1)}${last}`)).toBe(401);
    expect(await open(other, t)).toBe(401);
    // Without the key (one node), a ticket is this node's own, as before.
    const solo = await node(undefined);
    const s = await ticketFrom(solo);
    expect(await open(b, s)).toBe(401);
    expect(await open(solo, s)).toBe(200);
    expect(await open(solo, s)).toBe(401);
  });

  it('an expired signed ticket is refused on every node', async () => {
    const a = await node(KEY, 50);
    const b = await node(KEY);
    const t = await ticketFrom(a);
    await new Promise((r) => setTimeout(r, 80));
    expect(await open(a, t)).toBe(401);
    expect(await open(b, t)).toBe(401);
  });
});
