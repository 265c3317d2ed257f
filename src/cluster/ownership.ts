// Repository ownership when every node writes (CCWEB_CLUSTER_MODE=active; the plan is
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
  /** How often this node heartbeats. */
  heartbeatMs: number;
  /** When this node's own heartbeat was last written, and since when without a gap (PostgresStore.ownHeartbeat). */
  ownHeartbeat: () => { lastAt: number; steadySince: number };
  /** How often the owner table is looked over for repositories to take. Default 2 s. */
  intervalMs?: number;
  /** This node took these repositories: host their actors and run their recovery (it does not act for them yet). */
  onGained?: (repoKeys: string[]) => Promise<void>;
  /** Hosted: this node acts for them from now on (catch up their receipts, wake the scheduler). */
  onActing?: (repoKeys: string[]) => Promise<void>;
  /** These repositories were taken from this node (its heartbeat was seen as stopped). */
  onLost?: (repoKeys: string[]) => void;
  logger?: { info(obj: Record<string, unknown>, msg?: string): void; warn(obj: Record<string, unknown>, msg?: string): void };
}

export interface Ownership extends RepositoryScope {
  /** One pass over the owner table now (also run every `intervalMs` once started). */
  refresh(): Promise<void>;
  /** The repositories this node owns, as recorded. */
  owned(): Promise<string[]>;
  start(): void;
  stop(): Promise<void>;
}

interface WaitingComment {
  state: string;
  comment: { repoKey: string };
}

const UNFINISHED = TASK_STATES.filter((s) => !(TERMINAL_TASK_STATES as readonly string[]).includes(s));

