// The configuration keys of usage limits and provider rate-limit holds, kept apart from
// keys.ts so they merge as one block. Every limit is optional: unset means no limit.
import { z } from 'zod';
import type { KeySpec } from './keys.js';

function integer(min: number, max: number) {
  return z
    .union([z.number(), z.string().trim().regex(/^\d+$/).transform(Number)])
    .pipe(z.number().int().min(min).max(max));
}

export const LIMIT_KEYS = {
  limitTaskTokens: {
    env: 'CCWEB_LIMIT_TASK_TOKENS',
    schema: integer(1, 1_000_000_000_000),
    expect: 'a positive integer number of tokens',
    fix: 'Set it to the most tokens (input + output, as Codex counts them) one task may use, e.g. 2000000; a running task that crosses it is interrupted. Leave it unset for no limit.',
  },
  limitTaskTurns: {
    env: 'CCWEB_LIMIT_TASK_TURNS',
    schema: integer(1, 10_000),
    expect: 'a positive integer number of turns',
    fix: 'Set it to the most Codex turns one task may run (retries and follow-ups count), e.g. 10. Leave it unset for no limit.',
  },
  limitTaskWallMinutes: {
    env: 'CCWEB_LIMIT_TASK_WALL_MINUTES',
    schema: integer(1, 525_600),
    expect: 'a positive integer number of minutes',
    fix: 'Set it to the most minutes the agent may run for one task, summed over its turns, e.g. 60; a running task that crosses it is interrupted. Leave it unset for no limit (each turn still ends at CCWEB_TURN_TIMEOUT_MS).',
  },
  limitUserTasksPerDay: {
    env: 'CCWEB_LIMIT_USER_TASKS_PER_DAY',
    schema: integer(1, 1_000_000),
    expect: 'a positive integer number of tasks',
    fix: 'Set it to how many tasks one Gitea user may start per UTC day, e.g. 20; a mention over it is refused with one comment. Leave it unset for no limit.',
  },
  limitRepoTokensPerDay: {
    env: 'CCWEB_LIMIT_REPO_TOKENS_PER_DAY',
    schema: integer(1, 1_000_000_000_000),
    expect: 'a positive integer number of tokens',
    fix: 'Set it to the most tokens the tasks of one repository may use per UTC day, e.g. 20000000; once reached, new mentions there are refused with one comment until the next day. Leave it unset for no limit.',
  },
  providerBackoffSeconds: {
    env: 'CCWEB_PROVIDER_BACKOFF_SECONDS',
    schema: integer(1, 86_400),
    expect: 'an integer number of seconds from 1 to 86400',
    fix: 'Set it to how long the scheduler holds new work after the model provider answered 429 without saying when its limit resets, e.g. 300 (default).',
  },
} satisfies Record<string, KeySpec>;

export const LIMIT_DEFAULTS = {
  providerBackoffSeconds: 300,
};

export interface LimitsConfig {
  limitTaskTokens?: number;
  limitTaskTurns?: number;
  limitTaskWallMinutes?: number;
  limitUserTasksPerDay?: number;
  limitRepoTokensPerDay?: number;
  /** Unset → `LIMIT_DEFAULTS.providerBackoffSeconds`. */
  providerBackoffSeconds?: number;
}

/** The validated values of these keys, as `Config` fields (absent when unset). */
export function limitsConfigFrom(values: Record<string, unknown>): LimitsConfig {
  const out: LimitsConfig = {};
  for (const key of Object.keys(LIMIT_KEYS) as Array<keyof typeof LIMIT_KEYS>) {
    if (typeof values[key] === 'number') out[key] = values[key] as number;
  }
  return out;
}
