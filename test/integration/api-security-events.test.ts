// Failed authentications and security-level audit events are visible to
// operators. Real HTTP on 127.0.0.1: the operators' API and the real webhook intake on one app
// sharing one security-event sink (as src/service/create-service.ts wires them), a real store.
// Wrong admin tokens and badly signed webhooks are sent for real, each group from its own loopback
// address (127.0.0.2…), so every group is its own source; the reads come from 127.0.0.1.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API_PREFIX } from '../../src/api/control-router.js';
import { MENTION_REJECTED } from '../../src/intake/rejected-mentions.js';
import { SECURITY_EVENTS, type SecurityEventRecord } from '../../src/intake/security-events.js';
import { appendGateCall } from '../../src/mcp-gate/gate-files.js';
import { ingestGateCalls } from '../../src/sessions/gate-calls.js';
import { ADMIN_TOKEN, createQueuedTask, midWindowClock, startApiHarness, type ApiHarness } from '../support/api-harness.js';
import { FIXTURE_SECRET, loadFixture, signedHeaders } from '../support/webhook-fixtures.js';

const WRONG_SECRET = 'wrong-webhook-secret-5ec7e7';
const BODY_MARKER = 'BODY-MARKER-never-in-an-answer';
const GUESSES = Array.from({ length: 7 }, (_, i) => `guessed-admin-token-${i}-9f8e7d6c5b4a`);

let h: ApiHarness;

