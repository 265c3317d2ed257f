// Usage accounting and per-task budgets for Codex turns, plugged into the session
// manager as `TurnUsageHooks`:
// - `beforeTurn`: a task already at a limit gets no new turn; otherwise how long this turn may run
//   before the task's wall-time budget is spent, and its token budget as the turn starts;
// - `observe`: every notification of the running turn. `thread/tokenUsage/updated` carries the
//   thread's running `total` and the last response's `last`: the turn's tokens are the sum of `last`
//   over updates whose `total` moved (Codex repeats the last figures when a request is refused, which
//   must not count twice). When the task's tokens cross the budget `beforeTurn` read, the turn is to
//   be interrupted;
//   `turn/diff/updated` gives the turn's diff (only its size is kept, on the turn record; codex 0.171
//   sends none for a file the agent wrote with its shell tool);
// - `classifyFailure`: a provider rate limit (see provider-hold.ts);
// - `recordTurn`: in the transaction that ends the turn, its usage on the turn record, the task's
//   sums on the task record, and the day's sums per repository and per user; `turnRecorded` once
//   that transaction committed (the transaction may run more than once: it changes nothing else).
//   That transaction passes the turn's lease fence (src/sessions/session-manager.ts): a worker that
//   lost its lease counts nothing for the task (`turnDropped`).
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
  /**
   * The task's token budget as the turn starts: the limit and the tokens its earlier turns used
   * (only the end of a turn adds to them). `observe` checks against it; absent = no such limit.
   */
  tokens?: { limit: number; usedBefore: number };
}

export interface TurnInfo {
  model: string | null;
  wallMs: number;
  stoppedBy: string | null;
}

/**
 * What the session manager calls. `observe` and `classifyFailure` are synchronous (once per
 * notification) and never throw on bad input; `beforeTurn` reads the store, `recordTurn` writes in
 * the caller's transaction.
 */
