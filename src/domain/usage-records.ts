// What the service stores about usage. In domain/ because the task and turn records
// carry these types, and the platform imports no part (usage/ counts; this is what it writes). Per
// turn and per task the fields sit on the existing records (`TurnRecord.usage`, `TaskRecord.usage`),
// so the task detail shows them without a join; the sums per repository and per user live in the `usage` collection, one record per UTC
// day and subject, so "the last 7 days" and "today's quota" are a handful of key reads, never a scan
// of (possibly archived) tasks. The same collection holds the per-repository limit overrides.

/** Token counts as Codex reports them (`TokenUsageBreakdown`). `totalTokens` = input + output. */
export interface TokenCounts {
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
  reasoningOutputTokens: number;
  totalTokens: number;
}

/** `TurnRecord.usage`: one Codex turn. */
export interface TurnUsage extends TokenCounts {
  model: string | null;
  /** From `turn/start` to the turn's end, measured by the service. */
  wallMs: number;
  /** Size of the turn's last `turn/diff/updated` diff (bytes, files, +/- lines); null when Codex sent none. */
  diff: DiffSize | null;
}

export interface DiffSize {
  bytes: number;
  files: number;
  added: number;
  removed: number;
}

/** `TaskRecord.usage`: the sum of the task's turns. */
export interface TaskUsage extends TokenCounts {
  turns: number;
  wallMs: number;
  /** Bytes of the changes the task published (their diffs), not of the turns' diffs. */
  diffBytes: number;
  /** The model of the last turn. */
  model: string | null;
}

export type UsageScope = 'repo' | 'user';

/** The counters a day record holds and the report sums over days, repositories and users. */
export interface UsageCounts extends TokenCounts {
  /** Tasks accepted (queued). */
  tasks: number;
  /** Mentions refused by a daily quota. */
  refused: number;
  turns: number;
  wallMs: number;
  /** Bytes of the changes published (their diffs). */
  diffBytes: number;
  /** Tasks stopped by a per-task limit. */
  budgetStops: number;
}

/** `usage`, key = `day:<YYYY-MM-DD>:<scope>:<subject>`: one UTC day of one repository or user. */
export interface UsageDayRecord extends UsageCounts {
  key: string;
  day: string;
  scope: UsageScope;
  /** repoKey or Gitea login. */
  subject: string;
  updatedAt: string;
}

/** The limits an operator can set; every one optional (unset = no limit). */
export interface UsageLimits {
  taskTokens?: number;
  taskTurns?: number;
  taskWallMs?: number;
  userTasksPerDay?: number;
  repoTokensPerDay?: number;
}

export const LIMIT_NAMES = ['taskTokens', 'taskTurns', 'taskWallMs', 'userTasksPerDay', 'repoTokensPerDay'] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

/** `usage`, key = `limits:<repoKey>`: an operator's per-repository override (null = no limit there). */
export interface RepoLimitsRecord {
  key: string;
  repoKey: string;
  limits: Partial<Record<LimitName, number | null>>;
  updatedBy: string;
  updatedAt: string;
  version: number;
}

export const ZERO_TOKENS: TokenCounts = { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningOutputTokens: 0, totalTokens: 0 };

export const ZERO_COUNTS: UsageCounts = { tasks: 0, refused: 0, turns: 0, wallMs: 0, diffBytes: 0, budgetStops: 0, ...ZERO_TOKENS };

export function addTokens(a: TokenCounts, b: TokenCounts): TokenCounts {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    reasoningOutputTokens: a.reasoningOutputTokens + b.reasoningOutputTokens,
    totalTokens: a.totalTokens + b.totalTokens,
  };
}

/** `a` with `b`'s counters added; `a`'s other fields (key, subject, ...) kept. */
export function addCounts<T extends UsageCounts>(a: T, b: UsageCounts): T {
  return {
    ...a,
    ...addTokens(a, b),
    tasks: a.tasks + b.tasks,
    refused: a.refused + b.refused,
    turns: a.turns + b.turns,
    wallMs: a.wallMs + b.wallMs,
    diffBytes: a.diffBytes + b.diffBytes,
    budgetStops: a.budgetStops + b.budgetStops,
  };
}

/** The UTC day of a time, `YYYY-MM-DD`. Quotas are per UTC day. */
export function utcDay(at: Date | number): string {
  return new Date(at).toISOString().slice(0, 10);
}

/** Start of the next UTC day: when a daily quota of `at`'s day is free again. */
export function nextUtcDay(at: Date | number): Date {
  const d = new Date(at);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1));
}

export function dayKey(day: string, scope: UsageScope, subject: string): string {
  return `day:${day}:${scope}:${subject}`;
}

export function limitsKey(repoKey: string): string {
  return `limits:${repoKey}`;
}

export function emptyDay(day: string, scope: UsageScope, subject: string, at: Date): UsageDayRecord {
  return {
    key: dayKey(day, scope, subject),
    day,
    scope,
    subject,
    ...ZERO_COUNTS,
    updatedAt: at.toISOString(),
  };
}

/** Size of a unified diff without keeping it: bytes, files (`diff --git` headers), +/- lines. */
export function diffSize(diff: string): DiffSize {
  let files = 0;
  let added = 0;
  let removed = 0;
  for (const line of diff.split('\n')) {
    if (line.startsWith('diff --git ')) files += 1;
    else if (line.startsWith('+') && !line.startsWith('+++')) added += 1;
    else if (line.startsWith('-') && !line.startsWith('---')) removed += 1;
  }
  return { bytes: Buffer.byteLength(diff, 'utf8'), files, added, removed };
}