function send(
  method: string,
  path: string,
  options: { from: string; headers?: Record<string, string>; body?: Buffer },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(`${h.url}${path}`);
    const headers = { ...options.headers, ...(options.body ? { 'content-length': String(options.body.length) } : {}) };
    const req = httpRequest({ host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, method, localAddress: options.from, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * The fixture comment with the marker in its body, signed with `secret` (or not at all); `by`: a
 * comment of that user with its own id (the API harness's Gitea learns it: a real, confirmed comment).
 */
function webhook(secret: string | null, deliveryId: string, by?: { login: string; commentId: number }): { body: Buffer; headers: Record<string, string> } {
  const fixture = loadFixture('issue_comment_created_on_issue');
  const payload = JSON.parse(fixture.body.toString('utf8'));
  payload.comment.body = `@ccweb-bot ${BODY_MARKER}`;
  if (by) {
    payload.sender.login = by.login;
    payload.comment.user.login = by.login;
    payload.comment.id = by.commentId;
    // Only Gitea's answer decides who may write.
    delete payload.repository.permissions;
  }
  const body = Buffer.from(JSON.stringify(payload, null, 2));
  const headers = signedHeaders(fixture.headers, body, secret ?? 'unused', { 'X-Gitea-Delivery': deliveryId });
  if (secret === null) for (const k of ['X-Gitea-Signature', 'X-Gogs-Signature', 'X-Hub-Signature-256']) delete headers[k];
  delete headers['Content-Length'];
  return { body, headers };
}

/** A reader on the repository: signs nothing wrong, may just not ask the bot. */
const READER = 'rita';
const READER_COMMENTS = [880_001, 880_002];

beforeAll(async () => {
  h = await startApiHarness(undefined, { webhook: true, now: midWindowClock(), permission: (login) => (login === READER ? 'read' : 'write') });
  // 7 wrong tokens (4 paths) and 3 requests without any from 127.0.0.2; 3 more wrong ones from 127.0.0.3.
  for (const [i, guess] of GUESSES.entries()) {
    const path = ['/overview', '/tasks', '/audit', '/security-events'][i % 4]!;
    expect((await send('GET', `${API_PREFIX}${path}`, { from: '127.0.0.2', headers: { authorization: `Bearer ${guess}`, 'user-agent': 'token-guesser/1.0' } })).status).toBe(401);
  }
  for (let i = 0; i < 3; i++) expect((await send('POST', `${API_PREFIX}/control/pause`, { from: '127.0.0.2' })).status).toBe(401);
  // An overlong user agent with control characters (the sample must come out bounded and printable).
  for (let i = 0; i < 3; i++) {
    // (node refuses control characters in a header; a latin-1 byte goes through)
    const ua = `\u00e9vil\u00ff[31m${'x'.repeat(5000)}`;
    expect((await send('GET', `${API_PREFIX}/overview`, { from: '127.0.0.3', headers: { authorization: `Bearer ${GUESSES[0]}`, 'user-agent': ua } })).status).toBe(401);
  }
  // Badly signed webhooks from 127.0.0.4: four under a wrong secret, two unsigned.
  for (let i = 0; i < 6; i++) {
    const w = webhook(i < 4 ? WRONG_SECRET : null, `5d3f0c2a-0000-4000-8000-00000000000${i}`);
    expect((await send('POST', '/api/gitea/webhook', { from: '127.0.0.4', headers: w.headers, body: w.body })).status).toBe(401);
  }
  // Two correctly signed mentions by a reader, from 127.0.0.6: refused, but not failed authentications.
  for (const [i, commentId] of READER_COMMENTS.entries()) {
    const w = webhook(FIXTURE_SECRET, `6a1b2c3d-0000-4000-8000-00000000000${i}`, { login: READER, commentId });
    const res = await send('POST', '/api/gitea/webhook', { from: '127.0.0.6', headers: w.headers, body: w.body });
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toMatchObject({ status: 'rejected', reason: 'actor_not_authorized' });
  }
});

afterAll(async () => {
  await h?.close();
});

describe('GET /api/gitea-workflow/security-events', () => {
  it('lists each source and kind with the right count, newest window first, the open window included', async () => {
    const res = await h.call('GET', `${API_PREFIX}/security-events?category=authentication`);
    expect(res.status).toBe(200);
    const rows = res.body.items.map((e: any) => [e.kind, e.source, e.count]);
    expect(rows).toEqual([
      ['admin_unauthorized', '127.0.0.2', 10],
      ['invalid_signature', '127.0.0.4', 6],
      ['admin_unauthorized', '127.0.0.3', 3],
    ]);
    expect(res.body).toMatchObject({ total: 3, page: 1, pageSize: 50, requests: 19, byKind: { admin_unauthorized: 13, invalid_signature: 6 }, byCategory: { authentication: 19, mention: 0 } });
    // The window the answer states is the window each row covers (the view's heading reads it).
    expect(res.body.windowMs.authentication).toBe(10 * 60_000);
    for (const e of res.body.items) {
      expect(e.open).toBe(true);
      expect(e.category).toBe('authentication');
      expect(Date.parse(e.windowEnd) - Date.parse(e.windowStart)).toBe(res.body.windowMs.authentication);
      expect(Date.parse(e.firstAt)).toBeLessThanOrEqual(Date.parse(e.lastAt));
    }
    // The store holds the first request's count until the window closes; the answer has them all.
    expect((await h.store.list<SecurityEventRecord>(SECURITY_EVENTS)).filter((r) => r.kind !== MENTION_REJECTED).map((r) => r.count)).toEqual([1, 1, 1]);
  });

  it("a reader's mention is not a failed authentication: its own category, counted per author and UTC day, the window stated", async () => {
    const all = await h.call('GET', `${API_PREFIX}/security-events`);
    expect(all.body.byCategory).toEqual({ authentication: 19, mention: 2 });
    const res = await h.call('GET', `${API_PREFIX}/security-events?category=mention`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total: 1, requests: 2, byKind: { mention_rejected: 2 }, byCategory: { authentication: 0, mention: 2 } });
    expect(res.body.windowMs.mention).toBe(24 * 60 * 60_000);
    const [row] = res.body.items;
    expect(row).toMatchObject({ kind: 'mention_rejected', category: 'mention', source: `gitea:user:${READER}`, count: 2, open: true });
    expect(Date.parse(row.windowEnd) - Date.parse(row.windowStart)).toBe(res.body.windowMs.mention);
    expect(row.windowStart).toBe(`${row.firstAt.slice(0, 10)}T00:00:00.000Z`);
    expect(row.mention).toMatchObject({
      login: READER,
      tasks: 2,
      reasons: { actor_not_authorized: 2 },
      first: { repoKey: 'default:alice/widgets', commentId: READER_COMMENTS[0], reason: 'actor_not_authorized' },
      last: { repoKey: 'default:alice/widgets', commentId: READER_COMMENTS[1], reason: 'actor_not_authorized' },
    });
    expect(res.text).not.toContain(BODY_MARKER);
    // No reader's mention among the failed authentications, by category or by source.
    const auth = await h.call('GET', `${API_PREFIX}/security-events?category=authentication&source=${encodeURIComponent(`gitea:user:${READER}`)}`);
    expect(auth.body).toMatchObject({ items: [], total: 0, requests: 0 });
    expect((await h.call('GET', `${API_PREFIX}/security-events?category=reader`)).body.issues.map((i: any) => i.path)).toEqual(['category']);
  });

  it('shows the first request as stored: headers only, bounded and printable; never a token, secret, signature or body', async () => {
    const res = await h.call('GET', `${API_PREFIX}/security-events?category=authentication`);
    const bySource = Object.fromEntries(res.body.items.map((e: any) => [e.source, e.sample]));
    expect(bySource['127.0.0.2']).toEqual({ method: 'GET', path: `${API_PREFIX}/overview`, userAgent: 'token-guesser/1.0' });
    expect(bySource['127.0.0.4']).toMatchObject({ deliveryId: '5d3f0c2a-0000-4000-8000-000000000000', event: 'issue_comment' });
    expect(bySource['127.0.0.4'].bodyBytes).toBeGreaterThan(100);
    expect(Object.keys(bySource['127.0.0.4']).sort()).toEqual(['bodyBytes', 'deliveryId', 'event', 'userAgent']);
    const ua: string = bySource['127.0.0.3'].userAgent;
    expect(ua.length).toBeLessThanOrEqual(128);
    expect(ua).toMatch(/^[\x20-\x7e]+$/);
    expect(ua.startsWith('?vil?[31mxxx')).toBe(true);
    const w = webhook(WRONG_SECRET, 'x');
    for (const secret of [...GUESSES, ADMIN_TOKEN, FIXTURE_SECRET, WRONG_SECRET, BODY_MARKER, w.headers['X-Gitea-Signature']!, 'Bearer', 'authorization', 'x-gitea-signature', 'x-hub-signature']) {
      expect(res.text.toLowerCase()).not.toContain(secret.toLowerCase());
    }
    // Bounded: three sources, whatever 19 requests sent (5 KB user agents included).
    expect(res.text.length).toBeLessThan(3000);
  });

  it('pages, and filters by kind, source and time', async () => {
    const p1 = await h.call('GET', `${API_PREFIX}/security-events?category=authentication&pageSize=2`);
    const p2 = await h.call('GET', `${API_PREFIX}/security-events?category=authentication&pageSize=2&page=2`);
    expect(p1.body.items.map((e: any) => e.source)).toEqual(['127.0.0.2', '127.0.0.4']);
    expect(p2.body.items.map((e: any) => e.source)).toEqual(['127.0.0.3']);
    expect(p2.body).toMatchObject({ total: 3, page: 2, pageSize: 2 });

    const sig = await h.call('GET', `${API_PREFIX}/security-events?kind=invalid_signature`);
    expect(sig.body.items.map((e: any) => [e.kind, e.count])).toEqual([['invalid_signature', 6]]);
    expect(sig.body).toMatchObject({ total: 1, requests: 6, byKind: { invalid_signature: 6 } });
    const one = await h.call('GET', `${API_PREFIX}/security-events?source=127.0.0.3`);
    expect(one.body.items.map((e: any) => e.count)).toEqual([3]);

    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    const before = await h.call('GET', `${API_PREFIX}/security-events?category=authentication&to=${encodeURIComponent(hourAgo)}`);
    expect(before.body).toMatchObject({ items: [], total: 0, requests: 0 });
    const since = await h.call('GET', `${API_PREFIX}/security-events?category=authentication&from=${encodeURIComponent(hourAgo)}`);
    expect(since.body.total).toBe(3);
  });

  it('refuses a bad query naming the field, a page size over 100, and a caller without the token', async () => {
    const bad = await h.call('GET', `${API_PREFIX}/security-events?kind=Bad!`);
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: any) => i.path)).toEqual(['kind']);
    expect((await h.call('GET', `${API_PREFIX}/security-events?pageSize=101`)).status).toBe(400);
    expect((await h.call('GET', `${API_PREFIX}/security-events?limit=5`)).status).toBe(400);
    const anon = await send('GET', `${API_PREFIX}/security-events`, { from: '127.0.0.5' });
    expect(anon.status).toBe(401);
    expect(anon.text).not.toContain('127.0.0.2');
  });

  it('after the window is written the stored counts are the ones shown', async () => {
    await h.securityEvents!.flush();
    const stored = (await h.store.list<SecurityEventRecord>(SECURITY_EVENTS)).filter((r) => r.kind !== MENTION_REJECTED).map((r) => [r.source, r.count]).sort();
    expect(stored).toEqual([['127.0.0.2', 10], ['127.0.0.3', 3], ['127.0.0.4', 6], ['127.0.0.5', 1]]);
    const res = await h.call('GET', `${API_PREFIX}/security-events?category=authentication`);
    expect(res.body.items.map((e: any) => [e.source, e.count]).sort()).toEqual(stored);
  });
});

