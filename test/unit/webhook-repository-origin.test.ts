// The Gitea host is configuration, never payload: the clone URL is built from
// CCWEB_GITEA_URL, and a payload whose repository URLs name another host is refused. Pure functions
// of src/webhook/repository-origin.ts; the HTTP path is test/integration/hardening-origin.test.ts.
import { describe, expect, it } from 'vitest';
import { cloneUrlFor } from '../../src/gitea/clone-url.js';
import { allowedRepositoryHosts, foreignRepositoryOrigin, urlHost } from '../../src/webhook/repository-origin.js';

describe('cloneUrlFor', () => {
  it('joins the configured URL (trailing slashes dropped) with the encoded owner and name', () => {
    expect(cloneUrlFor('https://git.example.com//', 'acme', 'widgets')).toBe('https://git.example.com/acme/widgets.git');
    expect(cloneUrlFor('http://127.0.0.1:3000/gitea', 'a b', 'c#d')).toBe('http://127.0.0.1:3000/gitea/a%20b/c%23d.git');
  });
});

describe('allowedRepositoryHosts', () => {
  it('the lower-case hosts of the configured URLs, once each, skipping absent and empty ones', () => {
    expect(allowedRepositoryHosts('https://Git.Example.com/', undefined, '', 'http://git.example.com:3000', 'https://public.example.org')).toEqual([
      'git.example.com',
      'public.example.org',
    ]);
    expect(allowedRepositoryHosts()).toEqual([]);
  });
});

describe('urlHost', () => {
  it('reads http(s), ssh:// and scp-like git URLs, lower-cased', () => {
    expect(urlHost('https://Git.Example.com:3000/acme/w.git')).toBe('git.example.com');
    expect(urlHost('ssh://git@Git.Example.com:22/acme/w.git')).toBe('git.example.com');
    expect(urlHost('git@Git.Example.com:acme/w.git')).toBe('git.example.com');
    expect(urlHost('Git.Example.com:acme/w.git')).toBe('git.example.com');
  });

  it('null for what has no host or does not parse', () => {
    expect(urlHost('not a url')).toBeNull();
    expect(urlHost('')).toBeNull();
    expect(urlHost('file:///srv/git/w.git')).toBeNull();
    expect(urlHost('/srv/git/w.git')).toBeNull();
  });

  it('an scp-like prefix inside a scheme URL is not taken for the host', () => {
    // `https://evil@good:443/…`: the host is `good`, not `https` nor `evil`.
    expect(urlHost('https://evil@good.example:443/a/b.git')).toBe('good.example');
    expect(urlHost('HTTPS://good.example/a')).toBe('good.example');
  });
});

describe('foreignRepositoryOrigin', () => {
  const allowed = ['git.example.com'];
  const ok = { cloneUrl: 'https://git.example.com/acme/w.git', htmlUrl: 'https://git.example.com/acme/w', sshUrl: 'git@git.example.com:acme/w.git' };

  it('null when every URL names an allowed host, or is absent or empty', () => {
    expect(foreignRepositoryOrigin(ok, allowed)).toBeNull();
    expect(foreignRepositoryOrigin({ cloneUrl: ok.cloneUrl, htmlUrl: '', sshUrl: undefined }, allowed)).toBeNull();
    expect(foreignRepositoryOrigin({}, allowed)).toBeNull();
  });

  it('names the first foreign field and its host, in the order clone, html, ssh', () => {
    expect(foreignRepositoryOrigin({ ...ok, cloneUrl: 'https://evil.example/acme/w.git', sshUrl: 'git@other.example:a/b' }, allowed)).toEqual({
      field: 'repository.clone_url',
      host: 'evil.example',
    });
    expect(foreignRepositoryOrigin({ ...ok, htmlUrl: 'https://evil.example/acme/w' }, allowed)).toEqual({ field: 'repository.html_url', host: 'evil.example' });
    expect(foreignRepositoryOrigin({ ...ok, sshUrl: 'git@evil.example:acme/w.git' }, allowed)).toEqual({ field: 'repository.ssh_url', host: 'evil.example' });
  });

  it('an unparsable URL is foreign; the host kept for the audit is printable and at most 128 characters', () => {
    expect(foreignRepositoryOrigin({ cloneUrl: 'nonsense' }, allowed)).toEqual({ field: 'repository.clone_url', host: 'unparsable' });
    const long = `${'a'.repeat(200)}.example`;
    const got = foreignRepositoryOrigin({ cloneUrl: `git@${long}:a/b.git` }, allowed);
    expect(got?.host).toBe('a'.repeat(128));
    expect(foreignRepositoryOrigin({ sshUrl: 'git@ev\u00e9l:a/b' }, allowed)).toEqual({ field: 'repository.ssh_url', host: 'ev?l' });
  });
});
