// Repository ownership when every node writes (issue 31, CCWEB_CLUSTER_MODE=active; the plan is
// docs/DESIGN-nodes-at-once.md, step 4). Each repository has one owning node, recorded in
// `repository_owners`: only it hosts the repository's actors, claims its tasks and sends its
// receipts, so no actor runs on two nodes and no command has to travel between them; the others
// forward what they receive about it (src/cluster/forward-to-owner.ts).
//
// A repository is taken by the node it hashes to among the live nodes: when a request about it
// first arrives, when a task of it has no owner, or when its owner stopped heartbeating. Taking
// is a transaction, and a transaction's body runs at the database's head under the cluster's
// commit lock (PostgresStore, writers: 'many'), so two nodes that both try find each other's record
// and only one wins. A live owner keeps its repositories: a node that joins takes new ones only.
import { TASK_STATES, TERMINAL_TASK_STATES } from '../../machines/task-lifecycle.js';
import type { LeaseRecord, RepositoryOwnerRecord, TaskRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';
import { CHORES_KEY, liveNodeIds, ownerKey, rendezvousOwner, repositoriesToTake, type NodeView } from './ownership-decisions.js';
import type { OwnerTarget, RepositoryScope } from './repository-scope.js';

export interface OwnershipOptions {
  store: Store;
  nodeId: string;
  /** Every node on the database with its last heartbeat (PostgresStore.nodes()). */
  nodes: () => readonly NodeView[];
  /** A node whose heartbeat is older than this (behind the freshest) has stopped. */
  liveWindowMs: number;
  /** How often the owner table is looked over for repositories to take. Default 2 s. */
  intervalMs?: number;
  /** This node took these repositories (their actors are to be hosted, their recovery run). */
  onGained?: (repoKeys: string[]) => Promise<void>;
  /** These repositories were taken from this node (its heartbeat was seen as stopped). */
  onLost?: (repoKeys: string[]) => void;
  logger?: { info(obj: Record<string, unknown>, msg?: string): void; warn(obj: Record<string, unknown>, msg?: string): void };
}

export interface Ownership extends RepositoryScope {
  /** One pass over the owner table now (also run every `intervalMs` once started). */
  refresh(): Promise<void>;
  /** The repositories this node owns, as recorded. */
  owned(): string[];
  start(): void;
  stop(): Promise<void>;
}

const UNFINISHED = TASK_STATES.filter((s) => !(TERMINAL_TASK_STATES as readonly string[]).includes(s));

export function createOwnership(options: OwnershipOptions): Ownership {
  const { store, nodeId: self } = options;
  const byKey = (key: string) => store.get<RepositoryOwnerRecord>('repository_owners', key);
  const live = () => liveNodeIds(options.nodes(), options.liveWindowMs, self);
  const urlOf = (nodeId: string) => options.nodes().find((n) => n.nodeId === nodeId)?.url ?? null;
  const target = (nodeId: string): OwnerTarget => ({ self: nodeId === self, nodeId, url: nodeId === self ? null : urlOf(nodeId) });
  /** Repositories this node knew it owned at the last pass: a record that names another node now was taken from it. */
  let held = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();

  async function take(repoKey: string, liveNow: ReadonlySet<string>): Promise<RepositoryOwnerRecord> {
    const key = ownerKey(repoKey);
    return store.transact((tx) => {
      const current = tx.get<RepositoryOwnerRecord>('repository_owners', key);
      if (current && (current.nodeId === self || liveNow.has(current.nodeId))) return current;
      const record: RepositoryOwnerRecord = { repoKey, nodeId: self, since: new Date().toISOString(), previous: current?.nodeId ?? null };
      tx.put<RepositoryOwnerRecord>('repository_owners', key, record);
      tx.appendAudit({
        action: current ? 'cluster.repository_taken_over' : 'cluster.repository_taken',
        actor: `node:${self}`,
        // Taken from a node that stopped heartbeating: an operator wants to find that node.
        ...(current ? { level: 'alert' as const, errorCode: 'node_stopped' } : {}),
        metadata: { repoKey, node: self, previous: current?.nodeId ?? null },
      });
      return record;
    });
  }

  async function gained(repoKeys: string[]): Promise<void> {
    if (repoKeys.length === 0) return;
    for (const r of repoKeys) held.add(ownerKey(r));
    options.logger?.info({ node: self, repositories: repoKeys.slice(0, 20), count: repoKeys.length }, 'this node took repositories');
    await options.onGained?.(repoKeys);
  }

  function unfinishedRepositories(): string[] {
    const keys = new Set<string>();
    for (const state of UNFINISHED) for (const t of store.byIndex<TaskRecord>('tasks', 'state', state)) keys.add(t.repoKey);
    for (const lease of store.list<LeaseRecord>('leases', (r) => r.state === 'held')) keys.add(lease.repoKey);
    return [...keys];
  }

  async function pass(): Promise<void> {
    const liveNow = live();
    const liveSet = new Set(liveNow);
    const owners = store.list<RepositoryOwnerRecord>('repository_owners').map((r) => ({ key: ownerKey(r.repoKey), repoKey: r.repoKey, nodeId: r.nodeId }));
    const mine = new Set(owners.filter((o) => o.nodeId === self).map((o) => o.key));
    const lost = [...held].filter((key) => !mine.has(key));
    held = mine;
    if (lost.length > 0) {
      options.logger?.warn({ node: self, repositories: lost.slice(0, 20), count: lost.length }, 'repositories were taken from this node (its heartbeat was seen as stopped)');
      options.onLost?.(lost);
    }
    const took: string[] = [];
    for (const repoKey of repositoriesToTake({ self, live: liveNow, owners, unfinished: unfinishedRepositories() })) {
      const record = await take(repoKey, liveSet);
      if (record.nodeId === self) took.push(record.repoKey);
    }
    await gained(took);
  }

  function refresh(): Promise<void> {
    // One pass at a time: a pass that takes a repository must finish hosting it before the next looks.
    running = running.then(pass, pass);
    return running;
  }

  return {
    owns: (repoKey) => byKey(ownerKey(repoKey))?.nodeId === self,
    leads: () => rendezvousOwner(CHORES_KEY, live()) === self,
    async routeOf(repoKey) {
      const liveNow = live();
      const current = byKey(ownerKey(repoKey));
      if (current && liveNow.includes(current.nodeId)) return target(current.nodeId);
      const to = rendezvousOwner(ownerKey(repoKey), liveNow) ?? self;
      if (to !== self) return target(to);
      const record = await take(repoKey, new Set(liveNow));
      if (record.nodeId === self && !held.has(ownerKey(repoKey))) await gained([record.repoKey]);
      return target(record.nodeId);
    },
    refresh,
    owned: () => store.list<RepositoryOwnerRecord>('repository_owners', (r) => r.nodeId === self).map((r) => r.repoKey),
    start() {
      if (timer) return;
      held = new Set(store.list<RepositoryOwnerRecord>('repository_owners', (r) => r.nodeId === self).map((r) => ownerKey(r.repoKey)));
      timer = setInterval(() => void refresh().catch((err: unknown) => options.logger?.warn({ err: String(err) }, 'repository ownership pass failed')), options.intervalMs ?? 2000);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await running.catch(() => undefined);
    },
  };
}
