// Prometheus metrics (prom-client) on the service's own Registry, so two services in one process
// (tests) never share counters. Everything is fed from hooks that already exist — durable task
// transitions (`runtime.onTransition`), the webhook answers, the store's commit promise — so the
// hot path gains a map lookup and a counter increment, never a store read.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { TASK_STATE } from '../../machines/task-lifecycle.js';
import type { TransitionNotice } from '../runtime/actor-runtime.js';
import type { TaskRecord } from '../domain/records.js';
import type { Store, Tx } from '../store/types.js';

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** A label value we control: stable snake_case codes pass, anything else collapses to `other`. */
function code(value: unknown): string {
  return typeof value === 'string' && /^[a-z0-9_]{1,48}$/.test(value) ? value : 'other';
}

export interface WebhookAnswer {
  status: number;
  body: unknown;
}

/** `accepted` | `ignored` | `duplicate` | `rejected` | `stop` | an error code, and the reason if any. */
export function webhookOutcome(answer: WebhookAnswer): { outcome: string; reason: string } {
  const body = (answer.body ?? {}) as Record<string, unknown>;
  if (answer.status === 202) return { outcome: 'accepted', reason: 'none' };
  if (typeof body['status'] === 'string') {
    return { outcome: code(body['status']), reason: body['reason'] === undefined || body['reason'] === null ? 'none' : code(body['reason']) };
  }
  if (typeof body['error'] === 'string') return { outcome: 'error', reason: code(body['error']) };
  return { outcome: 'other', reason: 'none' };
}

export interface MetricsOptions {
  /** Default process metrics (CPU, memory, event loop lag). Default true. */
  defaultMetrics?: boolean;
  now?: () => number;
}

export interface ServiceMetrics {
  readonly registry: Registry;
  /** Feed from `runtime.onTransition`. */
  onTransition(change: TransitionNotice): void;
  /** Feed every answer the webhook endpoint gives. */
  observeWebhook(answer: WebhookAnswer): void;
  /** Change delivery: one count per publish attempt, by outcome (published, nothing_to_publish, not_published, or an error code). */
  observePublish(outcome: string): void;
  /** One call the agent made through the gate to gitea-mcp, by tool and outcome (forwarded, failed, refused). */
  observeAgentGiteaCall(tool: string, outcome: string): void;
  /** Queue depth per repository is computed from the store on each scrape. */
  watchQueue(queuedByRepo: () => Promise<Map<string, number>>): void;
  /** Wraps `store.transact` of this instance to time every commit (submit → durable). */
  timeStoreCommits(store: Store): void;
  /** Prometheus text exposition. */
  render(): Promise<string>;
}

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
const COMMIT_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const VERIFY_OUTCOMES = new Set(['succeeded', 'succeeded_with_rest_fallback', 'failed_reply', 'retry_wait', 'aborting', 'aborted', 'failed']);

