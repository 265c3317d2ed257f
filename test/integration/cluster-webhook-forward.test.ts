// A webhook goes to the node that owns its repository (docs/DESIGN-nodes-at-once.md step 5):
// src/cluster/forward-to-owner.ts through the webhook route's `route` option. Two nodes here are two
// of the service's apps (createApp + createWebhookRouter, the cluster's key) on 127.0.0.1, each with
// an intake of the test's own that checks the signature over the bytes it gets (the owner's job) and
// says which node answered; the scope is a table the test sets. The client sends from 127.0.0.2, so
// the owner's view of the client (signed by the forwarding node) differs from its TCP peer.
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from '../../src/http/create-app.js';
import { clientAddress, FORWARDED_HEADER, signForwarded, wasForwarded } from '../../src/http/forwarded-client.js';
import { createWebhookRouter, DEFAULT_WEBHOOK_PATH } from '../../src/intake/webhook-route.js';
import type { IntakeRequest } from '../../src/intake/accept-comment.js';
import type { IntakeResponse } from '../../src/intake/intake-response.js';
import { routeWebhookToOwner, webhookRepoKey } from '../../src/cluster/forward-to-owner.js';
import type { OwnerTarget } from '../../src/cluster/repository-scope.js';
import { verifyRequest } from '../../src/webhook/verify-signature.js';
import { FIXTURE_SECRET, formEncode, loadFixture, mutatedDelivery, signedHeaders, type Delivery } from '../support/webhook-fixtures.js';

const KEY = 'c'.repeat(64);
const CLIENT = '127.0.0.2';
const REPO = 'default:alice/widgets'; // the fixtures' repository

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r())));
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

interface Node {
  name: string;
  url: string;
  /** What this node's intake was handed. */
  handled: IntakeRequest[];
  /** Every request the app saw: whether it came forwarded, and whose it is. */
  seen: Array<{ forwarded: boolean; client: string | undefined; tcpPeer: string | undefined; forwardHeader: unknown }>;
  /** The repoKeys this node asked its scope about. */
  asked: string[];
  /** Who owns what, as this node's scope answers (missing: this node). */
  owners: Map<string, OwnerTarget>;
  /** The scope cannot answer (its store is down). */
  failing?: boolean;
}

async function startNode(name: string, options: { timeoutMs?: number; answer?: (req: IntakeRequest) => IntakeResponse } = {}): Promise<Node> {
  const node = { name, handled: [], seen: [], asked: [], owners: new Map() } as unknown as Node;
  const intake = {
    handle: async (req: IntakeRequest): Promise<IntakeResponse> => {
      node.handled.push(req);
      if (options.answer) return options.answer(req);
      const verified = verifyRequest(req.rawBody, req.headers, [FIXTURE_SECRET]);
      if (!verified.ok) return { status: 401, body: { error: 'unauthorized' } };
      return { status: 202, body: { deliveryId: req.headers['x-gitea-delivery'], taskId: `task-on-${name}`, state: 'queued', node: name } };
    },
  };
  const route = routeWebhookToOwner({
    nodeId: name,
    key: () => KEY,
    secrets: [FIXTURE_SECRET],
    scope: {
      routeOf: async (repoKey) => {
        node.asked.push(repoKey);
        if (node.failing) throw new Error('store unavailable');
        return node.owners.get(repoKey) ?? { self: true, nodeId: name, url: null };
      },
    },
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  });
  const app = createApp({
    routers: [createWebhookRouter({ intake, route })],
    middleware: [
      (ctx, next) => {
        node.seen.push({ forwarded: wasForwarded(ctx.req), client: clientAddress(ctx.req), tcpPeer: ctx.req.socket.remoteAddress, forwardHeader: ctx.req.headers[FORWARDED_HEADER] });
        return next();
      },
    ],
    forwardKey: () => KEY,
  });
  node.url = (await serve(app.callback())).url;
  return node;
}

const owns = (owner: Node): OwnerTarget => ({ self: false, nodeId: owner.name, url: owner.url });

function post(url: string, d: Delivery, extra: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const out = request(`${url}${DEFAULT_WEBHOOK_PATH}`, { method: 'POST', headers: { ...d.headers, ...extra }, localAddress: CLIENT }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    out.on('error', reject);
    out.end(d.body);
  });
}

/** The delivery's own headers (what Gitea sent), lower-cased, without the hop's own (length, encoding). */
function giteaHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (!['content-length', 'accept-encoding'].includes(k.toLowerCase())) out[k.toLowerCase()] = v;
  return out;
}

function picked(headers: IntakeRequest['headers'], names: string[]): Record<string, unknown> {
  return Object.fromEntries(names.map((n) => [n, headers[n]]));
}

