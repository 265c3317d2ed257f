// The Gitea client against the Gitea stand-in, for what a real Gitea cannot be made to do on cue: 5xx,
// slow answers (timeouts), dropped connections, writes that answer an error after they happened. The
// client's happy paths run against a real Gitea in gitea-double-vs-real.test.ts and the real-Gitea e2e.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGiteaClient, GiteaError, isGiteaError, toGiteaTime, type GiteaClient } from '../../src/gitea/gitea-client.js';
import { createGiteaRestDouble, startGiteaRestServer, type GiteaRestDouble, type StartedGiteaRestServer } from '../../src/demo/gitea-double/rest-api.js';
import { assertSwaggerShape } from '../support/gitea-double/rest-schema.js';

const TOKEN = 'tok-SECRET-9f8e7d';
let double: GiteaRestDouble;
let srv: StartedGiteaRestServer;
let client: GiteaClient;
let clock = new Date('2026-04-01T12:00:00Z');

function mk(over: Partial<Parameters<typeof createGiteaClient>[0]> = {}): GiteaClient {
  return createGiteaClient({ baseUrl: srv.url, token: TOKEN, timeoutMs: 2_000, retries: 2, retryBaseDelayMs: 5, ...over });
}

async function caught(p: Promise<unknown>): Promise<GiteaError> {
  try {
    await p;
  } catch (e) {
    if (isGiteaError(e)) return e;
    throw e;
  }
  throw new Error('expected a GiteaError');
}

const gets = (path: string) => double.requests.filter((r) => r.method === 'GET' && r.path === path).length;
const posts = (path: string) => double.requests.filter((r) => r.method === 'POST' && r.path === path).length;

beforeAll(async () => {
  double = createGiteaRestDouble({ token: TOKEN, botLogin: 'giteabot', users: ['alice'], now: () => clock });
  srv = await startGiteaRestServer(double);
  double.addRepo('acme', 'app');
  double.addIssue('acme', 'app', { number: 7, title: 'Q', user: 'alice' });
  double.addIssue('acme', 'app', { number: 8, title: 'locked', locked: true });
  double.addIssue('acme', 'app', { number: 9, title: 'PR', isPull: true });
  double.setPermission('acme', 'app', 'alice', 'write');
  client = mk();
});
afterAll(() => srv.close());
afterEach(() => {
  double.faults.reset();
  double.requests.length = 0;
});

