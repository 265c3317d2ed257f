// What the overview shows of each node's share of the work: the leases it holds (one per running
// task). Read from the store every node shares, so any node's overview shows every node's.
import { isLeaseHeld } from '../../machines/repo-lock.js';
import { instanceOfOwner } from '../leases/lease-owner.js';
import type { LeaseRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';

export interface NodeLoad {
  /** Leases the node holds now: the tasks it runs. */
  leasesHeld: number;
}

export async function nodeLoads(store: Store): Promise<(nodeId: string) => NodeLoad> {
  const leases = new Map<string, number>();
  for (const lease of await store.list<LeaseRecord>('leases', (r) => isLeaseHeld(r))) {
    const node = instanceOfOwner(lease.owner ?? '');
    if (node !== null) leases.set(node, (leases.get(node) ?? 0) + 1);
  }
  return (nodeId) => ({ leasesHeld: leases.get(nodeId) ?? 0 });
}