/** Resolves once the owner table is read (after the store opened, before the runtime restores). */
export async function createOwnership(options: OwnershipOptions): Promise<Ownership> {
  const { store, nodeId: self } = options;
  const byKey = (key: string) => store.get<RepositoryOwnerRecord>('repository_owners', key);
  const live = () => liveNodeIds(options.nodes(), options.liveWindowMs, self);
  const urlOf = (nodeId: string) => options.nodes().find((n) => n.nodeId === nodeId)?.url ?? null;
  const target = (nodeId: string): OwnerTarget => ({ self: nodeId === self, nodeId, url: nodeId === self ? null : urlOf(nodeId) });
  /**
   * Repositories this node acts for: recorded as its own and hosted (their actors restored and their
   * recovery run, `onGained`). A record that names another node now was taken from it. At creation
   * (after the store opened, before the runtime restores): the ones recorded as this node's.
   */
  const ownersNow = await store.list<RepositoryOwnerRecord>('repository_owners');
  let held = new Set(ownersNow.filter((r) => r.nodeId === self).map((r) => ownerKey(r.repoKey)));
  /**
   * The owner table as this node last read it (at creation, each pass, each take), by owner key: what
   * `owns`, which must answer at once, checks beside `held`. A take by another node shows here at the
   * next pass, when it is also reported lost (`onLost`).
   */
  const recorded = new Map(ownersNow.map((r) => [ownerKey(r.repoKey), r.nodeId]));
  /** While a pass reads the owner table: what this node took meanwhile (`routeOf`), which that read may predate. */
  let tookWhileReading: Map<string, RepositoryOwnerRecord> | undefined;
  /** Gains under way (their actors being hosted): not acted for until done, asked for once. */
  const gaining = new Map<string, Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  // A node judges the others only once its own heartbeat has been written steadily for a whole
  // window: just started, or back from a database outage (during which nobody's heartbeat moved),
  // every other node looks stopped until it has heartbeated again, and taking their repositories
  // then would move work that is running. Until then it takes only repositories nobody owns.
  const judging = (): boolean => {
    const now = Date.now();
    const beat = options.ownHeartbeat();
    return now - beat.lastAt <= 2 * options.heartbeatMs && now - beat.steadySince >= options.liveWindowMs;
  };

  /**
   * Takes the repositories in one transaction (one commit-lock round trip for a whole pass), unless
   * the record names a live node by then; returns each repository's record as it stands after.
   */
  async function take(repoKeys: string[], liveNow: ReadonlySet<string>, decidedAt: number): Promise<RepositoryOwnerRecord[]> {
    const records = await store.transact(async (tx) => {
      const after: RepositoryOwnerRecord[] = [];
      for (const repoKey of repoKeys) {
        const key = ownerKey(repoKey);
        const current = await tx.get<RepositoryOwnerRecord>('repository_owners', key);
        if (current && (current.nodeId === self || liveNow.has(current.nodeId))) {
          after.push(current);
          continue;
        }
        // The body runs when this node holds the commit lock, which may be long after the decision (a
        // database outage, a slow lock): the heartbeats it was made from are old by then, so it stands
        // only if it is still fresh. The next pass decides again.
        if (current && Date.now() - decidedAt > options.heartbeatMs) {
          after.push(current);
          continue;
        }
        const record: RepositoryOwnerRecord = { repoKey, nodeId: self, since: new Date().toISOString(), previous: current?.nodeId ?? null };
        await tx.put<RepositoryOwnerRecord>('repository_owners', key, record);
        await tx.appendAudit({
          action: current ? 'cluster.repository_taken_over' : 'cluster.repository_taken',
          actor: `node:${self}`,
          // Taken from a node that stopped heartbeating: an operator wants to find that node.
          ...(current ? { level: 'alert' as const, errorCode: 'node_stopped' } : {}),
          metadata: { repoKey, node: self, previous: current?.nodeId ?? null },
        });
        after.push(record);
      }
      return after;
    });
    for (const r of records) {
      recorded.set(ownerKey(r.repoKey), r.nodeId);
      if (r.nodeId === self) tookWhileReading?.set(ownerKey(r.repoKey), r);
    }
    return records;
  }

  /**
   * Hosts repositories recorded as this node's and not yet acted for. Only once `onGained` is done does
   * this node act for them (a scan in between would find their lock actor stored but not hosted); a
   * gain that failed is asked for again by the next pass.
   */
  async function gain(repoKeys: string[]): Promise<void> {
    const fresh = [...new Map(repoKeys.map((r) => [ownerKey(r), r])).entries()].filter(([key]) => !held.has(key) && !gaining.has(key));
    const under = repoKeys.map((r) => gaining.get(ownerKey(r))).filter((p): p is Promise<void> => p !== undefined);
    if (fresh.length > 0) {
      const names = fresh.map(([, r]) => r);
      const hosting = (async () => {
        options.logger?.info({ node: self, repositories: names.slice(0, 20), count: names.length }, 'this node took repositories');
        await options.onGained?.(names);
        for (const [key] of fresh) held.add(key);
        await options.onActing?.(names);
      })();
      for (const [key] of fresh) gaining.set(key, hosting);
      try {
        await hosting;
      } finally {
        for (const [key] of fresh) gaining.delete(key);
      }
    }
    await Promise.all(under);
  }

  async function unfinishedRepositories(): Promise<string[]> {
    const keys = new Set<string>();
    for (const state of UNFINISHED) for (const t of await store.byIndex<TaskRecord>('tasks', 'state', state)) keys.add(t.repoKey);
    for (const lease of await store.list<LeaseRecord>('leases', (r) => r.state === 'held')) keys.add(lease.repoKey);
    // A comment waiting for Gitea's confirmation is retried by its repository's owner only.
    // (Its record is intake's, src/intake/pending-intake.ts; read here for these two fields only.)
    for (const p of await store.list<WaitingComment>('pending_intake', (r) => r.state === 'waiting')) keys.add(p.comment.repoKey);
    return [...keys];
  }

  async function pass(): Promise<void> {
    const decidedAt = Date.now();
    const liveNow = live();
    const liveSet = new Set(liveNow);
    const took = (tookWhileReading = new Map<string, RepositoryOwnerRecord>());
    let listed: RepositoryOwnerRecord[];
    try {
      listed = await store.list<RepositoryOwnerRecord>('repository_owners');
    } finally {
      tookWhileReading = undefined;
    }
    const byOwnerKey = new Map(listed.map((r) => [ownerKey(r.repoKey), r]));
    for (const [key, r] of took) byOwnerKey.set(key, r);
    const owners = [...byOwnerKey.values()].map((r) => ({ key: ownerKey(r.repoKey), repoKey: r.repoKey, nodeId: r.nodeId }));
    recorded.clear();
    for (const o of owners) recorded.set(o.key, o.nodeId);
    const mine = new Map(owners.filter((o) => o.nodeId === self).map((o) => [o.key, o.repoKey]));
    const lost = [...held].filter((key) => !mine.has(key));
    held = new Set([...held].filter((key) => mine.has(key)));
    if (lost.length > 0) {
      options.logger?.warn({ node: self, repositories: lost.slice(0, 20), count: lost.length }, 'repositories were taken from this node (its heartbeat was seen as stopped)');
      options.onLost?.(lost);
    }
    // Not judging the others yet: their repositories count as owned by live nodes.
    const judged = judging() ? owners : owners.map((o) => (liveSet.has(o.nodeId) ? o : { ...o, nodeId: self }));
    const toTake = repositoriesToTake({ self, live: liveNow, owners: judged, unfinished: await unfinishedRepositories() });
    for (const record of toTake.length > 0 ? await take(toTake, liveSet, decidedAt) : []) {
      if (record.nodeId === self) mine.set(ownerKey(record.repoKey), record.repoKey);
    }
    // Taken now, by a request meanwhile, or a gain that failed before: hosted now.
    await gain([...mine.entries()].filter(([key]) => !held.has(key)).map(([, repoKey]) => repoKey));
  }

  let queued: Promise<void> | undefined;
  function refresh(): Promise<void> {
    // One pass at a time: a pass that takes a repository must finish hosting it before the next
    // looks. Asked again while one waits to start (a burst of accepted comments): that one will do.
    if (queued) return queued;
    const next = running.then(
      () => ((queued = undefined), pass()),
      () => ((queued = undefined), pass()),
    );
    queued = next;
    running = next.catch(() => undefined);
    return next;
  }

  return {
    owns: (repoKey) => held.has(ownerKey(repoKey)) && recorded.get(ownerKey(repoKey)) === self,
    leads: () => rendezvousOwner(CHORES_KEY, live()) === self,
    async routeOf(repoKey) {
      const decidedAt = Date.now();
      const liveNow = live();
      const current = await byKey(ownerKey(repoKey));
      // An owner that looks stopped keeps its repository until this node can judge (see `judging`).
      if (current && (liveNow.includes(current.nodeId) || !judging())) return target(current.nodeId);
      const to = rendezvousOwner(ownerKey(repoKey), liveNow) ?? self;
      if (to !== self) return target(to);
      const [record] = await take([repoKey], new Set(liveNow), decidedAt);
      if (record!.nodeId === self) await gain([record!.repoKey]);
      return target(record!.nodeId);
    },
    refresh,
    owned: async () => (await store.list<RepositoryOwnerRecord>('repository_owners', (r) => r.nodeId === self)).map((r) => r.repoKey),
    start() {
      if (timer) return;
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
