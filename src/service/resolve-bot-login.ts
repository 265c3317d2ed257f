/**
 * The Gitea login the bot posts as: configured, or learned from the token (`GET /user`). A token
 * Gitea rejects stops the start (OperatorError, from probeGitea); an unreachable Gitea does not:
 * with CCWEB_BOT_LOGIN set the service starts and reports not-ready, without it the service waits
 * and retries (one log line per attempt) until Gitea answers or it is told to stop.
 */
import type { Config } from '../config/index.js';
import type { GiteaClient } from '../gitea/gitea-client.js';
import type { Logger } from '../observability/logger.js';
import { probeGitea, type GiteaProbe } from './startup-checks.js';

/** Start-up was cancelled by a signal before the service was up. */
export class StartAborted extends Error {
  override readonly name = 'StartAborted';
  constructor() {
    super('start-up aborted');
  }
}

export type BotLoginDecision =
  | { kind: 'use'; login: string; warn?: 'token_is_another_user' | 'gitea_unreachable' }
  | { kind: 'retry'; delayMs: number };

/** What one answer (or no answer) of Gitea means for the bot login; `attempt` counts from 1. */
export function botLoginDecision(probe: GiteaProbe, configured: string | undefined, attempt: number): BotLoginDecision {
  if (probe.ok) {
    const mismatch = Boolean(configured) && probe.login.toLowerCase() !== configured!.toLowerCase();
    return { kind: 'use', login: configured ?? probe.login, ...(mismatch ? { warn: 'token_is_another_user' as const } : {}) };
  }
  if (configured) return { kind: 'use', login: configured, warn: 'gitea_unreachable' };
  // 1 s, 2 s, 4 s … capped at 30 s.
  return { kind: 'retry', delayMs: Math.min(30_000, 1000 * 2 ** Math.min(attempt - 1, 5)) };
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

export async function resolveBotLogin(config: Config, gitea: GiteaClient, logger: Logger, signal: AbortSignal | undefined): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const probe = await probeGitea(gitea, config.giteaUrl);
    const decision = botLoginDecision(probe, config.botLogin, attempt);
    if (decision.kind === 'use') {
      if (decision.warn === 'token_is_another_user' && probe.ok) {
        logger.warn({ tokenLogin: probe.login, botLogin: config.botLogin }, 'the token belongs to another user than CCWEB_BOT_LOGIN: replies will be posted as the token user and not be recognised as the bot');
      }
      if (decision.warn === 'gitea_unreachable' && !probe.ok) {
        logger.warn({ giteaUrl: config.giteaUrl, error: probe.reason }, 'Gitea is not reachable at start [CCWEB_GITEA_URL]: starting anyway, /readyz reports not ready until it answers');
      }
      return decision.login;
    }
    logger.error(
      { giteaUrl: config.giteaUrl, error: probe.ok ? undefined : probe.reason, attempt, retryInMs: decision.delayMs },
      'Gitea is not reachable [CCWEB_GITEA_URL]: the bot login is learned from it; retrying (set CCWEB_BOT_LOGIN to start without Gitea, check the URL and that Gitea runs)',
    );
    await sleep(decision.delayMs, signal);
    if (signal?.aborted) throw new StartAborted();
  }
}