describe('GET /api/gitea-workflow/audit?level=security', () => {
  it('answers only security-level events (a refused agent tool call, a control action), newest first with order=desc', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 'task-security-1' });
    // What the gate writes for a refused call, ingested the way the session manager does after a turn
    // (the gate itself runs for real in test/integration/mcp-gate.test.ts).
    const gateDir = mkdtempSync(join(tmpdir(), 'ccweb-gate-'));
    appendGateCall(gateDir, { at: new Date().toISOString(), taskId: 'task-security-1', tool: 'delete_repo', method: null, place: { owner: 'acme', repo: 'widget' }, outcome: 'refused', reason: 'not allowed: delete_repo' });
    appendGateCall(gateDir, { at: new Date().toISOString(), taskId: 'task-security-1', tool: 'issue_read', method: 'get', place: { owner: 'acme', repo: 'widget', index: 1 }, outcome: 'forwarded' });
    expect(await ingestGateCalls(h.store, gateDir)).toBe(2);
    const pause = await h.call('POST', `${API_PREFIX}/control/pause`, { requestId: 'req-security-pause-1', operator: 'alice', reason: 'checking the security view' });
    expect(pause.status).toBe(200);

    const all = await h.call('GET', `${API_PREFIX}/audit`);
    expect(all.body.events.map((e: any) => e.action)).toContain('agent.gitea_call');
    const sec = await h.call('GET', `${API_PREFIX}/audit?level=security`);
    expect(sec.status).toBe(200);
    expect(sec.body.events.map((e: any) => e.action)).toEqual(['agent.gitea_refused', 'control.pause']);
    expect(sec.body.events.every((e: any) => e.level === 'security')).toBe(true);
    expect(sec.body.nextAfterSeq).toBe(sec.body.events[1].seq);

    const desc = await h.call('GET', `${API_PREFIX}/audit?level=security&order=desc&limit=1`);
    expect(desc.body.events.map((e: any) => e.action)).toEqual(['control.pause']);
    expect(desc.body).toMatchObject({ nextAfterSeq: null, nextBeforeSeq: desc.body.events[0].seq });
    const older = await h.call('GET', `${API_PREFIX}/audit?level=security&order=desc&limit=1&beforeSeq=${desc.body.nextBeforeSeq}`);
    expect(older.body.events.map((e: any) => [e.action, e.metadata.tool])).toEqual([['agent.gitea_refused', 'delete_repo']]);

    // info: events without a level count as info.
    const info = await h.call('GET', `${API_PREFIX}/audit?level=info&taskId=task-security-1`);
    expect(info.body.events.map((e: any) => e.action)).toContain('agent.gitea_call');
    expect(info.body.events.map((e: any) => e.action)).not.toContain('agent.gitea_refused');
    expect((await h.call('GET', `${API_PREFIX}/audit?level=secret`)).status).toBe(400);
  });
});

