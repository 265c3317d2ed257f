// Pure decisions of repository ownership (src/cluster/ownership.ts does the I/O): which nodes count
// as alive, which node a repository goes to, and what one pass of the owner table has to change.
import { createHash } from 'node:crypto';
import { foldName } from '../domain/repository-identity.js';

export interface NodeView {
  nodeId: string;
  role: string;
  /** ISO time of the node's last heartbeat, from the database's clock. */
  heartbeatAt: string;
  url: string | null;
}

/** The owner table's key for a repository: two spellings of one repository are one owner. */
export function ownerKey(repoKey: string): string {
  return foldName(repoKey);
}

/**
 * The nodes that count as alive: registered as writers, and heartbeating within `windowMs` of the
 * freshest heartbeat seen. Heartbeats carry the database's clock, so the nodes' own clocks may
 * disagree without moving anything; this node's own heartbeat is among the freshest while it runs.
 */
export function liveNodeIds(nodes: readonly NodeView[], windowMs: number, self: string): string[] {
  // Writers only: a node waiting as a standby (started without CCWEB_CLUSTER_MODE=active) cannot act.
  const running = nodes.filter((n) => n.role === 'writer');
  const freshest = Math.max(...running.map((n) => Date.parse(n.heartbeatAt)).filter(Number.isFinite), Number.NEGATIVE_INFINITY);
  const live = new Set(running.filter((n) => Date.parse(n.heartbeatAt) >= freshest - windowMs).map((n) => n.nodeId));
  live.add(self);
  return [...live].sort();
}

function weight(nodeId: string, key: string): bigint {
  return createHash('sha256').update(`${nodeId}\n${key}`).digest().readBigUInt64BE(0);
}

/**
 * Rendezvous (highest random weight) hashing: every node computes the same owner from the same live
 * set without talking to the others, repositories spread evenly, and when a node leaves only its
 * own repositories move (each to the node that weighs most for it among the rest).
 */
export function rendezvousOwner(key: string, nodeIds: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestWeight = -1n;
  for (const id of nodeIds) {
    const w = weight(id, key);
    if (w > bestWeight || (w === bestWeight && best !== undefined && id < best)) {
      best = id;
      bestWeight = w;
    }
  }
  return best;
}

/** The key whose rendezvous owner does the cluster's once-per-cluster chores (retention sweeps). */
export const CHORES_KEY = 'ccweb:cluster-chores';

export interface OwnerEntry {
  key: string;
  repoKey: string;
  nodeId: string;
}

/**
 * What one pass over the owner table must take for this node: every repository whose recorded owner
 * is no longer alive, and every repository with unfinished work and no owner, that hashes to this
 * node among the live ones. Ownership never moves away from a live node (no rebalancing when a node
 * joins: a repository keeps its workspace, its Codex threads and its running task where they are).
 */
export function repositoriesToTake(input: { self: string; live: readonly string[]; owners: readonly OwnerEntry[]; unfinished: readonly string[] }): string[] {
  const live = new Set(input.live);
  const recorded = new Map(input.owners.map((o) => [o.key, o]));
  const take = new Map<string, string>();
  for (const o of input.owners) if (!live.has(o.nodeId) && rendezvousOwner(o.key, input.live) === input.self) take.set(o.key, o.repoKey);
  for (const repoKey of input.unfinished) {
    const key = ownerKey(repoKey);
    if (!recorded.has(key) && !take.has(key) && rendezvousOwner(key, input.live) === input.self) take.set(key, repoKey);
  }
  return [...take.values()].sort();
}
