import { describe, expect, it } from 'vitest';
import { nodesView, STALE_AFTER_MS } from '../../src/api/nodes-view.js';

const at = (ms: number) => new Date(ms).toISOString();

describe('the nodes of /overview', () => {
  it('flags a node that stopped heartbeating (not one that stopped cleanly) and marks this node', () => {
    const now = 1_000_000_000;
    const view = nodesView(
      [
        { nodeId: 'a', role: 'writer', version: '1', startedAt: at(0), heartbeatAt: at(now - STALE_AFTER_MS - 1), url: null },
        { nodeId: 'b', role: 'writer', version: '1', startedAt: at(0), heartbeatAt: at(now - STALE_AFTER_MS), url: null },
        { nodeId: 'c', role: 'stopped', version: '1', startedAt: at(0), heartbeatAt: at(0), url: null },
      ],
      'b',
      new Date(now),
    );
    expect(view.map((n) => [n.nodeId, n.stale, n.self])).toEqual([
      ['a', true, false],
      ['b', false, true],
      ['c', false, false],
    ]);
  });
});
