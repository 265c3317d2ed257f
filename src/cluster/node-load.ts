// What the overview shows of each node's share of the work: the leases it holds (one per
// running task) and, when every node writes, the repositories it owns. Read from the store, which
// every node follows, so any node's overview shows every node's.
import { instanceOfOwner } from '../leases/lease-owner.js';
import type { LeaseRecord, RepositoryOwnerRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';

export interface NodeLoad {
  /** Leases the node holds now: the tasks it runs. */
  leasesHeld: number;
  /** Repositories it owns (CCWEB_CLUSTER_MODE=active), else null. */
  repositories: number | null;
}

export async function nodeLoads(store: Store, options: { owners: boolean }): Promise<(nodeId: string) => NodeLoad> {
  const leases = new Map<string, number>();
  for (const lease of await store.list<LeaseRecord>('leases', (r) => r.state === 'held')) {
    const node = instanceOfOwner(lease.owner ?? '');
    if (node !== null) leases.set(node, (leases.get(node) ?? 0) + 1);
  }
  const repositories = new Map<string, number>();
  if (options.owners) for (const r of await store.list<RepositoryOwnerRecord>('repository_owners')) repositories.set(r.nodeId, (repositories.get(r.nodeId) ?? 0) + 1);
  return (nodeId) => ({ leasesHeld: leases.get(nodeId) ?? 0, repositories: options.owners ? (repositories.get(nodeId) ?? 0) : null });
}