describe('GET /api/gitea-workflow/pending-intake', () => {
  it('lists the mentions waiting for Gitea with their attempts, next attempt and last error, never their text; admin token required', async () => {
    const { pendingRecord } = await import('../../src/intake/pending-intake.js');
    const { sha256Hex } = await import('../../src/intake/confirm-comment.js');
    const { normalizeComment } = await import('../../src/webhook/normalize-comment.js');
    const fixture = loadFixture('issue_comment_created_on_issue');
    const n = normalizeComment(fixture.headers, fixture.body);
    if (!n.ok) throw new Error(n.issues);
    const at = new Date('2026-08-01T10:00:00Z');
    const record = pendingRecord(
      { key: 'k-pending', deliveryKey: 'default:d-pending', deliveryId: 'd-pending', eventType: 'issue_comment', payloadHash: 'sha256:x', receivedAt: at, comment: n.value, bodySha256: sha256Hex(n.value.comment.body), command: 'task', source: '127.0.0.1', error: 'permission lookup: gitea_server_error 500' },
      at,
      { maxAttempts: 10, baseDelayMs: 5000, maxDelayMs: 600_000 },
    );
    await h.store.transact((tx) => tx.put('pending_intake', record.key, record));
    const res = await h.call('GET', `${API_PREFIX}/pending-intake`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total: 1, waiting: 1, gaveUp: 0 });
    expect(res.body.items).toEqual([
      expect.objectContaining({ deliveryId: 'd-pending', commentId: n.value.comment.id, author: n.value.actor.login, state: 'waiting', attempts: 1, nextAttemptAt: '2026-08-01T10:00:05.000Z', lastError: 'permission lookup: gitea_server_error 500' }),
    ]);
    expect(JSON.stringify(res.body)).not.toContain(n.value.comment.body);
    expect((await h.call('GET', `${API_PREFIX}/pending-intake`, undefined, null)).status).toBe(401);
    await h.store.transact((tx) => tx.delete('pending_intake', record.key));
  });
});
