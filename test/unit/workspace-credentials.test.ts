import { describe, expect, it } from 'vitest';

import { classifyGitFailure } from '../../src/workspace/classify-git-failure.js';
import { credentialScope, gitEnvironment, redactSecrets } from '../../src/workspace/git-credentials.js';

describe('gitEnvironment', () => {
  const parentEnv = {
    PATH: '/usr/bin',
    HOME: '/home/bot',
    LANG: 'C.UTF-8',
    GITEA_TOKEN: 'other-secret',
    AWS_SECRET_ACCESS_KEY: 'aws',
    GIT_CONFIG_PARAMETERS: "'http.proxy'='http://evil'",
    GIT_TRACE: '1',
    GIT_CURL_VERBOSE: '1',
  };

  it('builds a fresh environment: allow-listed variables only, prompts off', () => {
    const env = gitEnvironment({ parentEnv });
    expect(env.PATH).toBe('/usr/bin');
    expect(env.HOME).toBe('/home/bot');
    expect(env.LANG).toBe('C.UTF-8');
    for (const name of ['GITEA_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'GIT_CONFIG_PARAMETERS', 'GIT_TRACE', 'GIT_CURL_VERBOSE']) {
      expect(env[name]).toBeUndefined();
    }
    expect(env.GIT_TERMINAL_PROMPT).toBe('0');
    expect(env.GCM_INTERACTIVE).toBe('never');
    expect(env.GIT_ASKPASS).toMatch(/true$/);
    const keys = Object.keys(env).filter((k) => k.startsWith('GIT_CONFIG_KEY_')).map((k) => env[k]);
    expect(keys).toContain('credential.helper');
    expect(keys).toContain('core.hooksPath');
    expect(Object.values(env).join('\n')).not.toMatch(/authorization/i);
  });

  it('adds the token as an extraHeader scoped to the clone URL, via GIT_CONFIG_* only', () => {
    const env = gitEnvironment({ parentEnv, token: 't0ken-abc', scopeUrl: 'https://gitea.example/acme/widget.git' });
    const count = Number(env.GIT_CONFIG_COUNT);
    const entries = Array.from({ length: count }, (_, i) => [env[`GIT_CONFIG_KEY_${i}`], env[`GIT_CONFIG_VALUE_${i}`]]);
    expect(entries).toContainEqual(['http.https://gitea.example/acme/widget.git.extraHeader', 'Authorization: token t0ken-abc']);
    const holders = Object.entries(env).filter(([, v]) => v.includes('t0ken-abc'));
    expect(holders.map(([k]) => k)).toEqual([`GIT_CONFIG_VALUE_${count - 1}`]);
  });

  it('refuses tokens that could inject header lines', () => {
    expect(() => gitEnvironment({ token: 'a\r\nX-Evil: 1', scopeUrl: 'https://g/x.git' })).toThrow();
    expect(() => gitEnvironment({ token: 'abc' })).toThrow();
  });

  it('scopes without userinfo, query or fragment', () => {
    expect(credentialScope('https://u:p@gitea.example/a/b.git?x=1#y')).toBe('https://gitea.example/a/b.git');
  });
});

describe('redactSecrets', () => {
  it('removes the token, its base64 form and any Authorization header value', () => {
    const token = 'abcdef0123456789';
    const b64 = Buffer.from(token).toString('base64');
    const text = `fatal: ${token} / ${b64} / Authorization: token whatever / authorization: Basic Zm9vOmJhcg==`;
    const out = redactSecrets(text, [token]);
    expect(out).not.toContain(token);
    expect(out).not.toContain(b64.replace(/=+$/, ''));
    expect(out).not.toContain('whatever');
    expect(out).not.toContain('Zm9vOmJhcg');
  });
});

describe('classifyGitFailure', () => {
  it.each([
    ["fatal: Authentication failed for 'http://x/a.git/'", 'auth_failed', true],
    ["fatal: could not read Username for 'http://x': terminal prompts disabled", 'auth_failed', true],
    ['error: The requested URL returned error: 403', 'auth_failed', true],
    ['fatal: unable to access: Failed to connect to x port 80: Connection refused', 'git_failed', true],
    ['error: The requested URL returned error: 502', 'git_failed', true],
    ["fatal: couldn't find remote ref refs/pull/9/head", 'git_failed', false],
  ])('%s → %s', (stderr, code, retryable) => {
    expect(classifyGitFailure({ stderr, timedOut: false })).toEqual({ code, retryable });
  });

  it('timeouts are retryable', () => {
    expect(classifyGitFailure({ stderr: '', timedOut: true })).toEqual({ code: 'timeout', retryable: true });
  });
});
