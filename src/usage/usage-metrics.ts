// Usage metrics on the service's registry. Counters are fed when a turn's usage is
// recorded; the per-repository figures of today and the provider hold are read on each scrape.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Store } from '../store/types.js';
import type { ProviderHold } from './provider-hold.js';
import { utcDay, type TurnUsage, type UsageDayRecord } from '../domain/usage-records.js';

export interface UsageMetrics {
  onTurnRecorded(usage: TurnUsage, stoppedBy: string | null): void;
}

const code = (v: string | null) => (v && /^[a-z0-9_]{1,48}$/.test(v) ? v : 'other');

export function registerUsageMetrics(registry: Registry, store: Pick<Store, 'byIndex'>, hold?: ProviderHold, now: () => number = Date.now): UsageMetrics {
  const registers = [registry];
  const tokens = new Counter({ name: 'ccweb_codex_tokens_total', help: 'Tokens Codex reported for finished turns, by kind', labelNames: ['kind'] as const, registers });
  const turns = new Counter({ name: 'ccweb_codex_turns_total', help: 'Codex turns whose usage was recorded', registers });
  const wall = new Counter({ name: 'ccweb_codex_turn_wall_seconds_total', help: 'Wall time of recorded Codex turns', registers });
  const stops = new Counter({ name: 'ccweb_task_budget_stops_total', help: 'Turns interrupted because a per-task limit was crossed, by limit', labelNames: ['limit'] as const, registers });
  const today = (field: 'totalTokens' | 'tasks' | 'refused') =>
    async function (this: Gauge<'repo'>) {
      this.reset();
      try {
        for (const r of await store.byIndex<UsageDayRecord>('usage', 'day', utcDay(now()))) if (r.scope === 'repo') this.set({ repo: r.subject }, r[field]);
      } catch {
        // store closed: report nothing rather than fail the scrape
      }
    };
  new Gauge({ name: 'ccweb_usage_tokens_today', help: 'Tokens used today (UTC) per repository', labelNames: ['repo'] as const, registers, collect: today('totalTokens') });
  new Gauge({ name: 'ccweb_usage_tasks_today', help: 'Tasks accepted today (UTC) per repository', labelNames: ['repo'] as const, registers, collect: today('tasks') });
  new Gauge({ name: 'ccweb_quota_refusals_today', help: 'Mentions refused by a daily quota today (UTC) per repository', labelNames: ['repo'] as const, registers, collect: today('refused') });
  new Gauge({
    name: 'ccweb_provider_hold_seconds',
    help: 'Seconds until the model provider rate-limit hold ends (0 = no hold: claims proceed)',
    registers,
    collect() {
      const until = hold?.heldUntil(now()) ?? null;
      this.set(until === null ? 0 : Math.ceil((until - now()) / 1000));
    },
  });
  new Gauge({
    name: 'ccweb_provider_rate_limit_used_percent',
    help: "The model provider's last reported rate-limit window usage, by window",
    labelNames: ['window'] as const,
    registers,
    collect() {
      this.reset();
      const rl = hold?.status(now()).rateLimits;
      if (rl?.primary) this.set({ window: 'primary' }, rl.primary.usedPercent);
      if (rl?.secondary) this.set({ window: 'secondary' }, rl.secondary.usedPercent);
    },
  });
  return {
    onTurnRecorded(u, stoppedBy) {
      tokens.inc({ kind: 'input' }, u.inputTokens);
      tokens.inc({ kind: 'cached_input' }, u.cachedInputTokens);
      tokens.inc({ kind: 'output' }, u.outputTokens);
      tokens.inc({ kind: 'reasoning_output' }, u.reasoningOutputTokens);
      turns.inc();
      wall.inc(u.wallMs / 1000);
      if (stoppedBy) stops.inc({ limit: code(stoppedBy) });
    },
  };
}