describe('gitea client against the REST double', () => {
  it('getCurrentUser learns the bot login', async () => {
    const u = await client.getCurrentUser();
    assertSwaggerShape('User', u);
    expect(u.login).toBe('giteabot');
    // baseUrl with /api/v1 already on it works too
    expect((await mk({ baseUrl: `${srv.url}/api/v1/` }).getCurrentUser()).login).toBe('giteabot');
  });

  it('create, list, get comments (issue and PR)', async () => {
    const c = await client.createIssueComment('acme', 'app', 7, 'answer\n<!-- ccweb taskId=t1 -->');
    assertSwaggerShape('Comment', c);
    expect(c.user.login).toBe('giteabot');
    expect(c.html_url).toBe(`${srv.url}/acme/app/issues/7#issuecomment-${c.id}`);
    const list = await client.listIssueComments('acme', 'app', 7);
    expect(list.map((x) => x.id)).toContain(c.id);
    for (const x of list) assertSwaggerShape('Comment', x);
    const got = await client.getComment('acme', 'app', c.id);
    expect(got.body).toBe('answer\n<!-- ccweb taskId=t1 -->');
    const onPr = await client.createIssueComment('acme', 'app', 9, 'pr reply');
    expect(onPr.pull_request_url).toBe(`${srv.url}/acme/app/pulls/9`);
  });

  it('getCollaboratorPermission', async () => {
    const p = await client.getCollaboratorPermission('acme', 'app', 'alice');
    assertSwaggerShape('RepoCollaboratorPermission', p);
    expect(p.permission).toBe('write');
    expect(p.user?.login).toBe('alice');
    expect((await client.getCollaboratorPermission('acme', 'app', 'acme')).permission).toBe('owner');
  });

  it('listIssueComments since: inclusive at 1 s resolution', async () => {
    double.addIssue('acme', 'app', { number: 20 });
    double.addComment('acme', 'app', 20, { user: 'alice', body: 'old', createdAt: new Date('2026-04-01T10:00:00Z') });
    double.addComment('acme', 'app', 20, { user: 'alice', body: 'edge', createdAt: new Date('2026-04-01T11:00:00.200Z') });
    double.addComment('acme', 'app', 20, { user: 'alice', body: 'new', createdAt: new Date('2026-04-01T11:30:00Z') });
    const since = new Date('2026-04-01T11:00:00.900Z'); // same second as "edge": included
    expect((await client.listIssueComments('acme', 'app', 20, { since })).map((c) => c.body)).toEqual(['edge', 'new']);
    expect((await client.listIssueComments('acme', 'app', 20, { since: '2026-04-01T11:00:01Z' })).map((c) => c.body)).toEqual(['new']);
    expect((await client.listIssueComments('acme', 'app', 20, { before: '2026-04-01T11:00:00Z' })).map((c) => c.body)).toEqual(['old', 'edge']);
    expect(toGiteaTime(since)).toBe('2026-04-01T11:00:00Z');
  });

  it('GET is retried on 500 and then succeeds', async () => {
    double.faults.failNext('/issues/7/comments', 500, 2, { method: 'GET' });
    const list = await client.listIssueComments('acme', 'app', 7);
    expect(Array.isArray(list)).toBe(true);
    expect(gets('/api/v1/repos/acme/app/issues/7/comments')).toBe(3);
  });

  it('GET gives up after the retries with gitea_server_error', async () => {
    double.faults.failNext('/user', 503, 10);
    const e = await caught(client.getCurrentUser());
    expect(e.code).toBe('gitea_server_error');
    expect(e.status).toBe(503);
    expect(e.attempts).toBe(3);
    expect(e.answered).toBe(true);
    expect(gets('/api/v1/user')).toBe(3);
  });

  it('GET is retried after a dropped connection (network error)', async () => {
    double.faults.dropConnection('/user', 1);
    expect((await client.getCurrentUser()).login).toBe('giteabot');
    double.faults.dropConnection('/user', 5);
    const e = await caught(mk({ retries: 1 }).getCurrentUser());
    expect(e.code).toBe('gitea_network');
    expect(e.answered).toBe(false);
  });

  it('GET is not retried on 4xx', async () => {
    const e = await caught(client.getComment('acme', 'app', 999_999));
    expect(e.code).toBe('gitea_not_found');
    expect(gets('/api/v1/repos/acme/app/issues/comments/999999')).toBe(1);
  });

  it('POST is never retried on 500 (nothing created)', async () => {
    const before = double.comments('acme', 'app', 7).length;
    double.faults.failNext('/issues/7/comments', 500, 1, { method: 'POST' });
    const e = await caught(client.createIssueComment('acme', 'app', 7, 'once'));
    expect(e.code).toBe('gitea_server_error');
    expect(e.attempts).toBe(1);
    expect(posts('/api/v1/repos/acme/app/issues/7/comments')).toBe(1);
    expect(double.comments('acme', 'app', 7).length).toBe(before);
  });

  it('POST is never retried on 500 even when Gitea did write (exactly one comment)', async () => {
    const before = double.comments('acme', 'app', 7).length;
    double.faults.failNext('/issues/7/comments', 500, 1, { method: 'POST', afterEffect: true });
    const e = await caught(client.createIssueComment('acme', 'app', 7, 'exactly-once'));
    expect(e.code).toBe('gitea_server_error');
    expect(posts('/api/v1/repos/acme/app/issues/7/comments')).toBe(1);
    expect(double.comments('acme', 'app', 7).filter((c) => c.body === 'exactly-once')).toHaveLength(1);
    expect(double.comments('acme', 'app', 7).length).toBe(before + 1);
  });

  it('POST is never retried on a dropped connection either', async () => {
    double.faults.dropConnection('/issues/7/comments', 1, { method: 'POST' });
    const e = await caught(client.createIssueComment('acme', 'app', 7, 'dropped'));
    expect(e.code).toBe('gitea_network');
    expect(double.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it('timeout → gitea_timeout', async () => {
    double.faults.delay('/user', 400);
    const t0 = Date.now();
    const e = await caught(mk({ timeoutMs: 100, retries: 0 }).getCurrentUser());
    expect(e.code).toBe('gitea_timeout');
    expect(e.answered).toBe(false);
    expect(Date.now() - t0).toBeLessThan(380);
    // a timed-out POST is not retried
    double.faults.delay('/issues/7/comments', 400, { method: 'POST' });
    const p = await caught(mk({ timeoutMs: 100, retries: 3 }).createIssueComment('acme', 'app', 7, 'slow'));
    expect(p.code).toBe('gitea_timeout');
    expect(p.attempts).toBe(1);
  });

  it('401 → gitea_unauthorized, without the token in the message', async () => {
    const wrong = 'wrong-TOKEN-abc123';
    const e = await caught(mk({ token: wrong }).getCurrentUser());
    expect(e.code).toBe('gitea_unauthorized');
    expect(e.status).toBe(401);
    expect(e.attempts).toBe(1);
    expect(e.message).not.toContain(wrong);
    expect(JSON.stringify(e)).not.toContain(wrong);
    expect(String(e.stack)).not.toContain(wrong);
  });

  it('locked issue → gitea_forbidden; archived repo → gitea_locked; missing repository → gitea_not_found; missing issue → gitea_server_error (real Gitea answers 500)', async () => {
    const e = await caught(client.createIssueComment('acme', 'app', 8, 'x'));
    expect(e.code).toBe('gitea_forbidden');
    expect(e.status).toBe(403);
    expect(double.comments('acme', 'app', 8)).toHaveLength(0);
    double.addRepo('acme', 'archived', { archived: true });
    double.addIssue('acme', 'archived', { number: 1 });
    expect((await caught(client.createIssueComment('acme', 'archived', 1, 'x'))).code).toBe('gitea_locked');
    expect((await caught(client.createIssueComment('acme', 'no-such-repo', 1, 'x'))).code).toBe('gitea_not_found');
    // Gitea 1.26.3 answers 500 (empty message), not 404, for a comment on an issue that does not exist
    // (test/integration/gitea-double-vs-real.test.ts, gitea-client-real.test.ts).
    expect((await caught(client.createIssueComment('acme', 'app', 404, 'x'))).code).toBe('gitea_server_error');
  });

  it('lose-comment switch: the client reports success, a read-back does not find it', async () => {
    double.faults.loseCreatedComments(true);
    const c = await client.createIssueComment('acme', 'app', 7, 'will be lost');
    expect(c.id).toBeGreaterThan(0);
    double.faults.loseCreatedComments(false);
    const list = await client.listIssueComments('acme', 'app', 7);
    expect(list.some((x) => x.id === c.id)).toBe(false);
    expect((await caught(client.getComment('acme', 'app', c.id))).code).toBe('gitea_not_found');
  });

  it('a response that does not match → gitea_bad_response', async () => {
    const fakeFetch: typeof fetch = async () =>
      new Response(JSON.stringify({ id: 'not-a-number', login: 5 }), { status: 200, headers: { 'Content-Type': 'application/json' } });
    const e = await caught(createGiteaClient({ baseUrl: 'http://127.0.0.1:1', token: TOKEN, fetch: fakeFetch }).getCurrentUser());
    expect(e.code).toBe('gitea_bad_response');
    const notJson: typeof fetch = async () => new Response('<html>proxy</html>', { status: 200, headers: { 'Content-Type': 'application/json' } });
    expect((await caught(createGiteaClient({ baseUrl: 'http://127.0.0.1:1', token: TOKEN, fetch: notJson, retries: 0 }).getCurrentUser())).code).toBe('gitea_bad_response');
  });

  it('sends Authorization: token <t>', async () => {
    let auth: string | null = null;
    const spy: typeof fetch = async (input) => {
      auth = (input as Request).headers.get('authorization');
      return new Response(JSON.stringify({ id: 1, login: 'x' }), { status: 200, headers: { 'Content-Type': 'application/json' } });
    };
    await createGiteaClient({ baseUrl: 'http://127.0.0.1:1', token: TOKEN, fetch: spy }).getCurrentUser();
    expect(auth).toBe(`token ${TOKEN}`);
  });

  it('connection refused → gitea_network (after read retries)', async () => {
    const e = await caught(createGiteaClient({ baseUrl: 'http://127.0.0.1:1', token: TOKEN, retries: 1, retryBaseDelayMs: 1 }).getCurrentUser());
    expect(e.code).toBe('gitea_network');
    expect(e.attempts).toBe(2);
    expect(e.message).not.toContain(TOKEN);
  });
});
