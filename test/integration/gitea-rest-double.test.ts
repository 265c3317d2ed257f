// The Gitea stand-in itself (src/demo/gitea-double/rest-api.ts): its answers against Gitea's OpenAPI
// document and its fault switches. How it compares with a real Gitea: gitea-double-vs-real.test.ts.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGiteaRestDouble, startGiteaRestServer, type GiteaRestDouble, type StartedGiteaRestServer } from '../../src/demo/gitea-double/rest-api.js';
import { assertSwaggerShape, swaggerErrors } from '../support/gitea-double/rest-schema.js';

const TOKEN = 'bot-secret-token-123';
let double: GiteaRestDouble;
let srv: StartedGiteaRestServer;
let clock = new Date('2026-03-10T08:00:00Z');

async function api(method: string, path: string, opts: { body?: unknown; token?: string | null; auth?: string } = {}) {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (opts.auth) headers.Authorization = opts.auth;
  else if (opts.token !== null) headers.Authorization = `token ${opts.token ?? TOKEN}`;
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`${srv.url}/api/v1${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? (JSON.parse(text) as any) : undefined };
}

beforeAll(async () => {
  double = createGiteaRestDouble({ token: TOKEN, botLogin: 'giteabot', users: ['alice', { login: 'bob', token: 'bob-token' }], now: () => clock });
  srv = await startGiteaRestServer(double);
  double.addRepo('acme', 'widgets', { defaultBranch: 'trunk' });
  double.addIssue('acme', 'widgets', { number: 1, title: 'Bug', body: 'it breaks', user: 'alice' });
  double.addIssue('acme', 'widgets', { number: 2, title: 'Fix', body: 'a fix', user: 'bob', isPull: true, head: { ref: 'fix-branch' } });
  double.addIssue('acme', 'widgets', { number: 3, title: 'Locked', locked: true });
  double.setPermission('acme', 'widgets', 'alice', 'write');
});
afterAll(async () => {
  await srv.close();
});
afterEach(() => double.faults.reset());

describe('gitea REST double: shapes match the swagger definitions', () => {
  it('the validator itself rejects wrong shapes', () => {
    expect(swaggerErrors('Comment', { id: 'x' })).not.toEqual([]);
    expect(swaggerErrors('Comment', { id: 1, bogus: true })).not.toEqual([]);
    expect(swaggerErrors('User', { id: 1, login: 'a', username: 'a' })).toEqual([]);
  });

  it('GET /user is the token owner', async () => {
    const r = await api('GET', '/user');
    expect(r.status).toBe(200);
    assertSwaggerShape('User', r.json);
    expect(r.json.login).toBe('giteabot');
    expect(r.json.username).toBe('giteabot');
    expect((await api('GET', '/user', { auth: `Bearer ${TOKEN}` })).json.login).toBe('giteabot');
    expect((await api('GET', '/user', { token: 'bob-token' })).json.login).toBe('bob');
  });

  it('401 without or with a wrong token', async () => {
    expect((await api('GET', '/user', { token: null })).status).toBe(401);
    const r = await api('GET', '/user', { token: 'nope' });
    expect(r.status).toBe(401);
    assertSwaggerShape('APIError', r.json);
  });

  it('repository with clone_url and default_branch', async () => {
    const r = await api('GET', '/repos/acme/widgets');
    expect(r.status).toBe(200);
    assertSwaggerShape('Repository', r.json);
    expect(r.json.default_branch).toBe('trunk');
    expect(r.json.clone_url).toBe(`${srv.url}/acme/widgets.git`);
    expect(r.json.full_name).toBe('acme/widgets');
    expect((await api('GET', '/repos/acme/nope')).status).toBe(404);
  });

  it('issue and pull request', async () => {
    const issue = await api('GET', '/repos/acme/widgets/issues/1');
    assertSwaggerShape('Issue', issue.json);
    expect(issue.json).toMatchObject({ number: 1, title: 'Bug', is_locked: false, pull_request: null, html_url: `${srv.url}/acme/widgets/issues/1` });
    const prIssue = await api('GET', '/repos/acme/widgets/issues/2');
    assertSwaggerShape('Issue', prIssue.json);
    expect(prIssue.json.pull_request).toMatchObject({ merged: false, html_url: `${srv.url}/acme/widgets/pulls/2` });
    const pr = await api('GET', '/repos/acme/widgets/pulls/2');
    expect(pr.status).toBe(200);
    assertSwaggerShape('PullRequest', pr.json);
    expect(pr.json.head).toMatchObject({ ref: 'fix-branch', repo_id: pr.json.base.repo_id });
    expect(pr.json.head.sha).toMatch(/^[0-9a-f]{40}$/);
    expect(pr.json.base.ref).toBe('trunk');
    expect((await api('GET', '/repos/acme/widgets/pulls/1')).status).toBe(404);
  });

  it('collaborator permission, and 403 for a non-admin asking about someone else', async () => {
    const r = await api('GET', '/repos/acme/widgets/collaborators/alice/permission');
    expect(r.status).toBe(200);
    assertSwaggerShape('RepoCollaboratorPermission', r.json);
    expect(r.json).toMatchObject({ permission: 'write', user: { login: 'alice' } });
    expect((await api('GET', '/repos/acme/widgets/collaborators/acme/permission')).json.permission).toBe('owner');
    expect((await api('GET', '/repos/acme/widgets/collaborators/bob/permission')).json.permission).toBe('read');
    expect((await api('GET', '/repos/acme/widgets/collaborators/alice/permission', { token: 'bob-token' })).status).toBe(403);
    expect((await api('GET', '/repos/acme/widgets/collaborators/bob/permission', { token: 'bob-token' })).status).toBe(200);
    expect((await api('GET', '/repos/acme/widgets/collaborators/ghost/permission')).status).toBe(404);
  });

  it('comments: create (201), list, get, edit, delete, with FACTS.md URLs', async () => {
    clock = new Date('2026-03-10T09:00:00Z');
    const created = await api('POST', '/repos/acme/widgets/issues/1/comments', { body: { body: 'hello <b>' } });
    expect(created.status).toBe(201);
    assertSwaggerShape('Comment', created.json);
    const id = created.json.id as number;
    expect(created.json).toMatchObject({
      body: 'hello <b>',
      user: { login: 'giteabot' },
      html_url: `${srv.url}/acme/widgets/issues/1#issuecomment-${id}`,
      issue_url: `${srv.url}/acme/widgets/issues/1`,
      pull_request_url: '',
      created_at: '2026-03-10T09:00:00Z',
      updated_at: '2026-03-10T09:00:00Z',
    });

    const onPr = await api('POST', '/repos/acme/widgets/issues/2/comments', { body: { body: 'on the PR' } });
    expect(onPr.status).toBe(201);
    expect(onPr.json).toMatchObject({ issue_url: '', pull_request_url: `${srv.url}/acme/widgets/pulls/2` });
    expect(onPr.json.html_url).toBe(`${srv.url}/acme/widgets/pulls/2#issuecomment-${onPr.json.id}`);

    const list = await api('GET', '/repos/acme/widgets/issues/1/comments');
    expect(list.status).toBe(200);
    for (const c of list.json) assertSwaggerShape('Comment', c);
    expect(list.json.map((c: any) => c.id)).toContain(id);

    const one = await api('GET', `/repos/acme/widgets/issues/comments/${id}`);
    assertSwaggerShape('Comment', one.json);
    expect(one.json).toEqual(created.json);

    clock = new Date('2026-03-10T09:05:00Z');
    const edited = await api('PATCH', `/repos/acme/widgets/issues/comments/${id}`, { body: { body: 'edited' } });
    expect(edited.status).toBe(200);
    assertSwaggerShape('Comment', edited.json);
    expect(edited.json).toMatchObject({ body: 'edited', created_at: '2026-03-10T09:00:00Z', updated_at: '2026-03-10T09:05:00Z' });
    expect((await api('PATCH', `/repos/acme/widgets/issues/comments/${id}`, { body: { body: 'x' }, token: 'bob-token' })).status).toBe(403);

    expect((await api('DELETE', `/repos/acme/widgets/issues/comments/${id}`)).status).toBe(204);
    expect((await api('GET', `/repos/acme/widgets/issues/comments/${id}`)).status).toBe(404);
    // Real Gitea 1.26.3 answers 500 (empty message), not 404, for comments of a missing issue
    // (test/integration/gitea-double-vs-real.test.ts compares the two).
    expect((await api('POST', '/repos/acme/widgets/issues/99/comments', { body: { body: 'x' } })).status).toBe(500);
  });

  it('since/before filter on updated_at, inclusive, 1 s resolution; sorted by created then id', async () => {
    double.addIssue('acme', 'widgets', { number: 10, title: 'times' });
    const a = double.addComment('acme', 'widgets', 10, { user: 'alice', body: 'a', createdAt: new Date('2026-03-10T10:00:00.700Z') });
    const b = double.addComment('acme', 'widgets', 10, { user: 'bob', body: 'b', createdAt: new Date('2026-03-10T10:00:00.100Z') });
    const c = double.addComment('acme', 'widgets', 10, { user: 'alice', body: 'c', createdAt: new Date('2026-03-10T10:00:05Z') });
    // same second → id order, whatever the milliseconds
    const all = await api('GET', '/repos/acme/widgets/issues/10/comments');
    expect(all.json.map((x: any) => x.body)).toEqual(['a', 'b', 'c']);
    expect(double.comments('acme', 'widgets', 10).map((x) => x.id)).toEqual([a.id, b.id, c.id]);

    const since = await api('GET', `/repos/acme/widgets/issues/10/comments?since=${encodeURIComponent('2026-03-10T10:00:05Z')}`);
    expect(since.json.map((x: any) => x.body)).toEqual(['c']);
    const sinceMs = await api('GET', `/repos/acme/widgets/issues/10/comments?since=${encodeURIComponent('2026-03-10T10:00:00.900Z')}`);
    expect(sinceMs.json.map((x: any) => x.body)).toEqual(['a', 'b', 'c']);
    const before = await api('GET', `/repos/acme/widgets/issues/10/comments?before=${encodeURIComponent('2026-03-10T10:00:00Z')}`);
    expect(before.json.map((x: any) => x.body)).toEqual(['a', 'b']);
    const offset = await api('GET', `/repos/acme/widgets/issues/10/comments?since=${encodeURIComponent('2026-03-10T18:00:01+08:00')}`);
    expect(offset.json.map((x: any) => x.body)).toEqual(['c']);
  });

  it('repo-wide comments are paged with X-Total-Count (limit capped at 50)', async () => {
    double.addRepo('acme', 'paged');
    double.addIssue('acme', 'paged', { number: 1 });
    for (let i = 0; i < 55; i++) double.addComment('acme', 'paged', 1, { user: 'alice', body: `c${i}` });
    const p1 = await api('GET', '/repos/acme/paged/issues/comments?limit=100');
    expect(p1.json).toHaveLength(50);
    expect(p1.headers.get('x-total-count')).toBe('55');
    for (const c of p1.json) assertSwaggerShape('Comment', c);
    const p2 = await api('GET', '/repos/acme/paged/issues/comments?page=2&limit=50');
    expect(p2.json.map((c: any) => c.body)).toEqual(['c50', 'c51', 'c52', 'c53', 'c54']);
    const def = await api('GET', '/repos/acme/paged/issues/comments');
    expect(def.json).toHaveLength(30);
    expect(p2.headers.get('link')).toBeNull();
  });

  it('locked issue → 403, archived repo → 423', async () => {
    const r = await api('POST', '/repos/acme/widgets/issues/3/comments', { body: { body: 'x' } });
    expect(r.status).toBe(403);
    assertSwaggerShape('APIError', r.json);
    double.addRepo('acme', 'old', { archived: true });
    double.addIssue('acme', 'old', { number: 1 });
    expect((await api('POST', '/repos/acme/old/issues/1/comments', { body: { body: 'x' } })).status).toBe(423);
    expect(double.comments('acme', 'widgets', 3)).toEqual([]);
  });
});