/** A delivery under a fresh id whose payload names `fullName` (owner/name). */
function deliveryFor(fullName: string): Delivery {
  const [owner, name] = fullName.split('/') as [string, string];
  return mutatedDelivery('issue_comment_created_on_issue', (p) => {
    p.repository.owner.login = owner;
    p.repository.name = name;
    p.repository.full_name = fullName;
  });
}

describe('a webhook for a repository another node owns', () => {
  it('goes to the owner with the same bytes and headers, and the owner\'s answer is the answer', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set(REPO, owns(b));
    const d = loadFixture('issue_comment_created_on_issue');

    const res = await post(a.url, d);

    expect(res.status).toBe(202);
    expect(res.body).toEqual({ deliveryId: d.headers['X-Gitea-Delivery'], taskId: 'task-on-node-b', state: 'queued', node: 'node-b' });
    expect(a.asked).toEqual([REPO]);
    expect(a.handled).toHaveLength(0);
    expect(b.handled).toHaveLength(1);
    const got = b.handled[0]!;
    expect(got.rawBody.equals(d.body)).toBe(true);
    const sent = giteaHeaders(d.headers);
    expect(picked(got.headers, Object.keys(sent))).toEqual(sent);
    expect(got.contentType).toBe('application/json');
    // The owner knows it was forwarded, and whose it is: the client's, signed by node-a, not node-a's.
    expect(b.seen).toEqual([{ forwarded: true, client: CLIENT, tcpPeer: '127.0.0.1', forwardHeader: undefined }]);
    expect(got.remoteAddress).toBe(CLIENT);
    // …and does not route it again.
    expect(b.asked).toEqual([]);
  });

  it('a delivery whose signature does not verify is not routed: this node refuses it, and nobody is asked about its repository', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set(REPO, owns(b));
    const d = loadFixture('issue_comment_created_on_issue');
    const forged = { body: d.body, headers: { ...d.headers, 'X-Gitea-Signature': '0'.repeat(64), 'X-Hub-Signature-256': `sha256=${'0'.repeat(64)}` } };

    const res = await post(a.url, forged);

    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: 'unauthorized' });
    expect(a.asked).toEqual([]);
    expect(a.handled).toHaveLength(1);
    expect(b.handled).toHaveLength(0);
  });

  it('goes to the owner as a form too: the same `payload=` bytes, the signature still verifying there', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set(REPO, owns(b));
    const fixture = loadFixture('pull_request_comment_created');
    const body = formEncode(fixture.body);
    const d = { body, headers: { ...signedHeaders(fixture.headers, fixture.body), 'Content-Length': String(body.length), 'Content-Type': 'application/x-www-form-urlencoded' } };

    const res = await post(a.url, d);

    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ node: 'node-b' });
    expect(a.asked).toEqual([REPO]);
    expect(a.handled).toHaveLength(0);
    expect(b.handled[0]!.rawBody.equals(body)).toBe(true);
    expect(b.handled[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');
  });

  it('routes on the folded name: two spellings of one repository ask for one key', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set(REPO, owns(b));

    const res = await post(a.url, deliveryFor('Alice/WIDGETS'));

    expect(a.asked).toEqual([REPO]);
    expect(res.body).toMatchObject({ node: 'node-b' });
    expect(a.handled).toHaveLength(0);
  });
});

