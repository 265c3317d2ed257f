// Usage accounting and per-task budgets for Codex turns, plugged into the session
// manager as `TurnUsageHooks`:
// - `beforeTurn`: a task already at a limit gets no new turn; otherwise how long this turn may run
//   before the task's wall-time budget is spent;
// - `observe`: every notification of the running turn. `thread/tokenUsage/updated` carries the
//   thread's running `total` and the last response's `last`: the turn's tokens are the sum of `last`
//   over updates whose `total` moved (Codex repeats the last figures when a request is refused, which
//   must not count twice). When the task's tokens cross its budget the turn is to be interrupted;
//   `turn/diff/updated` gives the turn's diff (only its size is kept, on the turn record; codex 0.171
//   sends none for a file the agent wrote with its shell tool);
// - `classifyFailure`: a provider rate limit (see provider-hold.ts);
// - `recordTurn`: in the transaction that ends the turn, its usage on the turn record, the task's
//   sums on the task record, and the day's sums per repository and per user.
// - `countPublishedDiff`: the task's and the day's `diffBytes` are the bytes of the changes the task
//   published (whatever tool wrote them), counted in the transaction that verifies the publish.
import type { CodexNotification } from '../codex/jsonrpc-connection.js';
import type { TaskRecord, TurnRecord } from '../domain/records.js';
import type { Store, Tx } from '../store/types.js';
import { effectiveLimits } from './limits.js';
import type { ProviderHold } from './provider-hold.js';
import {
  ZERO_COUNTS,
  ZERO_TOKENS,
  addCounts,
  addTokens,
  dayKey,
  diffSize,
  emptyDay,
  utcDay,
  type DiffSize,
  type TaskUsage,
  type TokenCounts,
  type TurnUsage,
  type UsageCounts,
  type UsageDayRecord,
  type UsageLimits,
  type UsageScope,
} from '../domain/usage-records.js';

/** Error codes of a task stopped by one of its own limits: the receipt names the limit. */
export const BUDGET_CODES = ['budget_task_tokens', 'budget_task_turns', 'budget_task_wall_time'] as const;
export type BudgetCode = (typeof BUDGET_CODES)[number];

export function isBudgetCode(code: string | null | undefined): code is BudgetCode {
  return (BUDGET_CODES as readonly string[]).includes(code ?? '');
}

export interface TurnGate {
  /** A limit the task already reached: no turn starts. */
  refuse?: BudgetCode;
  /** The most this turn may run before the task's wall-time budget is spent; null = no such limit. */
  maxMs: number | null;
}

/** What the session manager calls; every method is synchronous and never throws on bad input. */
export interface TurnUsageHooks {
  beforeTurn(task: TaskRecord): TurnGate;
  observe(task: TaskRecord, turnKey: string, n: CodexNotification): BudgetCode | null;
  classifyFailure(error: unknown): string | null;
  recordTurn(tx: Tx, task: TaskRecord, turnKey: string, info: { model: string | null; wallMs: number; stoppedBy: string | null }): void;
}

export interface UsageEvents {
  /** After a turn's usage was recorded (metrics). */
  onTurnRecorded?(usage: TurnUsage, task: TaskRecord, stoppedBy: string | null): void;
}

export interface UsageAccountingOptions {
  store: Store;
  limits: UsageLimits;
  providerHold?: ProviderHold;
  now?: () => Date;
  events?: UsageEvents;
}

interface Meter {
  tokens: TokenCounts;
  diff: DiffSize | null;
}

function breakdown(v: unknown): TokenCounts | null {
  if (!v || typeof v !== 'object') return null;
  const r = v as Record<string, unknown>;
  const n = (k: string) => (typeof r[k] === 'number' && Number.isFinite(r[k]) ? (r[k] as number) : 0);
  if (typeof r['totalTokens'] !== 'number') return null;
  return {
    inputTokens: n('inputTokens'),
    cachedInputTokens: n('cachedInputTokens'),
    outputTokens: n('outputTokens'),
    reasoningOutputTokens: n('reasoningOutputTokens'),
    totalTokens: n('totalTokens'),
  };
}

export function taskUsageOf(task: { usage?: TaskUsage | undefined }): TaskUsage {
  return task.usage ?? { ...ZERO_TOKENS, turns: 0, wallMs: 0, diffBytes: 0, model: null };
}

function bumpDay(tx: Tx, scope: UsageScope, subject: string, at: Date, fn: (r: UsageDayRecord) => UsageDayRecord): void {
  const day = utcDay(at);
  const key = dayKey(day, scope, subject);
  const cur = tx.get<UsageDayRecord>('usage', key) ?? emptyDay(day, scope, subject, at);
  tx.put<UsageDayRecord>('usage', key, { ...fn(cur), updatedAt: at.toISOString() });
}

/**
 * A published change's size, added to its task's `diffBytes` and to the day's sums of its repository
 * and author. The caller calls it once per publish, in the transaction that records the publish as
 * verified (src/publish/publisher.ts), so a retried or restarted publish never counts twice.
 */
