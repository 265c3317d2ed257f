// Slow and many clients against the real service process, configured through
// its CCWEB_HTTP_* keys with small values so the test stays short: a client that trickles its headers
// or its body is answered 408 and cut within the configured time (plus a margin), the service keeps
// answering others meanwhile, and connections past CCWEB_HTTP_MAX_CONNECTIONS are refused without
// disturbing the ones already open. Raw sockets on 127.0.0.1: no HTTP library sends this slowly.
// The sandbox environment (as the fuzz test): Gitea only answers the service's start-up here.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createStore } from '../../src/store/index.js';
import { startSandboxEnvironment, type SandboxEnvironment } from '../../src/demo/sandbox-environment.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { openSlow, sendRaw, type SlowConnection } from './raw-http.js';

const HEADERS_S = 2;
const BODY_S = 3;
const MAX_CONNECTIONS = 3;
/** Node checks for expired requests every 500 ms at these settings; the rest is a loaded machine. */
const MARGIN_MS = 1_500;
const WEBHOOK_PATH = '/api/gitea/webhook';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes `piece` every `everyMs` until the connection closes. */
function trickle(c: SlowConnection, piece: string, everyMs: number): () => void {
  const timer = setInterval(() => c.write(piece), everyMs);
  void c.closed.then(() => clearInterval(timer));
  return () => clearInterval(timer);
}

describe('slow clients against the real service', () => {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-slow-'));
  let env: SandboxEnvironment;
  let service: ServiceProcess | null = null;
  let port = 0;
  const open: SlowConnection[] = [];
  const slow = () => {
    const c = openSlow(port);
    open.push(c);
    return c;
  };
  /** A fast request on its own connection: the service still answers others. */
  const healthz = () => sendRaw(port, { method: 'GET', path: '/healthz', headers: [] }, 5_000);

  beforeAll(async () => {
    env = await startSandboxEnvironment(root);
    service = await startServiceProcess({
      ...env.env,
      CCWEB_HTTP_HEADERS_TIMEOUT_SECONDS: String(HEADERS_S),
      CCWEB_HTTP_BODY_TIMEOUT_SECONDS: String(BODY_S),
      CCWEB_HTTP_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
    });
    port = Number(new URL(service.url).port);
  }, 90_000);

  afterAll(async () => {
    for (const c of open) c.destroy();
    await service?.kill9().catch(() => undefined);
    await env?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('cuts slow headers with 408 within the header timeout and answers others meanwhile', { timeout: 20_000 }, async () => {
    const c = slow();
    await c.connected;
    c.write(`POST ${WEBHOOK_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
    trickle(c, 'X-Slow: a\r\n', 200);
    // While it trickles, others are served at once.
    await sleep(500);
    const meanwhile = await healthz();
    const cut = await c.closed;
    console.log(`slow headers: cut after ${cut.afterMs} ms with ${cut.status}; /healthz meanwhile ${meanwhile.status}`);
    expect(meanwhile.status).toBe(200);
    expect(cut.status).toBe(408);
    expect(cut.afterMs).toBeGreaterThanOrEqual(HEADERS_S * 1000 - 100);
    expect(cut.afterMs).toBeLessThan(HEADERS_S * 1000 + MARGIN_MS);
  });

  it('cuts a connection that sends nothing within the header timeout', { timeout: 20_000 }, async () => {
    const c = slow();
    await c.connected;
    const cut = await c.closed;
    console.log(`silent connection: cut after ${cut.afterMs} ms (${cut.status ?? 'no answer'})`);
    expect(cut.afterMs).toBeLessThan(HEADERS_S * 1000 + MARGIN_MS);
  });

  it('answers a trickled webhook body 408 within the body timeout, stores nothing, answers others meanwhile', { timeout: 20_000 }, async () => {
    const c = slow();
    await c.connected;
    c.write(`POST ${WEBHOOK_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Gitea-Event: issue_comment\r\nX-Gitea-Delivery: slow-body-1\r\nContent-Length: 100000\r\n\r\n`);
    const headAt = Date.now();
    trickle(c, '{"aaaaaaaa', 200);
    await sleep(1_000);
    const meanwhile = await healthz();
    const cut = await c.closed;
    const afterHead = Date.now() - headAt;
    console.log(`slow body: 408 after ${afterHead} ms of body; /healthz meanwhile ${meanwhile.status}; answer ${JSON.stringify(cut.text.split('\r\n\r\n')[1] ?? '')}`);
    expect(meanwhile.status).toBe(200);
    expect(cut.status).toBe(408);
    // The route's own answer (JSON, closes the connection), not Node's bare one.
    expect(cut.text).toContain('"error":"request_timeout"');
    expect(cut.text.toLowerCase()).toContain('connection: close');
    expect(afterHead).toBeGreaterThanOrEqual(BODY_S * 1000 - 100);
    expect(afterHead).toBeLessThan(BODY_S * 1000 + MARGIN_MS);
  });

  it('refuses connections past the cap at once and keeps serving the established ones', { timeout: 20_000 }, async () => {
    // Fill the cap with connections in the middle of a request (head not finished).
    const held = Array.from({ length: MAX_CONNECTIONS }, () => slow());
    await Promise.all(held.map((c) => c.connected));
    for (const c of held) c.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    await sleep(100);
    const t0 = Date.now();
    const excess = await sendRaw(port, { method: 'GET', path: '/healthz', headers: [] }, 5_000);
    const refusedAfter = Date.now() - t0;
    // The established ones finish their requests and are answered.
    for (const c of held) c.write('Connection: close\r\n\r\n');
    const answers = await Promise.all(held.map((c) => c.closed));
    // Capacity is back once they are gone.
    await sleep(100);
    const after = await healthz();
    console.log(`cap ${MAX_CONNECTIONS}: excess connection refused after ${refusedAfter} ms (${excess.status ?? 'closed'} ${excess.error ?? ''}); held ones answered ${answers.map((a) => a.status).join(',')}; afterwards ${after.status}`);
    expect(excess.status).toBeNull();
    expect(excess.error).not.toBe('timeout');
    expect(refusedAfter).toBeLessThan(1_000);
    expect(answers.map((a) => a.status)).toEqual(held.map(() => 200));
    expect(after.status).toBe(200);
  });

  it('kept nothing of the cut requests', { timeout: 30_000 }, async () => {
    await service!.stop();
    service = null;
    const store = createStore({ dir: join(env.env['CCWEB_DATA_DIR']!, 'store'), indexes: STORE_INDEXES });
    await store.open();
    const deliveries = (await store.count('webhook_deliveries')) + (await store.archivedCount('webhook_deliveries'));
    const tasks = (await store.count('tasks')) + (await store.archivedCount('tasks'));
    await store.close();
    expect({ deliveries, tasks }).toEqual({ deliveries: 0, tasks: 0 });
  });
});
