// Repository ownership's pure decisions (src/cluster/ownership-decisions.ts): who is alive, where a
// repository goes, what one pass takes.
import { describe, expect, it } from 'vitest';
import { liveNodeIds, ownerKey, rendezvousOwner, repositoriesToTake } from '../../src/cluster/ownership-decisions.js';

const at = (s: number) => new Date(Date.UTC(2026, 11, 3, 12, 0, s)).toISOString();

describe('liveNodeIds', () => {
  it('counts writers whose heartbeat is within the window of the freshest, never stopped ones or standbys, always itself', () => {
    const nodes = [
      { nodeId: 'a', role: 'writer', heartbeatAt: at(50), url: null },
      { nodeId: 'b', role: 'writer', heartbeatAt: at(25), url: null },
      { nodeId: 'c', role: 'writer', heartbeatAt: at(19), url: null },
      { nodeId: 'd', role: 'stopped', heartbeatAt: at(50), url: null },
      // Waiting as a standby (started without CCWEB_CLUSTER_MODE=active): it cannot act.
      { nodeId: 'f', role: 'standby', heartbeatAt: at(50), url: null },
    ];
    expect(liveNodeIds(nodes, 30_000, 'a')).toEqual(['a', 'b']);
    // A node that has not heartbeated yet (just started) still counts itself.
    expect(liveNodeIds(nodes, 30_000, 'e')).toEqual(['a', 'b', 'e']);
    expect(liveNodeIds([], 30_000, 'a')).toEqual(['a']);
  });
});

describe('rendezvousOwner', () => {
  const repos = Array.from({ length: 3000 }, (_, i) => `org/repo-${i}`);

  it('spreads repositories evenly and agrees whatever order the nodes are listed in', () => {
    const counts = new Map<string, number>();
    for (const r of repos) {
      const owner = rendezvousOwner(r, ['a', 'b', 'c'])!;
      expect(rendezvousOwner(r, ['c', 'a', 'b'])).toBe(owner);
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    for (const id of ['a', 'b', 'c']) expect(counts.get(id)).toBeGreaterThan(850);
  });

  it('moves only the leaving node\'s repositories', () => {
    let moved = 0;
    for (const r of repos) {
      const before = rendezvousOwner(r, ['a', 'b', 'c']);
      const after = rendezvousOwner(r, ['a', 'b']);
      if (before !== 'c') expect(after).toBe(before);
      else moved += 1;
    }
    expect(moved).toBeGreaterThan(850);
    expect(rendezvousOwner('x', [])).toBeUndefined();
  });
});

describe('repositoriesToTake', () => {
  it("takes a stopped owner's repositories and unowned work that hash to this node, never a live owner's", () => {
    const repos = Array.from({ length: 40 }, (_, i) => `Org/Repo-${i}`);
    const live = ['a', 'b'];
    const owners = repos.slice(0, 20).map((repoKey, i) => ({ key: ownerKey(repoKey), repoKey, nodeId: i % 2 === 0 ? 'dead' : 'b' }));
    const unfinished = [...repos.slice(10, 40), 'org/repo-0'];
    const taken = repositoriesToTake({ self: 'a', live, owners, unfinished });
    for (const r of taken) expect(rendezvousOwner(ownerKey(r), live)).toBe('a');
    const expected = [
      ...repos.slice(0, 20).filter((_, i) => i % 2 === 0),
      ...repos.slice(20, 40),
    ].filter((r) => rendezvousOwner(ownerKey(r), live) === 'a');
    expect(taken).toEqual([...expected].sort());
    // Another spelling of a recorded repository is that repository, not one more to take.
    expect(taken).not.toContain('org/repo-0');
    expect(taken.some((r) => owners.find((o) => o.repoKey === r)?.nodeId === 'b')).toBe(false);
    // b's view takes the rest of the dead node's: the two never take the same one.
    const takenByB = repositoriesToTake({ self: 'b', live, owners, unfinished });
    expect(takenByB.filter((r) => taken.includes(r))).toEqual([]);
    expect(taken.length + takenByB.length).toBe(10 + 20);
  });
});
