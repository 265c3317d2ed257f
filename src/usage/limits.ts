// The limits that apply to a repository: the configured ones (CCWEB_LIMIT_*), overridden per
// repository by an operator through the control API (`usage` record `limits:<repoKey>`; a null
// there lifts the configured limit for that repository).
import type { LimitsConfig } from '../config/limit-keys.js';
import type { Store, Tx } from '../store/types.js';
import { LIMIT_NAMES, limitsKey, type LimitName, type RepoLimitsRecord, type UsageLimits } from '../domain/usage-records.js';

export function configuredLimits(config: LimitsConfig): UsageLimits {
  const out: UsageLimits = {};
  if (config.limitTaskTokens !== undefined) out.taskTokens = config.limitTaskTokens;
  if (config.limitTaskTurns !== undefined) out.taskTurns = config.limitTaskTurns;
  if (config.limitTaskWallMinutes !== undefined) out.taskWallMs = config.limitTaskWallMinutes * 60_000;
  if (config.limitUserTasksPerDay !== undefined) out.userTasksPerDay = config.limitUserTasksPerDay;
  if (config.limitRepoTokensPerDay !== undefined) out.repoTokensPerDay = config.limitRepoTokensPerDay;
  return out;
}

type Reader = Pick<Store, 'get'> | Pick<Tx, 'get'>;

export function repoOverride(reader: Reader, repoKey: string): Promise<RepoLimitsRecord | undefined> {
  return reader.get<RepoLimitsRecord>('usage', limitsKey(repoKey));
}

/** The configured limits with the repository's override applied. */
export async function effectiveLimits(global: UsageLimits, reader: Reader, repoKey: string): Promise<UsageLimits> {
  const override = await repoOverride(reader, repoKey);
  if (!override) return { ...global };
  const out: UsageLimits = { ...global };
  for (const name of LIMIT_NAMES) {
    if (!(name in override.limits)) continue;
    const v = override.limits[name as LimitName];
    if (v === null || v === undefined) delete out[name];
    else out[name] = v;
  }
  return out;
}
