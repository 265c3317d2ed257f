// Which repositories a part of this node acts for. Every node acts for every repository
// (EVERY_REPOSITORY): the database's lease row lets one task of a repository run at a time, and the
// parts that send receipts, notices and progress edits decide per task inside their transactions.

export interface RepositoryScope {
  /** Whether this node acts for the repository (hosts its actors, claims its tasks, sends its receipts). */
  owns(repoKey: string): boolean;
  /** Whether this node does the once-per-store chores (retention, sweeps). */
  leads(): boolean;
}

export const EVERY_REPOSITORY: RepositoryScope = {
  owns: () => true,
  leads: () => true,
};