export interface TurnUsageHooks {
  beforeTurn(task: TaskRecord): Promise<TurnGate>;
  /** `gate`: what `beforeTurn` answered for this turn. */
  observe(task: TaskRecord, turnKey: string, n: CodexNotification, gate: TurnGate): BudgetCode | null;
  classifyFailure(error: unknown): string | null;
  /** Writes only through `tx`: the transaction may run more than once. */
  recordTurn(tx: Tx, task: TaskRecord, turnKey: string, info: TurnInfo): Promise<void>;
  /** Once the transaction that called `recordTurn` committed: forgets the turn and tells `events`. */
  turnRecorded(task: TaskRecord, turnKey: string, info: TurnInfo): void;
  /** The turn's end was not recorded (its worker lost the lease): forgets the turn, counting nothing. */
  turnDropped(turnKey: string): void;
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

async function bumpDay(tx: Tx, scope: UsageScope, subject: string, at: Date, fn: (r: UsageDayRecord) => UsageDayRecord): Promise<void> {
  const day = utcDay(at);
  const key = dayKey(day, scope, subject);
  const cur = (await tx.get<UsageDayRecord>('usage', key)) ?? emptyDay(day, scope, subject, at);
  await tx.put<UsageDayRecord>('usage', key, { ...fn(cur), updatedAt: at.toISOString() });
}

/**
 * A published change's size, added to its task's `diffBytes` and to the day's sums of its repository
 * and author. The caller calls it once per publish, in the transaction that records the publish as
 * verified (src/publish/publisher.ts), so a retried or restarted publish never counts twice.
 */
export async function countPublishedDiff(tx: Tx, taskId: string, diff: DiffSize, at: Date): Promise<void> {
  const t = await tx.get<TaskRecord>('tasks', taskId);
  if (!t) return;
  const prev = taskUsageOf(t);
  await tx.put<TaskRecord>('tasks', taskId, { ...t, usage: { ...prev, diffBytes: prev.diffBytes + diff.bytes } });
  const add = (r: UsageDayRecord): UsageDayRecord => addCounts(r, { ...ZERO_COUNTS, diffBytes: diff.bytes });
  await bumpDay(tx, 'repo', t.repoKey, at, add);
  await bumpDay(tx, 'user', t.author, at, add);
}

export function createUsageAccounting(options: UsageAccountingOptions): TurnUsageHooks & {
  /** Tokens of the task so far, including the running turn (for tests and the admin view). */
  liveTokens(taskId: string): Promise<number>;
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
  // The turn's meter as it stands, without creating one (recordTurn may run more than once).
  const meterFor = (turnKey: string): Meter => meters.get(turnKey) ?? { tokens: { ...ZERO_TOKENS }, diff: null };
  const usageOf = (m: Meter, info: TurnInfo): TurnUsage => ({ ...m.tokens, model: info.model, wallMs: info.wallMs, diff: m.diff });

  return {
    async beforeTurn(task) {
      const limits = await limitsFor(task.repoKey);
      const used = taskUsageOf((await store.get<TaskRecord>('tasks', task.taskId)) ?? task);
      if (limits.taskTurns !== undefined && used.turns >= limits.taskTurns) return { refuse: 'budget_task_turns', maxMs: null };
      if (limits.taskTokens !== undefined && used.totalTokens >= limits.taskTokens) return { refuse: 'budget_task_tokens', maxMs: null };
      const tokens = limits.taskTokens !== undefined ? { tokens: { limit: limits.taskTokens, usedBefore: used.totalTokens } } : {};
      if (limits.taskWallMs !== undefined) {
        const left = limits.taskWallMs - used.wallMs;
        if (left <= 0) return { refuse: 'budget_task_wall_time', maxMs: null };
        return { maxMs: left, ...tokens };
      }
      return { maxMs: null, ...tokens };
    },

    observe(task, turnKey, n, gate) {
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
      if (!gate.tokens) return null;
      return gate.tokens.usedBefore + m.tokens.totalTokens > gate.tokens.limit ? 'budget_task_tokens' : null;
    },

    classifyFailure(error) {
      return options.providerHold?.classifyTurnError(error) ?? null;
    },

    async recordTurn(tx, task, turnKey, info) {
      const at = now();
      const m = meterFor(turnKey);
      const usage = usageOf(m, info);
      const turn = await tx.get<TurnRecord>('turns', turnKey);
      if (turn) await tx.put<TurnRecord>('turns', turnKey, { ...turn, usage });
      const t = await tx.get<TaskRecord>('tasks', task.taskId);
      if (t) {
        const prev = taskUsageOf(t);
        const next: TaskUsage = {
          ...addTokens(prev, m.tokens),
          turns: prev.turns + 1,
          wallMs: prev.wallMs + info.wallMs,
          diffBytes: prev.diffBytes,
          model: info.model ?? prev.model,
        };
        await tx.put<TaskRecord>('tasks', task.taskId, { ...t, usage: next });
      }
      const turnCounts: UsageCounts = {
        ...ZERO_COUNTS,
        ...m.tokens,
        turns: 1,
        wallMs: info.wallMs,
        budgetStops: info.stoppedBy ? 1 : 0,
      };
      const add = (r: UsageDayRecord): UsageDayRecord => addCounts(r, turnCounts);
      await bumpDay(tx, 'repo', task.repoKey, at, add);
      await bumpDay(tx, 'user', task.author, at, add);
    },

    turnRecorded(task, turnKey, info) {
      const usage = usageOf(meterFor(turnKey), info);
      meters.delete(turnKey);
      taskOfTurn.delete(turnKey);
      options.events?.onTurnRecorded?.(usage, task, info.stoppedBy);
    },

    turnDropped(turnKey) {
      meters.delete(turnKey);
      taskOfTurn.delete(turnKey);
    },

    async liveTokens(taskId) {
      let n = taskUsageOf((await store.get<TaskRecord>('tasks', taskId)) ?? {}).totalTokens;
      for (const [turnKey, m] of meters) if (taskOfTurn.get(turnKey) === taskId) n += m.tokens.totalTokens;
      return n;
    },
  };
}
