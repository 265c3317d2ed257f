// The token-scope probe (src/gitea/token-scopes.ts) against a REAL Gitea 1.26: tokens made with known
// scope sets are reported exactly as Gitea stores them; every probe route sits behind exactly its
// category's scope check, which runs before the lookup; the probe changes nothing and talks only to
// the Gitea it was given.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyProbe, probeRequests, probeTokenScopes, agentTokenAdvice } from '../../src/gitea/token-scopes.js';
import { giteaApi, startSeededGitea, type SeededGitea, type SeededUser } from '../support/real-gitea/index.js';

let g: SeededGitea;
let n = 0;

beforeAll(async () => {
  g = await startSeededGitea();
}, 600_000);

afterAll(async () => {
  await g?.close();
});

/** A new token for `u` with exactly `scopes` (basic auth, as Gitea requires for token creation). */
async function token(u: SeededUser, scopes: string[]): Promise<string> {
  const r = await giteaApi<{ sha1: string; scopes: string[] }>(g.url, { basic: { login: u.login, password: u.password } }, 'POST', `/users/${u.login}/tokens`, { name: `scope-probe-${n++}`, scopes }, 201);
  return r.body.sha1;
}

/** Every fetch the probe makes, then the real one. */
function recordingFetch() {
  const calls: { url: string; method: string; auth: string | null }[] = [];
  const f: typeof fetch = async (input, init) => {
    calls.push({ url: String(input), method: init?.method ?? 'GET', auth: new Headers(init?.headers).get('authorization') });
    return fetch(input, init);
  };
  return { calls, fetch: f };
}

async function raw(t: string, method: string, path: string) {
  const res = await fetch(`${g.url}/api/v1${path}`, { method, headers: { Authorization: `token ${t}` } });
  return { status: res.status, body: await res.text() };
}

