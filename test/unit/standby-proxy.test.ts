// A standby forwards what it receives to the writer: src/http/standby-proxy.ts and the
// signed client address it sends along (src/http/forwarded-client.ts). The writer here is a plain
// node:http server of the test's own that reads the request as the service's app does
// (acceptForwardedClient, then clientAddress); the service end to end is test/cluster/.
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { acceptForwardedClient, clientAddress, FORWARDED_HEADER, signForwarded, verifyForwarded } from '../../src/http/forwarded-client.js';
import { standbyProxy, type StandbyTarget } from '../../src/http/standby-proxy.js';
import { defaultNodeUrl } from '../../src/service/listen.js';
import Router from '@koa/router';
import { createApp } from '../../src/http/create-app.js';

const KEY = 'k'.repeat(64);
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r())));
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: Buffer } = {}) {
  return new Promise<{ status: number; headers: IncomingMessage['headers']; body: string }>((resolve, reject) => {
    const out = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    out.on('error', reject);
    out.end(options.body);
  });
}

describe('the signed client address of a forwarded request', () => {
  it('verifies for the same key, address, method and path within a minute, and for nothing else', () => {
    const now = 1_800_000_000_000;
    const header = signForwarded(KEY, '203.0.113.7', 'POST', '/webhook', now);
    expect(verifyForwarded(KEY, header, 'POST', '/webhook', now + 59_000)).toBe('203.0.113.7');
    expect(verifyForwarded('x'.repeat(64), header, 'POST', '/webhook', now)).toBeUndefined();
    expect(verifyForwarded(KEY, header, 'GET', '/webhook', now)).toBeUndefined();
    expect(verifyForwarded(KEY, header, 'POST', '/api/gitea-workflow/tasks', now)).toBeUndefined();
    expect(verifyForwarded(KEY, header, 'POST', '/webhook', now + 61_000)).toBeUndefined();
    expect(verifyForwarded(KEY, header.replace('203.0.113.7', '203.0.113.8'), 'POST', '/webhook', now)).toBeUndefined();
    expect(verifyForwarded(KEY, 'v1;1.2.3.4;x;00', 'POST', '/webhook', now)).toBeUndefined();
    expect(verifyForwarded(KEY, '203.0.113.7', 'POST', '/webhook', now)).toBeUndefined();
  });

  it('a header that does not verify is dropped and the TCP peer is the client; one that does names the client', async () => {
    const seen: Array<{ client: string | undefined; header: unknown }> = [];
    const writer = await serve((req, res) => {
      acceptForwardedClient(req, KEY);
      seen.push({ client: clientAddress(req), header: req.headers[FORWARDED_HEADER] });
      res.end('ok');
    });
    await send(`${writer}/x`, { headers: { [FORWARDED_HEADER]: signForwarded('wrong-key', '198.51.100.1', 'GET', '/x') } });
    await send(`${writer}/x`, { headers: { [FORWARDED_HEADER]: signForwarded(KEY, '198.51.100.2', 'GET', '/x') } });
    expect(seen).toEqual([
      { client: '127.0.0.1', header: undefined },
      { client: '198.51.100.2', header: undefined },
    ]);
  });
});

it("the service's app checks the header before any route reads the client (the audit's source, the failed-login guard)", async () => {
  const router = new Router();
  router.get('/who', (ctx) => {
    ctx.body = { client: clientAddress(ctx.req) ?? null, header: ctx.get(FORWARDED_HEADER) };
  });
  const withKey = await serve(createApp({ routers: [router], forwardKey: () => KEY }).callback());
  const embedded = await serve(createApp({ routers: [router] }).callback());
  const signed = { [FORWARDED_HEADER]: signForwarded(KEY, '198.51.100.3', 'GET', '/who') };
  expect(JSON.parse((await send(`${withKey}/who`, { headers: signed })).body)).toEqual({ client: '198.51.100.3', header: '' });
  expect(JSON.parse((await send(`${embedded}/who`, { headers: signed })).body)).toEqual({ client: '127.0.0.1', header: '' });
});

