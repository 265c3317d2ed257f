// The pure parts of the token-scope probe (src/gitea/token-scopes.ts), and its I/O against a fake
// fetch: what each answer means, how the answers add up, when it stops, and that the token never
// leaves baseUrl nor appears in a result. Real Gitea answers: test/integration/gitea-token-scopes.test.ts.
import { describe, expect, it } from 'vitest';
import {
  agentTokenAdvice,
  botTokenAdvice,
  classifyProbe,
  probeRequests,
  probeTokenScopes,
  scopeLevel,
  summariseProbes,
  type ProbeObservation,
  type ProbeRequest,
} from '../../src/gitea/token-scopes.js';

const json = (message: string) => JSON.stringify({ message, url: 'http://gitea.test/api/swagger' });
const refusal = (required: string, scope?: string) =>
  json(`token does not have at least one of required scope(s), required=[${required}]${scope === undefined ? '' : `, token scope=${scope}`}`);
const notFound = JSON.stringify({ errors: ['user redirect does not exist [name: x]'], message: 'GetUserByName', url: 'http://gitea.test/api/swagger' });

describe('classifyProbe', () => {
  it("Gitea's refusal for this very scope: missing, with the token's scopes", () => {
    expect(classifyProbe('admin', 'write', 403, refusal('write:admin', 'write:issue,read:repository'))).toEqual({
      verdict: 'missing',
      tokenScopes: ['write:issue', 'read:repository'],
      message: 'token does not have at least one of required scope(s), required=[write:admin], token scope=write:issue,read:repository',
    });
  });

  it('an older Gitea\'s refusal without the token scope: missing, nothing more', () => {
    const old = 'token does not have at least one of required scope(s): [read:issue]';
    expect(classifyProbe('issue', 'read', 403, json(old))).toEqual({ verdict: 'missing', message: old });
    expect(classifyProbe('issue', 'read', 403, refusal('read:issue'))).not.toHaveProperty('tokenScopes');
    expect(classifyProbe('issue', 'read', 403, refusal('read:issue')).verdict).toBe('missing');
  });

  it('a refusal for another scope than asked about: unknown (but the token scope still read)', () => {
    expect(classifyProbe('issue', 'write', 403, refusal('write:repository', 'read:user'))).toMatchObject({ verdict: 'unknown', tokenScopes: ['read:user'] });
  });

  it('past the scope check: held', () => {
    expect(classifyProbe('repository', 'read', 404, notFound).verdict).toBe('held');
    expect(classifyProbe('admin', 'write', 403, json('user should be the site admin')).verdict).toBe('held');
    expect(classifyProbe('notification', 'write', 403, json('this endpoint is not available for public-only tokens')).verdict).toBe('held');
    expect(classifyProbe('user', 'read', 200, '{"login":"alice"}').verdict).toBe('held');
    expect(classifyProbe('issue', 'write', 422, json('[Body]: Required')).verdict).toBe('held');
  });

  it('the token rejected: invalid-token', () => {
    expect(classifyProbe('admin', 'write', 401, json('invalid username, password or token'))).toEqual({ verdict: 'invalid-token', message: 'invalid username, password or token' });
  });

  it('answers that say nothing: unknown', () => {
    expect(classifyProbe('activitypub', 'read', 404, '404 page not found\n').verdict).toBe('unknown'); // a route that is not there
    expect(classifyProbe('repository', 'read', 500, json('boom')).verdict).toBe('unknown');
    expect(classifyProbe('repository', 'read', 502, '<html>bad gateway</html>').verdict).toBe('unknown');
    expect(classifyProbe('repository', 'read', 302, '').verdict).toBe('unknown');
    expect(classifyProbe('repository', 'read', 403, json('checking scope failed: bad')).verdict).toBe('unknown');
  });
});

const obs = (request: ProbeRequest, status: number, body: string): ProbeObservation => ({ request, status, classification: classifyProbe(request.category, request.level, status, body) });
const { write, read } = probeRequests('ccweb-scope-probe--00000000');

