// Which repositories this node acts for (docs/DESIGN-nodes-at-once.md step 4). With one
// node, or with a writer and standbys, the node that runs acts for every repository
// (EVERY_REPOSITORY). When every node writes (CCWEB_CLUSTER_MODE=active), each repository has one
// owning node: only it hosts the repository's actors, claims its tasks, sends its receipts and
// takes the requests about it; the others forward those requests to it.

/** Where requests about one repository are handled. */
export interface OwnerTarget {
  /** True when this node owns the repository (handle the request here). */
  self: boolean;
  nodeId: string;
  /** Where the owner listens (null: it registered none; a forward is then impossible). */
  url: string | null;
}

export interface RepositoryScope {
  /** Whether this node acts for the repository now (hosts its actors, claims its tasks, sends its receipts). */
  owns(repoKey: string): boolean;
  /** Whether this node does the cluster's once-per-cluster chores (retention, sweeps). */
  leads(): boolean;
  /**
   * Where a request about the repository goes: its live owner, or, when it has none, the node it
   * is given to now (this node takes it before answering `self`).
   */
  routeOf(repoKey: string): Promise<OwnerTarget>;
}

export const EVERY_REPOSITORY: RepositoryScope = {
  owns: () => true,
  leads: () => true,
  routeOf: async () => ({ self: true, nodeId: 'self', url: null }),
};