describe('handled where it arrives', () => {
  it('a payload for a repository this node owns', async () => {
    const a = await startNode('node-a');
    const res = await post(a.url, loadFixture('issue_comment_created_on_issue'));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ node: 'node-a' });
    expect(a.asked).toEqual([REPO]);
    expect(a.handled).toHaveLength(1);
  });

  it('a request another node forwarded, even when this node thinks that one owns it (never a loop)', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    // The two disagree: each thinks the other owns the repository.
    a.owners.set(REPO, owns(b));
    b.owners.set(REPO, owns(a));
    const res = await post(a.url, loadFixture('issue_comment_created_on_issue'));
    expect(res.body).toMatchObject({ node: 'node-b' });
    expect(a.handled).toHaveLength(0);
    expect(b.handled).toHaveLength(1);
    expect(b.asked).toEqual([]);
    expect(a.seen).toHaveLength(1);
  });

  it('a request that arrives signed as forwarded is not asked about; one signed with another key is', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set(REPO, owns(b));
    const d = loadFixture('issue_comment_created_on_issue');

    const signed = await post(a.url, d, { [FORWARDED_HEADER]: signForwarded(KEY, '198.51.100.9', 'POST', DEFAULT_WEBHOOK_PATH) });
    expect(signed.body).toMatchObject({ node: 'node-a' });
    expect(a.asked).toEqual([]);
    expect(a.handled[0]!.remoteAddress).toBe('198.51.100.9');

    const forged = await post(a.url, d, { [FORWARDED_HEADER]: signForwarded('x'.repeat(64), '198.51.100.9', 'POST', DEFAULT_WEBHOOK_PATH) });
    expect(forged.body).toMatchObject({ node: 'node-b' });
    expect(a.asked).toEqual([REPO]);
    expect(b.handled[0]!.remoteAddress).toBe(CLIENT);
  });

  it('a payload without a repository, one that is not JSON, and an event intake does not take: intake answers, nobody is asked', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set(REPO, owns(b));
    const fixture = loadFixture('issue_comment_created_on_issue');
    const noRepository = mutatedDelivery('issue_comment_created_on_issue', (p) => delete p.repository);
    const notJson = { body: Buffer.from('{"repository":'), headers: signedHeaders(fixture.headers, Buffer.from('{"repository":')) };
    const push = { body: fixture.body, headers: { ...fixture.headers, 'X-Gitea-Event': 'push', 'X-Gitea-Event-Type': 'push' } };
    const badForm = { body: Buffer.from('payload=%zz'), headers: { ...fixture.headers, 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': '11' } };
    for (const d of [noRepository, notJson, push, badForm]) await post(a.url, d);
    expect(a.asked).toEqual([]);
    expect(a.handled).toHaveLength(4);
    expect(b.handled).toHaveLength(0);
    expect(webhookRepoKey(fixture.body, Object.fromEntries(Object.entries(fixture.headers).map(([k, v]) => [k.toLowerCase(), v])), 'application/json')).toBe(REPO);
  });
});

// Gitea does not redeliver a failed delivery by itself: a 503 would lose the mention. So the node
// that received it handles it (the task is durable here; its repository's owner claims it).
describe('an owner that cannot be had: the delivery is handled here', () => {
  const handledHere = (a: Node, res: { status: number; body: any }) => {
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ node: 'node-a' });
    expect(a.handled).toHaveLength(1);
  };

  it('does not listen: at once, not after a timeout', async () => {
    const a = await startNode('node-a');
    const closed = await serve(() => undefined);
    await new Promise<void>((r) => closed.server.close(() => r()));
    a.owners.set(REPO, { self: false, nodeId: 'node-gone', url: closed.url });
    const started = Date.now();
    const res = await post(a.url, loadFixture('issue_comment_created_on_issue'));
    expect(Date.now() - started).toBeLessThan(2_000);
    handledHere(a, res);
  });

  it('registered no address', async () => {
    const a = await startNode('node-a');
    a.owners.set(REPO, { self: false, nodeId: 'node-quiet', url: null });
    handledHere(a, await post(a.url, loadFixture('issue_comment_created_on_issue')));
  });

  it('does not answer within the timeout (by default under Gitea\'s own 5 s)', async () => {
    const a = await startNode('node-a');
    const silent = await serve(() => undefined); // reads the request, never answers
    a.owners.set(REPO, { self: false, nodeId: 'node-stuck', url: silent.url });
    const started = Date.now();
    const res = await post(a.url, loadFixture('issue_comment_created_on_issue'));
    expect(Date.now() - started).toBeLessThan(4_500);
    handledHere(a, res);
  });

  it('is unknown (the scope cannot answer)', async () => {
    const a = await startNode('node-a');
    a.failing = true;
    handledHere(a, await post(a.url, loadFixture('issue_comment_created_on_issue')));
  });

  it('an owner that answers 503 itself (its store is away) is answered as it is', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b', { answer: () => ({ status: 503, body: { error: 'store_unavailable' } }) });
    a.owners.set(REPO, owns(b));
    const res = await post(a.url, loadFixture('issue_comment_created_on_issue'));
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: 'store_unavailable' });
    expect(a.handled).toHaveLength(0);
  });

  it('a request target in absolute form is handled here, never sent to the host it names', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    const elsewhere = await startNode('node-elsewhere');
    a.owners.set(REPO, owns(b));
    const d = loadFixture('issue_comment_created_on_issue');
    const res = await new Promise<number>((resolve, reject) => {
      const target = new URL(a.url);
      const out = request({ host: target.hostname, port: target.port, method: 'POST', path: `${elsewhere.url}${DEFAULT_WEBHOOK_PATH}`, headers: d.headers }, (r) => {
        r.resume();
        r.on('end', () => resolve(r.statusCode ?? 0));
      });
      out.on('error', reject);
      out.end(d.body);
    });
    // Handled here (a mention is never lost), never sent where the request line points.
    expect(res).toBe(202);
    expect(a.handled).toHaveLength(1);
    expect(elsewhere.seen).toHaveLength(0);
    expect(b.handled).toHaveLength(0);
  });
});
