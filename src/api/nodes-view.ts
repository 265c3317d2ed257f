// The nodes of `/overview`: which run (each one writes), and which stopped
// heartbeating (a node that died without closing: its leases end at their expiry).

/** A node as the nodes list shows it (every running node writes: `writer`). */
export interface NodeStatus {
  nodeId: string;
  role: 'writer' | 'stopped';
  version: string;
  startedAt: string;
  heartbeatAt: string;
  url: string | null;
}

/** A node is stale when it has not heartbeat for three of its 10 s intervals. */
export const STALE_AFTER_MS = 30_000;

export function nodesView(nodes: readonly NodeStatus[], self: string, now: Date): Array<NodeStatus & { self: boolean; stale: boolean }> {
  return nodes.map((n) => ({
    ...n,
    self: n.nodeId === self,
    stale: n.role !== 'stopped' && now.getTime() - Date.parse(n.heartbeatAt) > STALE_AFTER_MS,
  }));
}