describe('a standby forwards to the writer', () => {
  function standby(writer: () => StandbyTarget | undefined, key: string | undefined = KEY) {
    return serve(standbyProxy({ nodeId: 'node-s', writer, key: () => key }));
  }

  it('passes method, path, headers and body through byte for byte, with the client vouched for; the answer comes back as the writer gave it', async () => {
    const got: Array<{ method?: string; url?: string; sig?: string; body: Buffer; client?: string; conn?: string }> = [];
    const writer = await serve((req, res) => {
      acceptForwardedClient(req, KEY);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push({ method: req.method, url: req.url, sig: req.headers['x-gitea-signature'] as string, body: Buffer.concat(chunks), client: clientAddress(req), conn: req.headers['x-custom'] as string });
        res.writeHead(202, { 'content-type': 'application/json', 'x-answer': 'yes' });
        res.end('{"status":"accepted"}');
      });
    });
    const proxy = await standby(() => ({ nodeId: 'node-w', url: writer }));
    const body = Buffer.from('{"a":"\u00e9\\u0000 exact"}\n  ', 'utf8');
    const res = await send(`${proxy}/webhook?x=1`, { method: 'POST', headers: { 'x-gitea-signature': 'abc', 'x-custom': 'kept', 'content-type': 'application/json' }, body });
    expect(res.status).toBe(202);
    expect(res.headers['x-answer']).toBe('yes');
    expect(res.body).toBe('{"status":"accepted"}');
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ method: 'POST', url: '/webhook?x=1', sig: 'abc', client: '127.0.0.1', conn: 'kept' });
    expect(got[0]!.body.equals(body)).toBe(true);
  });

  it('sends a request on to the writer only: a request target in absolute form, or one the URL parser reads as another host, is refused', async () => {
    const elsewhere: string[] = [];
    const other = await serve((req, res) => {
      elsewhere.push(req.url ?? '');
      res.end('{}');
    });
    const writer = await serve((_req, res) => res.end('{}'));
    const proxy = await standby(() => ({ nodeId: 'node-w', url: writer }));
    const { port } = new URL(proxy);
    const otherHost = new URL(other).host;
    for (const path of [`${other}/x`, `//${otherHost}/x`, `/\\${otherHost}/x`]) {
      const status = await new Promise<number>((resolve, reject) => {
        const out = request({ host: '127.0.0.1', port, method: 'GET', path }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        out.on('error', reject);
        out.end();
      });
      expect(status, path).toBe(400);
    }
    expect(elsewhere).toEqual([]);
  });

  it('answers /healthz itself, and 503 with Retry-After while it knows no writer or the writer does not answer', async () => {
    let writer: StandbyTarget | undefined;
    const proxy = await standby(() => writer);
    const health = await send(`${proxy}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ status: 'ok', role: 'standby', node: 'node-s' });
    const none = await send(`${proxy}/readyz`);
    expect(none.status).toBe(503);
    expect(none.headers['retry-after']).toBe('2');
    expect(JSON.parse(none.body).error).toBe('standby');
    writer = { nodeId: 'node-w', url: null };
    expect((await send(`${proxy}/readyz`)).status).toBe(503);
    // A port nothing listens on.
    const gone = await serve((_req, res) => res.end());
    servers.pop()!.close();
    writer = { nodeId: 'node-w', url: gone };
    const down = await send(`${proxy}/webhook`, { method: 'POST', body: Buffer.from('{}') });
    expect(down.status).toBe(503);
    expect(JSON.parse(down.body)).toMatchObject({ error: 'writer_unreachable' });
  });

  it('does not forward a request another standby forwarded (two standbys that disagree on the writer never loop)', async () => {
    let reached = 0;
    const writer = await serve((_req, res) => {
      reached += 1;
      res.end('ok');
    });
    const proxy = await standby(() => ({ nodeId: 'node-w', url: writer }));
    const res = await send(`${proxy}/api/x`, { headers: { [FORWARDED_HEADER]: signForwarded(KEY, '198.51.100.9', 'GET', '/api/x') } });
    expect(res.status).toBe(503);
    expect(reached).toBe(0);
  });
});

describe('the URL other nodes reach this one at, by default', () => {
  it('is the listening address, or the host name when it listens on every address', () => {
    expect(defaultNodeUrl('127.0.0.1', 8080, 'box')).toBe('http://127.0.0.1:8080');
    expect(defaultNodeUrl('0.0.0.0', 8080, 'box')).toBe('http://box:8080');
    expect(defaultNodeUrl('::', 8080, 'box')).toBe('http://box:8080');
    expect(defaultNodeUrl('::1', 8080, 'box')).toBe('http://[::1]:8080');
  });
});
