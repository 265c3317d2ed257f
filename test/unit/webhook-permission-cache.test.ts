// The commenter's write access asked of Gitea, cached briefly per repository and user
// (src/webhook/permission-cache.ts): answers kept for ttlMs, case-insensitively, failures never
// kept, the oldest entry dropped beyond maxEntries. The lookup is a counting function standing in
// for Gitea's permission API (a test double: the cache is what is under test).
import { describe, expect, it } from 'vitest';
import type { RepoPermission } from '../../src/webhook/authorize-actor.js';
import { cachedPermissionLookup } from '../../src/webhook/permission-cache.js';

function counting(answer: (login: string) => RepoPermission | Error) {
  const calls: string[] = [];
  const lookup = async (owner: string, repo: string, login: string) => {
    calls.push(`${owner}/${repo}/${login}`);
    const a = answer(login);
    if (a instanceof Error) throw a;
    return a;
  };
  return { calls, lookup };
}

const WRITE = { permission: 'write' } as unknown as RepoPermission;
const READ = { permission: 'read' } as unknown as RepoPermission;

describe('cachedPermissionLookup', () => {
  it('asks once within the TTL (names compared case-insensitively), again once it has passed', async () => {
    let t = 1_000;
    const g = counting(() => WRITE);
    const cached = cachedPermissionLookup(g.lookup, { ttlMs: 100, now: () => t });
    expect(await cached('acme', 'w', 'alice')).toBe(WRITE);
    t += 99;
    expect(await cached('ACME', 'W', 'Alice')).toBe(WRITE);
    expect(g.calls).toHaveLength(1);
    t += 1; // exactly ttlMs later: expired
    await cached('acme', 'w', 'alice');
    expect(g.calls).toHaveLength(2);
  });

  it('keys by repository and user: another user or repository is asked', async () => {
    const g = counting((login) => (login === 'bob' ? READ : WRITE));
    const cached = cachedPermissionLookup(g.lookup, { now: () => 0 });
    expect(await cached('acme', 'w', 'alice')).toBe(WRITE);
    expect(await cached('acme', 'w', 'bob')).toBe(READ);
    expect(await cached('acme', 'x', 'alice')).toBe(WRITE);
    expect(await cached('acm', 'ew', 'alice')).toBe(WRITE);
    expect(g.calls).toEqual(['acme/w/alice', 'acme/w/bob', 'acme/x/alice', 'acm/ew/alice']);
  });

  it('does not cache a failure: the next mention asks again', async () => {
    let fail = true;
    const g = counting(() => (fail ? new Error('gitea down') : WRITE));
    const cached = cachedPermissionLookup(g.lookup, { now: () => 0 });
    await expect(cached('acme', 'w', 'alice')).rejects.toThrow('gitea down');
    fail = false;
    expect(await cached('acme', 'w', 'alice')).toBe(WRITE);
    expect(g.calls).toHaveLength(2);
  });

  it('defaults to 30 s', async () => {
    let t = 0;
    const g = counting(() => WRITE);
    const cached = cachedPermissionLookup(g.lookup, { now: () => t });
    await cached('acme', 'w', 'alice');
    t = 29_999;
    await cached('acme', 'w', 'alice');
    expect(g.calls).toHaveLength(1);
    t = 30_000;
    await cached('acme', 'w', 'alice');
    expect(g.calls).toHaveLength(2);
  });

  it('keeps at most maxEntries, dropping the oldest first', async () => {
    const g = counting(() => WRITE);
    const cached = cachedPermissionLookup(g.lookup, { maxEntries: 2, now: () => 0 });
    for (const u of ['a', 'b', 'c']) await cached('o', 'r', u);
    await cached('o', 'r', 'c');
    await cached('o', 'r', 'b');
    expect(g.calls).toHaveLength(3);
    await cached('o', 'r', 'a');
    expect(g.calls).toHaveLength(4);
  });
});