describe('gitea REST double: fault switches', () => {
  it('failNext answers 500 for N matching requests, then recovers', async () => {
    double.faults.failNext('/issues/1/comments', 500, 2, { method: 'GET' });
    expect((await api('GET', '/repos/acme/widgets/issues/1/comments')).status).toBe(500);
    expect((await api('POST', '/repos/acme/widgets/issues/1/comments', { body: { body: 'not affected' } })).status).toBe(201);
    expect((await api('GET', '/repos/acme/widgets/issues/1/comments')).status).toBe(500);
    expect((await api('GET', '/repos/acme/widgets/issues/1/comments')).status).toBe(200);
  });

  it('failNext with afterEffect performs the write then answers 500', async () => {
    const before = double.comments('acme', 'widgets', 1).length;
    double.faults.failNext(/\/issues\/1\/comments$/, 500, 1, { method: 'POST', afterEffect: true });
    expect((await api('POST', '/repos/acme/widgets/issues/1/comments', { body: { body: 'ghost-write' } })).status).toBe(500);
    expect(double.comments('acme', 'widgets', 1).length).toBe(before + 1);
  });

  it('delay holds matching requests', async () => {
    double.faults.delay('/user', 150);
    const t0 = Date.now();
    await api('GET', '/user');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    double.faults.delay('/user', 0);
    const t1 = Date.now();
    await api('GET', '/user');
    expect(Date.now() - t1).toBeLessThan(140);
  });

  it('loseCreatedComments: 201 with a valid comment that never appears', async () => {
    double.faults.loseCreatedComments(true);
    const r = await api('POST', '/repos/acme/widgets/issues/1/comments', { body: { body: 'lost-one' } });
    expect(r.status).toBe(201);
    assertSwaggerShape('Comment', r.json);
    expect(double.comments('acme', 'widgets', 1).some((c) => c.body === 'lost-one')).toBe(false);
    expect((await api('GET', `/repos/acme/widgets/issues/comments/${r.json.id}`)).status).toBe(404);
  });

  it('dropConnection kills the socket without an answer', async () => {
    double.faults.dropConnection('/user', 1);
    await expect(api('GET', '/user')).rejects.toThrow();
    expect((await api('GET', '/user')).status).toBe(200);
  });

  it('handler returns false outside /api/v1/', async () => {
    const res = await fetch(`${srv.url}/acme/widgets.git/info/refs`);
    expect(res.status).toBe(404);
    expect(await res.text()).toBe('not found');
  });
});