describe('probeTokenScopes against a real Gitea', () => {
  it.each([
    { scopes: ['read:repository', 'write:issue'], expected: ['read:repository', 'write:issue'] },
    { scopes: ['all'], expected: ['all'] },
    { scopes: ['read:user'], expected: ['read:user'] },
    { scopes: ['write:repository', 'write:admin'], expected: ['write:admin', 'write:repository'] },
    // write implies read: Gitea stores (and names) only the write
    { scopes: ['read:issue', 'write:issue', 'read:repository'], expected: ['read:repository', 'write:issue'] },
    { scopes: ['public-only', 'read:misc', 'read:activitypub', 'write:notification', 'read:package'], expected: ['public-only', 'read:activitypub', 'read:misc', 'read:package', 'write:notification'] },
  ])('a token made with $scopes: $expected', async ({ scopes, expected }) => {
    const t = await token(g.users.writer, scopes);
    const rec = recordingFetch();
    const r = await probeTokenScopes({ baseUrl: g.url, token: t, fetch: rec.fetch });
    expect(r).toMatchObject({ ok: true, scopes: expected, all: expected.includes('all') });
    if (!r.ok) return;
    expect(r.requests).toBe(rec.calls.length);
    expect(rec.calls.length).toBeGreaterThanOrEqual(1);
    expect(rec.calls.length).toBeLessThanOrEqual(14);
    expect(r.source).toBe(expected.includes('all') ? 'probes' : 'gitea');
    expect(r.detail).not.toContain(t);
  });

  it('a write-on-every-category token is `all` to Gitea too; a site admin\'s all token (the admin probe answered 404) the same', async () => {
    const every = ['activitypub', 'admin', 'issue', 'misc', 'notification', 'organization', 'package', 'repository', 'user'].map((c) => `write:${c}`);
    expect(await probeTokenScopes({ baseUrl: g.url, token: await token(g.users.writer, every) })).toMatchObject({ ok: true, scopes: ['all'], all: true });
    expect(await probeTokenScopes({ baseUrl: `${g.url}/api/v1/`, token: g.users.admin.token })).toMatchObject({ ok: true, scopes: ['all'], all: true, requests: 7 });
  });

  it("the seeded bot's token (the documented scopes), in one request, in Gitea's words", async () => {
    const r = await probeTokenScopes({ baseUrl: g.url, token: g.users.bot.token });
    expect(r).toMatchObject({ ok: true, scopes: [...g.botScopes].sort(), all: false, source: 'gitea', requests: 1 });
    if (r.ok) expect(r.detail).toMatch(/^Gitea says: token scope=/);
  });

  it("Gitea's exact refusal text names the required scope and the token's whole scope", async () => {
    const t = await token(g.users.writer, ['read:repository', 'write:issue']);
    const a = await raw(t, 'DELETE', '/admin/hooks/0');
    expect(a.status).toBe(403);
    expect(JSON.parse(a.body).message).toBe('token does not have at least one of required scope(s), required=[write:admin], token scope=write:issue,read:repository');
    const invalid = await raw('0'.repeat(40), 'DELETE', '/admin/hooks/0');
    expect({ status: invalid.status, message: JSON.parse(invalid.body).message }).toEqual({ status: 401, message: 'invalid username, password or token' });
  });

  it('every probe route is checked against exactly its category, before the lookup', async () => {
    const { write, read } = probeRequests('ccweb-scope-probe--0000test');
    const all = [...write, ...Object.values(read)];
    expect(all).toHaveLength(14);
    // A token with none of these categories: each route refuses for its own level:category.
    const none = await token(g.users.writer, ['read:misc']);
    for (const p of all) {
      const a = await raw(none, p.method, p.path);
      expect({ p, status: a.status, message: JSON.parse(a.body).message }).toEqual({
        p,
        status: 403,
        message: `token does not have at least one of required scope(s), required=[${p.level}:${p.category}], token scope=read:misc`,
      });
      expect(classifyProbe(p.category, p.level, a.status, a.body).verdict).toBe('missing');
    }
    // The write scope of each category: past the check, the lookup answers (404), or the site-admin check (403).
    for (const p of all) {
      const t = await token(g.users.writer, [`write:${p.category}`]);
      const a = await raw(t, p.method, p.path);
      expect(a.body).not.toMatch(/required scope/);
      expect(p.category === 'admin' ? [403] : p.path === '/user' ? [200] : [404]).toContain(a.status);
      expect({ p, verdict: classifyProbe(p.category, p.level, a.status, a.body).verdict }).toEqual({ p, verdict: 'held' });
    }
  });

  it('changes nothing on Gitea and talks only to it; every request targets something that does not exist', async () => {
    const owner = g.users.owner.token;
    const admin = g.users.admin.token;
    const snapshot = async () => ({
      repos: (await giteaApi(g.url, { token: admin }, 'GET', '/repos/search?limit=50')).headers.get('x-total-count'),
      comments: (await g.comments(g.issueNumber)).map((c) => [c.id, c.body, c.updated_at]),
      branches: (await giteaApi<{ name: string }[]>(g.url, { token: owner }, 'GET', `/repos/${g.owner}/${g.repo}/branches`)).body.map((b) => b.name).sort(),
      adminHooks: (await giteaApi<unknown[]>(g.url, { token: admin }, 'GET', '/admin/hooks')).body.length,
      keys: (await giteaApi<unknown[]>(g.url, { token: g.users.writer.token }, 'GET', '/user/keys')).body.length,
      orgs: (await giteaApi(g.url, { token: admin }, 'GET', '/orgs?limit=50')).headers.get('x-total-count'),
      users: (await giteaApi<unknown[]>(g.url, { token: admin }, 'GET', '/admin/users?limit=50')).body.length,
    });
    await g.comment(g.users.writer.login, g.issueNumber, 'a comment that must stay as it is');
    const before = await snapshot();
    expect(before.comments.length).toBeGreaterThan(0);
    const tokens = [admin, g.users.owner.token, g.users.bot.token, await token(g.users.writer, ['write:repository', 'write:admin', 'write:issue', 'write:organization', 'write:package', 'write:notification', 'write:user'])];
    const rec = recordingFetch();
    for (const t of tokens) expect(await probeTokenScopes({ baseUrl: g.url, token: t, fetch: rec.fetch })).toMatchObject({ ok: true });
    expect(await snapshot()).toEqual(before);
    expect(rec.calls.length).toBeGreaterThan(tokens.length);
    for (const c of rec.calls) {
      expect(c.url.startsWith(`${g.url}/api/v1/`)).toBe(true);
      expect(c.auth).toMatch(/^token [0-9a-f]{40}$/);
      expect(['GET', 'PATCH', 'DELETE']).toContain(c.method);
      // a non-existent owner (a name Gitea forbids), or id 0
      expect(c.url).toMatch(/\/ccweb-scope-probe--[0-9a-f]{8}(\/|$)|\/0$|\/api\/v1\/user$/);
    }
  });

  it('an invalid token: ok:false with a clear reason, without the token', async () => {
    const bad = 'deadbeef'.repeat(5);
    const r = await probeTokenScopes({ baseUrl: g.url, token: bad });
    expect(r).toEqual({ ok: false, invalidToken: true, reason: expect.stringMatching(/^Gitea does not accept the token \(HTTP 401: invalid username, password or token;/) });
    expect(JSON.stringify(r)).not.toContain(bad);
  });

  it('a Gitea that is not there: ok:false, without the token', async () => {
    const t = 'cafebabe'.repeat(5);
    const r = await probeTokenScopes({ baseUrl: `http://127.0.0.1:1/${t}`, token: t, timeoutMs: 2_000 });
    expect(r).toMatchObject({ ok: false, reason: expect.stringMatching(/^could not ask Gitea at http:\/\/127\.0\.0\.1:1\//) });
    expect(JSON.stringify(r)).not.toContain(t);
  });

  it('agentTokenAdvice on what the probe reports for real tokens', async () => {
    const advise = async (scopes: string[]) => {
      const r = await probeTokenScopes({ baseUrl: g.url, token: await token(g.users.writer, scopes) });
      if (!r.ok) throw new Error(r.reason);
      return agentTokenAdvice(r.scopes);
    };
    expect(await advise(['read:repository', 'write:issue'])).toMatchObject({ status: 'ok' });
    expect(await advise(['read:repository', 'write:issue', 'read:user'])).toMatchObject({ status: 'ok' });
    expect(await advise(['write:repository', 'write:issue'])).toMatchObject({ status: 'warn', detail: expect.stringContaining('write:repository') });
    expect(await advise(['all'])).toMatchObject({ status: 'warn', detail: expect.stringContaining('only wall') });
  });
});
