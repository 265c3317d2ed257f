// Which Gitea `demo` runs (src/demo/choose-gitea.ts): the real one by default, the double when asked, for
// --nodes, or — saying so — when Go is missing and no Gitea build is cached.
import { describe, expect, it } from 'vitest';
import { chooseGitea } from '../../src/demo/choose-gitea.js';

describe('chooseGitea', () => {
  it('real by default when Gitea is built or Go can build it, with nothing to say', () => {
    expect(chooseGitea({ asked: null, nodes: 1, giteaBuilt: true, goFound: false })).toEqual({ kind: 'real', why: null });
    expect(chooseGitea({ asked: null, nodes: 1, giteaBuilt: false, goFound: true })).toEqual({ kind: 'real', why: null });
  });

  it('the double, with a line saying why and how to get the real one, when Go is missing and nothing is cached', () => {
    const c = chooseGitea({ asked: null, nodes: 1, giteaBuilt: false, goFound: false });
    expect(c.kind).toBe('double');
    expect(c.why).toMatch(/^Go is not installed and no Gitea build is cached: the demo runs on its Gitea double, an API without pages/);
    expect(c.why).toContain('install Go');
  });

  it('what was asked, as asked; --nodes on the double, saying so', () => {
    expect(chooseGitea({ asked: 'double', nodes: 1, giteaBuilt: true, goFound: true })).toEqual({ kind: 'double', why: null });
    expect(chooseGitea({ asked: 'real', nodes: 1, giteaBuilt: false, goFound: false })).toEqual({ kind: 'real', why: null });
    expect(chooseGitea({ asked: null, nodes: 2, giteaBuilt: true, goFound: true })).toMatchObject({ kind: 'double', why: expect.stringContaining('--nodes 2') });
  });
});
