// The provider rate-limit hold on a real store: what starts a hold, how long, sparse updates, and
// that a restart (a new instance over the same store) keeps it.
import { describe, expect, it } from 'vitest';
import { createProviderHold, isProviderLimitError } from '../../src/usage/provider-hold.js';
import { storeForTest } from '../support/test-runtime.js';

const T0 = Date.parse('2026-12-01T10:00:00Z');

describe('provider hold', () => {
  it('recognises the refusals Codex reports, and nothing else', () => {
    expect(isProviderLimitError({ codexErrorInfo: 'usageLimitExceeded' })).toBe(true);
    expect(isProviderLimitError({ codexErrorInfo: 'rateLimitExceeded' })).toBe(true);
    expect(isProviderLimitError({ codexErrorInfo: { responseTooManyFailedAttempts: { httpStatusCode: 429 } } })).toBe(true);
    expect(isProviderLimitError({ codexErrorInfo: { responseTooManyFailedAttempts: { httpStatusCode: 500 } } })).toBe(false);
    expect(isProviderLimitError({ codexErrorInfo: 'internalServerError' })).toBe(false);
    expect(isProviderLimitError(null)).toBe(false);
  });

  it('an exhausted window holds until its reset; a sparse update keeps the other window; a restart keeps the hold', async () => {
    const s = await storeForTest();
    let now = T0;
    const hold = await createProviderHold({ store: s, defaultBackoffMs: 60_000, now: () => now });
    hold.observeRateLimits({ rateLimits: { primary: { usedPercent: 40, windowDurationMins: 300, resetsAt: T0 / 1000 + 600 }, secondary: { usedPercent: 10, windowDurationMins: 10080, resetsAt: null } } });
    expect(hold.heldUntil()).toBeNull();
    hold.observeRateLimits({ rateLimits: { primary: { usedPercent: 100, windowDurationMins: 300, resetsAt: T0 / 1000 + 600 }, secondary: null } });
    expect(hold.heldUntil()).toBe(T0 + 600_000);
    expect(hold.status().rateLimits?.secondary?.usedPercent).toBe(10);
    // A turn refused meanwhile: the known reset, not the default backoff.
    expect(hold.classifyTurnError({ codexErrorInfo: 'usageLimitExceeded' })).toBe('provider_rate_limited');
    expect(hold.heldUntil()).toBe(T0 + 600_000);
    await hold.flush();
    const again = await createProviderHold({ store: s, defaultBackoffMs: 60_000, now: () => now });
    expect(again.status()).toMatchObject({ held: true, heldUntil: new Date(T0 + 600_000).toISOString(), reason: 'rate_limit_window_exhausted' });
    now = T0 + 600_001;
    expect(again.heldUntil()).toBeNull();
    expect(again.status().held).toBe(false);
    expect((await s.audit()).filter((e) => e.action === 'provider.hold')).toHaveLength(1);
  });

  it('a refusal without a known reset holds for the backoff; a later one extends it, an earlier end never shortens it', async () => {
    const s = await storeForTest();
    let now = T0;
    const hold = await createProviderHold({ store: s, defaultBackoffMs: 60_000, now: () => now });
    let woken = 0;
    hold.onChange(() => (woken += 1));
    hold.classifyTurnError({ codexErrorInfo: 'rateLimitExceeded' });
    expect(hold.heldUntil()).toBe(T0 + 60_000);
    now = T0 + 30_000;
    hold.classifyTurnError({ codexErrorInfo: 'rateLimitExceeded' });
    expect(hold.heldUntil()).toBe(T0 + 90_000);
    expect(hold.status().since).toBe(new Date(T0).toISOString());
    hold.observeRateLimits({ rateLimits: { primary: { usedPercent: 100, windowDurationMins: 5, resetsAt: (T0 + 45_000) / 1000 } } });
    expect(hold.heldUntil()).toBe(T0 + 90_000);
    await hold.flush();
    expect(woken).toBe(2);
  });
});