export function createMetrics(options: MetricsOptions = {}): ServiceMetrics {
  const now = options.now ?? (() => performance.now());
  const registry = new Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const webhooks = new Counter({
    name: 'ccweb_webhooks_total',
    help: 'Webhook requests answered, by HTTP status, outcome and reason',
    labelNames: ['status', 'outcome', 'reason'] as const,
    registers,
  });
  const transitions = new Counter({
    name: 'ccweb_task_transitions_total',
    help: 'Durable task state transitions',
    labelNames: ['from', 'to'] as const,
    registers,
  });
  let queuedByRepo: (() => Promise<Map<string, number>>) | null = null;
  const queueDepth = new Gauge({
    name: 'ccweb_queue_depth',
    help: 'Tasks waiting in state queued, per repository (computed on scrape)',
    labelNames: ['repo'] as const,
    registers,
    async collect() {
      let queued: Map<string, number> = new Map();
      try {
        if (queuedByRepo) queued = await queuedByRepo();
      } catch {
        // store closed: report nothing rather than fail the scrape
      }
      // Reset and filled in one step once the read is done: a scrape meanwhile never sees it half filled.
      this.reset();
      for (const [repo, n] of queued) this.set({ repo }, n);
    },
  });
  const leaseWait = new Histogram({
    name: 'ccweb_lease_wait_seconds',
    help: 'Time a task waited from queued to preparing (it holds the repository lease from then on)',
    buckets: SECONDS,
    registers,
  });
  const turnDuration = new Histogram({
    name: 'ccweb_turn_duration_seconds',
    help: 'Time a task spent in running (one Codex turn), by the state it left to',
    labelNames: ['outcome'] as const,
    buckets: SECONDS,
    registers,
  });
  const verifications = new Counter({
    name: 'ccweb_reply_verifications_total',
    help: 'Reply verifications finished, by the state the task moved to',
    labelNames: ['outcome'] as const,
    registers,
  });
  const publishes = new Counter({
    name: 'ccweb_publish_total',
    help: 'Change delivery attempts, by outcome (published, nothing_to_publish, not_published, or the error code)',
    labelNames: ['outcome'] as const,
    registers,
  });
  const agentGiteaCalls = new Counter({
    name: 'ccweb_agent_gitea_calls_total',
    help: "The agent's calls to Gitea through the gate, by tool and outcome (forwarded, failed, refused)",
    labelNames: ['tool', 'outcome'] as const,
    registers,
  });
  const commitLatency = new Histogram({
    name: 'ccweb_store_commit_seconds',
    help: 'Store transaction latency from submit to durable (group commit, fdatasync)',
    labelNames: ['result'] as const,
    buckets: COMMIT_SECONDS,
    registers,
  });

  // Only in-memory times: after a restart a task already queued is timed from its record instead.
  const queuedAt = new Map<string, number>();
  const runningAt = new Map<string, number>();

  return {
    registry,
    onTransition(change) {
      if (change.kind !== 'task' || change.taskId === null) return;
      const { taskId, fromState, toState } = change;
      const t = now();
      transitions.inc({ from: fromState ?? 'none', to: toState });
      const { queued, preparing, running, verifying_reply } = TASK_STATE;
      if (toState === queued) queuedAt.set(taskId, t);
      if (fromState === queued && toState === preparing) {
        const since = queuedAt.get(taskId);
        if (since !== undefined) leaseWait.observe((t - since) / 1000);
      }
      if (fromState === queued) queuedAt.delete(taskId);
      if (toState === running) runningAt.set(taskId, t);
      if (fromState === running) {
        const since = runningAt.get(taskId);
        if (since !== undefined) turnDuration.observe({ outcome: toState }, (t - since) / 1000);
        runningAt.delete(taskId);
      }
      if (fromState === verifying_reply && VERIFY_OUTCOMES.has(toState)) verifications.inc({ outcome: toState });
    },
    observePublish(outcome) {
      publishes.inc({ outcome: /^[a-z_]{1,40}$/.test(outcome) ? outcome : 'other' });
    },
    observeAgentGiteaCall(tool, outcome) {
      // Tool names come from the agent when refused: bounded to gitea-mcp's own naming, else `other`.
      agentGiteaCalls.inc({ tool: /^[a-z_]{1,40}$/.test(tool) ? tool : 'other', outcome });
    },
    observeWebhook(answer) {
      const { outcome, reason } = webhookOutcome(answer);
      webhooks.inc({ status: String(answer.status), outcome, reason });
    },
    watchQueue(fn) {
      queuedByRepo = fn;
    },
    timeStoreCommits(store) {
      const transact = store.transact.bind(store);
      store.transact = (<R>(fn: (tx: Tx) => Promise<R> | R): Promise<R> => {
        const started = now();
        const p = transact(fn);
        p.then(
          () => commitLatency.observe({ result: 'ok' }, (now() - started) / 1000),
          () => commitLatency.observe({ result: 'error' }, (now() - started) / 1000),
        );
        return p;
      }) as Store['transact'];
    },
    render: () => registry.metrics(),
  };
}

/** Queued tasks per repository, through the store's `state` index (no scan of finished tasks). */
export async function queuedTasksByRepo(store: Pick<Store, 'byIndex'>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const t of await store.byIndex<TaskRecord>('tasks', 'state', 'queued')) out.set(t.repoKey, (out.get(t.repoKey) ?? 0) + 1);
  return out;
}
