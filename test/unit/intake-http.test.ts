// createApp's error handler and the webhook route's own decisions (size, content type, what reaches
// intake), with a stand-in intake: no store involved.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from '../../src/http/create-app.js';
import type { IntakeRequest } from '../../src/intake/intake.js';
import type { IntakeResponse } from '../../src/intake/intake-response.js';
import { StoreUnavailableError } from '../../src/store/types.js';
import { createWebhookRouter } from '../../src/intake/webhook-route.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

async function serve(handle: (req: IntakeRequest) => Promise<IntakeResponse>, opts: { path?: string; maxBytes?: number } = {}) {
  const logs: unknown[] = [];
  const app = createApp({
    routers: [createWebhookRouter({ intake: { handle }, ...opts })],
    logger: { error: (obj) => logs.push(obj) },
  });
  server = createServer(app.callback());
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const send = (path: string, body: Buffer, headers: Record<string, string>) =>
    new Promise<{ status: number; text: string; headers: Record<string, unknown> }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'Content-Length': String(body.length), ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString(), headers: res.headers }));
      });
      req.on('error', reject);
      req.end(body);
    });
  return { send, logs };
}

const JSON_TYPE = { 'Content-Type': 'application/json' };

describe('createApp error handler', () => {
  it('an unexpected error → 500 {error:"internal_error"} with no detail in the answer', async () => {
    const { send, logs } = await serve(async () => {
      throw new Error('boom: secret-token-123 at /srv/x');
    });
    const res = await send('/api/gitea/webhook', Buffer.from('{}'), JSON_TYPE);
    expect(res.status).toBe(500);
    expect(JSON.parse(res.text)).toEqual({ error: 'internal_error' });
    expect(logs).toHaveLength(1);
  });

  it('a StoreUnavailableError escaping a route → 503 store_unavailable', async () => {
    const { send } = await serve(async () => {
      throw new StoreUnavailableError('journal fsync failed');
    });
    const res = await send('/api/gitea/webhook', Buffer.from('{}'), JSON_TYPE);
    expect(res.status).toBe(503);
    expect(JSON.parse(res.text)).toEqual({ error: 'store_unavailable' });
  });
});

describe('webhook route', () => {
  it('hands intake the exact bytes, headers, content type and TCP peer', async () => {
    const seen: IntakeRequest[] = [];
    const { send } = await serve(async (req) => {
      seen.push(req);
      return { status: 202, body: { ok: true } };
    });
    const body = Buffer.from([0x7b, 0x7d, 0x0a, 0xe2, 0x80, 0xae]);
    const res = await send('/api/gitea/webhook', body, { ...JSON_TYPE, 'X-Gitea-Delivery': 'abc' });
    expect(res.status).toBe(202);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.rawBody.equals(body)).toBe(true);
    expect(seen[0]!.headers['x-gitea-delivery']).toBe('abc');
    expect(seen[0]!.contentType).toBe('application/json');
    expect(seen[0]!.remoteAddress).toBe('127.0.0.1');
  });

  it('a configured path replaces the default', async () => {
    const { send } = await serve(async () => ({ status: 202, body: {} }), { path: '/hooks/gitea' });
    expect((await send('/hooks/gitea', Buffer.from('{}'), JSON_TYPE)).status).toBe(202);
    expect((await send('/api/gitea/webhook', Buffer.from('{}'), JSON_TYPE)).status).toBe(404);
  });

  it('over the limit → 413 without calling intake; at the limit → intake', async () => {
    let calls = 0;
    const { send } = await serve(
      async () => {
        calls += 1;
        return { status: 202, body: {} };
      },
      { maxBytes: 10 },
    );
    expect((await send('/api/gitea/webhook', Buffer.alloc(11, 0x20), JSON_TYPE)).status).toBe(413);
    expect(calls).toBe(0);
    expect((await send('/api/gitea/webhook', Buffer.alloc(10, 0x20), JSON_TYPE)).status).toBe(202);
    expect(calls).toBe(1);
  });

  it('unsupported content type → 415 without calling intake', async () => {
    let calls = 0;
    const { send } = await serve(async () => {
      calls += 1;
      return { status: 202, body: {} };
    });
    const res = await send('/api/gitea/webhook', Buffer.from('{}'), { 'Content-Type': 'text/json' });
    expect(res.status).toBe(415);
    expect(JSON.parse(res.text)).toEqual({ error: 'unsupported_media_type' });
    expect(calls).toBe(0);
  });
});
