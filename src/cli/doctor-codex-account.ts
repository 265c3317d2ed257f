// `doctor`'s `codex-account` check: is Codex logged in (`account/read`), and what does the
// account's rate limit say (`account/rateLimits/read`)? A separate check from `codex` (which proves
// the app-server starts) so a login problem reads as one.
import { CodexAppServerConnection, errorText } from '../codex/jsonrpc-connection.js';
import type { GetAccountResponse } from '../codex/protocol/ts/v2/GetAccountResponse.js';
import type { GetAccountRateLimitsResponse } from '../codex/protocol/ts/v2/GetAccountRateLimitsResponse.js';
import type { RateLimitWindow } from '../codex/protocol/ts/v2/RateLimitWindow.js';

export interface AccountCheckResult {
  status: 'ok' | 'warn' | 'fail';
  check: 'codex-account';
  detail: string;
  fix?: string;
}

function windowText(name: string, w: RateLimitWindow | null | undefined): string | null {
  if (!w) return null;
  const reset = w.resetsAt ? `, resets ${new Date(w.resetsAt * 1000).toISOString().slice(0, 16).replace('T', ' ')} UTC` : '';
  return `${name} ${w.usedPercent}% used${reset}`;
}

/** The account as a short phrase; never an email address (doctor output ends up in tickets). */
function accountText(a: GetAccountResponse['account']): string {
  if (!a) return 'no account';
  if (a.type === 'chatgpt') return `ChatGPT account (plan ${a.planType})`;
  if (a.type === 'apiKey') return 'API key';
  return `${a.type} credentials`;
}

/** `quote`: how text from Codex may be shown (doctor.ts: withheld whole when it holds a secret's value). */
export async function checkCodexAccount(command: string, env: Readonly<Record<string, string | undefined>>, timeoutMs: number, quote: (text: string) => string): Promise<AccountCheckResult> {
  const conn = new CodexAppServerConnection({ command, env: { ...env }, probes: false, initializeTimeoutMs: timeoutMs });
  try {
    await conn.start();
    const acc = (await conn.request('account/read', { refreshToken: false }, { timeoutMs })) as GetAccountResponse;
    if (acc.account === null && acc.requiresOpenaiAuth) {
      return {
        status: 'fail',
        check: 'codex-account',
        detail: 'Codex is not logged in and its model provider needs OpenAI credentials',
        fix: 'log in as the service user with the same CODEX_HOME: `codex login` (or `codex login --with-api-key`), see docs/operations.md#codex',
      };
    }
    const who = acc.account === null ? 'no login needed (the configured model provider does not use OpenAI credentials)' : `logged in: ${quote(accountText(acc.account))}`;
    let limits: string;
    let exhausted: string | null = null;
    try {
      const rl = (await conn.request('account/rateLimits/read', undefined, { timeoutMs })) as GetAccountRateLimitsResponse;
      const parts = [windowText('primary', rl.rateLimits.primary), windowText('secondary', rl.rateLimits.secondary)].filter((p): p is string => p !== null);
      limits = parts.length ? `rate limits: ${quote(parts.join('; '))}` : 'rate limits: none reported';
      for (const w of [rl.rateLimits.primary, rl.rateLimits.secondary]) if (w && w.usedPercent >= 100) exhausted = limits;
    } catch (err) {
      limits = `rate limits: not available (${quote(errorText(err).replace(/^account\/rateLimits\/read: /, '').slice(0, 120))})`;
    }
    if (exhausted) {
      return { status: 'warn', check: 'codex-account', detail: `${who}; ${exhausted}`, fix: 'the service holds new tasks until the reset; wait, or raise the plan' };
    }
    return { status: 'ok', check: 'codex-account', detail: `${who}; ${limits}` };
  } catch (err) {
    return {
      status: 'fail',
      check: 'codex-account',
      detail: `account/read failed: ${quote(errorText(err).slice(0, 200))}`,
      fix: 'fix the codex check first; then log in with `codex login` as the service user',
    };
  } finally {
    await conn.close({ graceMs: 200, termMs: 1000 }).catch(() => undefined);
  }
}