describe('summariseProbes', () => {
  it("Gitea's words win, sorted", () => {
    expect(summariseProbes([obs(write[0]!, 403, refusal('write:admin', 'write:issue,read:repository'))])).toMatchObject({
      ok: true,
      scopes: ['read:repository', 'write:issue'],
      all: false,
      source: 'gitea',
      requests: 1,
    });
  });

  it('nothing refused: all', () => {
    expect(summariseProbes(write.map((w) => obs(w, w.category === 'admin' ? 403 : 404, w.category === 'admin' ? json('user should be the site admin') : notFound)))).toMatchObject({
      ok: true,
      scopes: ['all'],
      all: true,
      source: 'probes',
      requests: 7,
    });
  });

  it('without the token scope text: from the refusals, read probed where write was refused', () => {
    const answers: ProbeObservation[] = [];
    for (const w of write) {
      if (w.category === 'issue') {
        answers.push(obs(w, 404, notFound));
        continue;
      }
      answers.push(obs(w, 403, refusal(`write:${w.category}`)));
      const r = read[w.category]!;
      answers.push(w.category === 'repository' ? obs(r, 404, notFound) : w.category === 'admin' ? obs(r, 500, json('db')) : obs(r, 403, refusal(`read:${w.category}`)));
    }
    const r = summariseProbes(answers);
    expect(r).toMatchObject({ ok: true, scopes: ['read:repository', 'write:issue'], all: false, source: 'probes', requests: 13 });
    if (r.ok) expect(r.detail).toContain('unknown: admin');
  });

  it('401: ok:false; nothing but unknowns: ok:false', () => {
    expect(summariseProbes([obs(write[0]!, 401, json('invalid username, password or token'))])).toMatchObject({ ok: false, reason: expect.stringContaining('HTTP 401') });
    expect(summariseProbes([obs(write[0]!, 502, 'bad gateway'), obs(read.admin!, 502, 'bad gateway')])).toMatchObject({ ok: false, reason: expect.stringContaining('say nothing') });
  });
});

describe('probeRequests', () => {
  it('one write and one read per category Gitea checks; only GET, PATCH, DELETE; the owner in every owner-path', () => {
    expect(write.map((w) => w.category).sort()).toEqual(['admin', 'issue', 'notification', 'organization', 'package', 'repository', 'user']);
    expect(Object.keys(read).sort()).toEqual(write.map((w) => w.category).sort());
    for (const w of write) expect(['PATCH', 'DELETE']).toContain(w.method);
    for (const r of Object.values(read)) expect(r.method).toBe('GET');
  });
});

describe('probeTokenScopes (fake fetch)', () => {
  const TOKEN = 'f00dfeedf00dfeedf00dfeedf00dfeedf00dfeed';

  it('stops at the first refusal that names the scopes; sends the token only to baseUrl', async () => {
    const calls: { url: string; init: RequestInit | undefined }[] = [];
    const fake: typeof fetch = async (input, init) => {
      calls.push({ url: String(input), init });
      return String(input).endsWith('/admin/hooks/0')
        ? new Response(JSON.stringify({ message: 'user should be the site admin' }), { status: 403 })
        : new Response(refusal('write:package', 'read:repository,write:issue'), { status: 403 });
    };
    const r = await probeTokenScopes({ baseUrl: 'https://gitea.example/', token: TOKEN, fetch: fake });
    expect(r).toMatchObject({ ok: true, scopes: ['read:repository', 'write:issue'], requests: 2 });
    expect(calls.map((c) => [c.init?.method, c.url.replace(/--[0-9a-f]{8}/, '--X')])).toEqual([
      ['DELETE', 'https://gitea.example/api/v1/admin/hooks/0'],
      ['DELETE', 'https://gitea.example/api/v1/packages/ccweb-scope-probe--X/generic/ccweb-scope-probe/0.0.0-probe'],
    ]);
    for (const c of calls) {
      expect(new Headers(c.init?.headers).get('authorization')).toBe(`token ${TOKEN}`);
      expect(c.init?.redirect).toBe('manual');
      expect(c.init?.body).toBeUndefined();
    }
  });

  it('redacts the token from errors and from Gitea\'s text', async () => {
    const throwing: typeof fetch = async () => {
      throw new TypeError(`fetch failed for token ${TOKEN}`);
    };
    const r = await probeTokenScopes({ baseUrl: 'https://gitea.example', token: TOKEN, fetch: throwing });
    expect(r).toEqual({ ok: false, reason: 'could not ask Gitea at https://gitea.example/api/v1: fetch failed for token [REDACTED]' });
    const echoing: typeof fetch = async () => new Response(json(`invalid token ${TOKEN}`), { status: 401 });
    const e = await probeTokenScopes({ baseUrl: 'https://gitea.example', token: TOKEN, fetch: echoing });
    expect(e.ok).toBe(false);
    expect(JSON.stringify(e)).not.toContain(TOKEN);
    expect(JSON.stringify(e)).toContain('[REDACTED]');
  });

  it('a timeout, an empty token, a bad URL: ok:false', async () => {
    const hanging: typeof fetch = (_i, init) =>
      new Promise((_res, rej) => init?.signal?.addEventListener('abort', () => rej(init.signal!.reason)));
    expect(await probeTokenScopes({ baseUrl: 'https://gitea.example', token: TOKEN, fetch: hanging, timeoutMs: 20 })).toEqual({
      ok: false,
      reason: 'could not ask Gitea at https://gitea.example/api/v1: no answer within 20 ms',
    });
    expect(await probeTokenScopes({ baseUrl: 'https://gitea.example', token: '' })).toMatchObject({ ok: false });
    expect(await probeTokenScopes({ baseUrl: 'not a url', token: TOKEN })).toMatchObject({ ok: false, reason: 'not a URL: not a url' });
  });
});