export function countPublishedDiff(tx: Tx, taskId: string, diff: DiffSize, at: Date): void {
  const t = tx.get<TaskRecord>('tasks', taskId);
  if (!t) return;
  const prev = taskUsageOf(t);
  tx.put<TaskRecord>('tasks', taskId, { ...t, usage: { ...prev, diffBytes: prev.diffBytes + diff.bytes } });
  const add = (r: UsageDayRecord): UsageDayRecord => addCounts(r, { ...ZERO_COUNTS, diffBytes: diff.bytes });
  bumpDay(tx, 'repo', t.repoKey, at, add);
  bumpDay(tx, 'user', t.author, at, add);
}

export function createUsageAccounting(options: UsageAccountingOptions): TurnUsageHooks & {
  /** Tokens of the task so far, including the running turn (for tests and the admin view). */
  liveTokens(taskId: string): number;
} {
  const { store } = options;
  const now = options.now ?? (() => new Date());
  const meters = new Map<string, Meter>();
  const taskOfTurn = new Map<string, string>();
  // The last `total` seen per thread: an update that does not move it carries no new usage.
  const threadTotals = new Map<string, number>();

  const limitsFor = (repoKey: string) => effectiveLimits(options.limits, store, repoKey);
  const meterOf = (turnKey: string) => {
    let m = meters.get(turnKey);
    if (!m) meters.set(turnKey, (m = { tokens: { ...ZERO_TOKENS }, diff: null }));
    return m;
  };

  return {
    beforeTurn(task) {
      const limits = limitsFor(task.repoKey);
      const used = taskUsageOf(store.get<TaskRecord>('tasks', task.taskId) ?? task);
      if (limits.taskTurns !== undefined && used.turns >= limits.taskTurns) return { refuse: 'budget_task_turns', maxMs: null };
      if (limits.taskTokens !== undefined && used.totalTokens >= limits.taskTokens) return { refuse: 'budget_task_tokens', maxMs: null };
      if (limits.taskWallMs !== undefined) {
        const left = limits.taskWallMs - used.wallMs;
        if (left <= 0) return { refuse: 'budget_task_wall_time', maxMs: null };
        return { maxMs: left };
      }
      return { maxMs: null };
    },

    observe(task, turnKey, n) {
      taskOfTurn.set(turnKey, task.taskId);
      if (n.method === 'turn/diff/updated' && typeof n.params?.diff === 'string') {
        meterOf(turnKey).diff = diffSize(n.params.diff);
        return null;
      }
      if (n.method !== 'thread/tokenUsage/updated') return null;
      const total = breakdown(n.params?.tokenUsage?.total);
      const last = breakdown(n.params?.tokenUsage?.last);
      if (!total || !last) return null;
      const threadId = typeof n.params?.threadId === 'string' ? n.params.threadId : '';
      if (threadTotals.get(threadId) === total.totalTokens) return null;
      threadTotals.set(threadId, total.totalTokens);
      const m = meterOf(turnKey);
      m.tokens = addTokens(m.tokens, last);
      const limit = limitsFor(task.repoKey).taskTokens;
      if (limit === undefined) return null;
      const before = taskUsageOf(store.get<TaskRecord>('tasks', task.taskId) ?? task).totalTokens;
      return before + m.tokens.totalTokens > limit ? 'budget_task_tokens' : null;
    },

    classifyFailure(error) {
      return options.providerHold?.classifyTurnError(error) ?? null;
    },

    recordTurn(tx, task, turnKey, info) {
      const m = meters.get(turnKey) ?? { tokens: { ...ZERO_TOKENS }, diff: null };
      meters.delete(turnKey);
      taskOfTurn.delete(turnKey);
      const at = now();
      const usage: TurnUsage = { ...m.tokens, model: info.model, wallMs: info.wallMs, diff: m.diff };
      const turn = tx.get<TurnRecord>('turns', turnKey);
      if (turn) tx.put<TurnRecord>('turns', turnKey, { ...turn, usage });
      const t = tx.get<TaskRecord>('tasks', task.taskId);
      if (t) {
        const prev = taskUsageOf(t);
        const next: TaskUsage = {
          ...addTokens(prev, m.tokens),
          turns: prev.turns + 1,
          wallMs: prev.wallMs + info.wallMs,
          diffBytes: prev.diffBytes,
          model: info.model ?? prev.model,
        };
        tx.put<TaskRecord>('tasks', task.taskId, { ...t, usage: next });
      }
      const turnCounts: UsageCounts = {
        ...ZERO_COUNTS,
        ...m.tokens,
        turns: 1,
        wallMs: info.wallMs,
        budgetStops: info.stoppedBy ? 1 : 0,
      };
      const add = (r: UsageDayRecord): UsageDayRecord => addCounts(r, turnCounts);
      bumpDay(tx, 'repo', task.repoKey, at, add);
      bumpDay(tx, 'user', task.author, at, add);
      options.events?.onTurnRecorded?.(usage, task, info.stoppedBy);
    },

    liveTokens(taskId) {
      let n = taskUsageOf(store.get<TaskRecord>('tasks', taskId) ?? {}).totalTokens;
      for (const [turnKey, m] of meters) if (taskOfTurn.get(turnKey) === taskId) n += m.tokens.totalTokens;
      return n;
    },
  };
}
