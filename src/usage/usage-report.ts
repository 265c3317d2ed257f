// Usage sums for operators: per repository and per user over the last N UTC days (the admin page's
// tables, `GET /api/gitea-workflow/usage`), from the `usage` day records through their `day` index.
import type { Store } from '../store/types.js';
import { ZERO_COUNTS, addCounts, utcDay, type RepoLimitsRecord, type UsageCounts, type UsageDayRecord, type UsageLimits } from '../domain/usage-records.js';

export interface UsageRow extends UsageCounts {
  subject: string;
}

export interface UsageReport {
  days: string[];
  from: string;
  to: string;
  byRepository: UsageRow[];
  byUser: UsageRow[];
  /** Per day, all repositories together (the trend). */
  byDay: Array<{ day: string } & UsageCounts>;
  totals: UsageCounts;
}

function emptyRow(subject: string): UsageRow {
  return { subject, ...ZERO_COUNTS };
}

/** The last `days` UTC days up to and including `now`'s. */
export async function usageReport(store: Pick<Store, 'byIndex'>, now: Date, days = 7): Promise<UsageReport> {
  const list: string[] = [];
  for (let i = days - 1; i >= 0; i--) list.push(utcDay(now.getTime() - i * 86_400_000));
  const repos = new Map<string, UsageRow>();
  const users = new Map<string, UsageRow>();
  const byDay: UsageReport['byDay'] = [];
  let totals = ZERO_COUNTS;
  for (const day of list) {
    let dayRow = ZERO_COUNTS;
    for (const r of await store.byIndex<UsageDayRecord>('usage', 'day', day)) {
      const map = r.scope === 'repo' ? repos : users;
      map.set(r.subject, addCounts(map.get(r.subject) ?? emptyRow(r.subject), r));
      if (r.scope === 'repo') dayRow = addCounts(dayRow, r);
    }
    byDay.push({ day, ...dayRow });
    totals = addCounts(totals, dayRow);
  }
  const sorted = (m: Map<string, UsageRow>) => [...m.values()].sort((a, b) => b.totalTokens - a.totalTokens || a.subject.localeCompare(b.subject));
  return { days: list, from: list[0]!, to: list.at(-1)!, byRepository: sorted(repos), byUser: sorted(users), byDay, totals };
}

/** Per-repository overrides, for the limits view. */
export function repoOverrides(store: Pick<Store, 'list'>): Promise<RepoLimitsRecord[]> {
  return store.list<RepoLimitsRecord>('usage', (r) => typeof r.repoKey === 'string' && String(r.key).startsWith('limits:'));
}

export async function limitsView(global: UsageLimits, store: Pick<Store, 'list'>): Promise<Record<string, unknown>> {
  return {
    configured: global,
    repositories: (await repoOverrides(store)).map((r) => ({ repoKey: r.repoKey, limits: r.limits, updatedBy: r.updatedBy, updatedAt: r.updatedAt, version: r.version })),
  };
}