describe('scopeLevel', () => {
  it('write implies read; all is write everywhere', () => {
    expect(scopeLevel(['write:issue'], 'issue')).toBe('write');
    expect(scopeLevel(['read:issue'], 'issue')).toBe('read');
    expect(scopeLevel(['read:issue'], 'repository')).toBeNull();
    expect(scopeLevel(['all'], 'admin')).toBe('write');
  });
});

describe('agentTokenAdvice', () => {
  it('read:repository + write:issue (+ read:user): ok', () => {
    expect(agentTokenAdvice(['read:repository', 'write:issue'])).toEqual({ status: 'ok', detail: expect.stringContaining('no more than the agent needs') });
    expect(agentTokenAdvice(['read:repository', 'write:issue', 'read:user']).status).toBe('ok');
  });

  it.each([[['write:repository', 'write:issue']], [['read:repository', 'write:issue', 'write:admin']], [['all']], [['read:repository', 'write:issue', 'write:user']]])('more (%j): warn, the gate the only wall, a fix', (scopes) => {
    const a = agentTokenAdvice(scopes);
    expect(a).toMatchObject({ status: 'warn', detail: expect.stringContaining('the gate is then the only wall') });
    expect(a.fix).toContain('read:repository and write:issue');
    expect(a.fix).toContain('Settings → Applications → Generate token → Select permissions');
    for (const s of scopes.filter((x) => !['read:repository', 'write:issue'].includes(x))) expect(a.detail).toContain(s);
  });

  it('less: a failure (the agent cannot work), saying what it cannot do — also when it holds more elsewhere', () => {
    expect(agentTokenAdvice(['read:repository', 'read:issue'])).toMatchObject({ status: 'fail', detail: expect.stringContaining('cannot answer on the issue'), fix: expect.any(String) });
    expect(agentTokenAdvice(['read:user'])).toMatchObject({ status: 'fail', detail: expect.stringContaining('cannot read the repository or answer on the issue') });
    expect(agentTokenAdvice([])).toMatchObject({ status: 'fail' });
    expect(agentTokenAdvice(['write:admin', 'read:notification'])).toMatchObject({ status: 'fail', detail: expect.stringMatching(/lacks read:repository and write:issue.*holds read:notification, write:admin/) });
  });
});

describe('botTokenAdvice', () => {
  it('what the service needs (write:issue, read:repository, read:user): ok; all: ok', () => {
    expect(botTokenAdvice(['read:repository', 'read:user', 'write:issue'], 'off').status).toBe('ok');
    expect(botTokenAdvice(['write:repository', 'read:user', 'write:issue'], 'pull_request').status).toBe('ok');
    expect(botTokenAdvice(['all'], 'pull_request').status).toBe('ok');
  });

  it('a token the service cannot work with (no usable scope, or one of the three missing): fail, naming each', () => {
    expect(botTokenAdvice([], 'off')).toMatchObject({ status: 'fail', detail: expect.stringMatching(/lacks write:issue .*read:repository .*read:user/), fix: expect.stringContaining('CCWEB_GITEA_TOKEN') });
    expect(botTokenAdvice(['read:notification'], 'off').status).toBe('fail');
    expect(botTokenAdvice(['read:repository', 'write:issue'], 'off')).toMatchObject({ status: 'fail', detail: expect.stringContaining('read:user') });
    expect(botTokenAdvice(['read:repository', 'read:issue', 'read:user'], 'off')).toMatchObject({ status: 'fail', detail: expect.stringContaining('write:issue') });
  });

  it('without write:repository the answers work but changes are not published: warn, unless delivery is off', () => {
    expect(botTokenAdvice(['read:repository', 'read:user', 'write:issue'], 'pull_request')).toMatchObject({ status: 'warn', detail: expect.stringContaining('write:repository'), fix: expect.stringContaining('CCWEB_DELIVERY=off') });
    expect(botTokenAdvice(['read:repository', 'read:user', 'write:issue'], 'branch').status).toBe('warn');
  });
});
