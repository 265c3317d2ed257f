// Rate limits of the model provider. Codex reports the account's windows in
// `account/rateLimits/updated` (used %, reset time) and ends a turn refused by the provider with a
// `codexErrorInfo` naming it (`usageLimitExceeded`, `rateLimitExceeded`, or an HTTP 429 after its
// own retries). Either way the answer is the same: hold new claims (and due retries) until the
// reset, instead of starting turns that will be refused and burn each task's one retry. The hold is
// kept in the `control` collection so a restart does not forget it, and shown on the admin page,
// in `/readyz` and `/metrics`.
import type { Store } from '../store/types.js';

export const PROVIDER_HOLD_KEY = 'provider_hold';
export const PROVIDER_RATE_LIMITED = 'provider_rate_limited';

export interface RateLimitWindowView {
  usedPercent: number;
  windowDurationMins: number | null;
  /** ISO time, or null when Codex did not say. */
  resetsAt: string | null;
}

export interface RateLimitView {
  limitId: string | null;
  primary: RateLimitWindowView | null;
  secondary: RateLimitWindowView | null;
  rateLimitReachedType: string | null;
  observedAt: string;
}

/** `control` record `provider_hold`. */
export interface ProviderHoldRecord {
  key: typeof PROVIDER_HOLD_KEY;
  /** ISO time until which nothing new is claimed; null = no hold. */
  heldUntil: string | null;
  reason: string | null;
  since: string | null;
  rateLimits: RateLimitView | null;
  updatedAt: string;
}

export interface ProviderHoldStatus {
  held: boolean;
  heldUntil: string | null;
  reason: string | null;
  since: string | null;
  rateLimits: RateLimitView | null;
}

export interface ProviderHold {
  /** Feed every `account/rateLimits/updated` notification's params. */
  observeRateLimits(params: unknown): void;
  /**
   * A turn's error (`turn.error` of `turn/completed`): when the provider refused it, start (or extend)
   * the hold and return `provider_rate_limited`; otherwise null.
   */
  classifyTurnError(error: unknown): string | null;
  /** Epoch ms until which claims are held, or null. */
  heldUntil(now?: number): number | null;
  status(now?: number): ProviderHoldStatus;
  /** Listeners run when a hold starts or changes (wake the scheduler at its end). */
  onChange(listener: () => void): () => void;
  /** Resolves when every change so far is durable. */
  flush(): Promise<void>;
}

export interface ProviderHoldOptions {
  store: Store;
  /** Hold length when the provider refused a turn without a known reset time. */
  defaultBackoffMs: number;
  now?: () => number;
  logger?: { warn(obj: Record<string, unknown>, msg?: string): void };
}

function windowView(w: unknown): RateLimitWindowView | null {
  if (!w || typeof w !== 'object') return null;
  const r = w as Record<string, unknown>;
  if (typeof r['usedPercent'] !== 'number') return null;
  const resetsAt = typeof r['resetsAt'] === 'number' ? new Date(r['resetsAt'] * 1000).toISOString() : null;
  return { usedPercent: r['usedPercent'], windowDurationMins: typeof r['windowDurationMins'] === 'number' ? r['windowDurationMins'] : null, resetsAt };
}

/** True when an error of a failed turn says the provider refused for rate or usage limits. */
export function isProviderLimitError(error: unknown): boolean {
  if (!error || typeof error !== 'object') return false;
  const info = (error as { codexErrorInfo?: unknown }).codexErrorInfo;
  if (info === 'usageLimitExceeded' || info === 'rateLimitExceeded') return true;
  if (info && typeof info === 'object') {
    for (const v of Object.values(info as Record<string, unknown>)) {
      if (v && typeof v === 'object' && (v as { httpStatusCode?: unknown }).httpStatusCode === 429) return true;
    }
  }
  return false;
}

/** Reads the stored hold once, then answers from memory. */
export async function createProviderHold(options: ProviderHoldOptions): Promise<ProviderHold> {
  const { store } = options;
  const now = options.now ?? Date.now;
  const listeners = new Set<() => void>();
  let writes: Promise<unknown> = Promise.resolve();

  // The record as this process knows it: read from the store here, then updated synchronously (the
  // executor asks for the hold's end right after a turn was refused), written to the store in order
  // behind it.
  let state: ProviderHoldRecord | null = (await store.get<ProviderHoldRecord>('control', PROVIDER_HOLD_KEY)) ?? null;
  const current = (): ProviderHoldRecord | undefined => state ?? undefined;

  function save(patch: Partial<ProviderHoldRecord>): void {
    const prev = current();
    const next: ProviderHoldRecord = {
      key: PROVIDER_HOLD_KEY,
      heldUntil: prev?.heldUntil ?? null,
      reason: prev?.reason ?? null,
      since: prev?.since ?? null,
      rateLimits: prev?.rateLimits ?? null,
      ...patch,
      updatedAt: new Date(now()).toISOString(),
    };
    state = next;
    const started = patch.heldUntil !== undefined && patch.heldUntil !== null && patch.heldUntil !== prev?.heldUntil;
    writes = writes
      .then(() =>
        store.transact(async (tx) => {
          await tx.put('control', PROVIDER_HOLD_KEY, next);
          if (started) {
            await tx.appendAudit({
              action: 'provider.hold',
              actor: 'system:provider_hold',
              level: 'alert',
              errorCode: PROVIDER_RATE_LIMITED,
              metadata: { heldUntil: next.heldUntil, reason: next.reason },
            });
          }
        }),
      )
      .then(
        () => {
          if (started) listeners.forEach((l) => l());
        },
        (err: unknown) => options.logger?.warn({ err: err instanceof Error ? err.message : String(err) }, 'provider hold not stored'),
      );
  }

  /** The latest reset among exhausted windows (used ≥ 100 %), in the future; else null. */
  function exhaustedReset(view: RateLimitView | null, at: number): number | null {
    let until: number | null = null;
    for (const w of [view?.primary, view?.secondary]) {
      if (!w || w.usedPercent < 100 || !w.resetsAt) continue;
      const t = Date.parse(w.resetsAt);
      if (t > at && (until === null || t > until)) until = t;
    }
    return until;
  }

  function hold(until: number, reason: string): void {
    const prev = current();
    const prevUntil = prev?.heldUntil ? Date.parse(prev.heldUntil) : null;
    const at = now();
    if (prevUntil !== null && prevUntil >= until) return;
    save({ heldUntil: new Date(until).toISOString(), reason, since: prevUntil !== null && prevUntil > at ? prev!.since : new Date(at).toISOString() });
  }

  return {
    observeRateLimits(params) {
      const snap = (params as { rateLimits?: Record<string, unknown> } | null)?.rateLimits;
      if (!snap || typeof snap !== 'object') return;
      const prev = current()?.rateLimits ?? null;
      // Sparse updates: a missing window does not clear one seen before.
      const view: RateLimitView = {
        limitId: typeof snap['limitId'] === 'string' ? snap['limitId'] : prev?.limitId ?? null,
        primary: windowView(snap['primary']) ?? prev?.primary ?? null,
        secondary: windowView(snap['secondary']) ?? prev?.secondary ?? null,
        rateLimitReachedType: typeof snap['rateLimitReachedType'] === 'string' ? snap['rateLimitReachedType'] : null,
        observedAt: new Date(now()).toISOString(),
      };
      const until = exhaustedReset(view, now());
      // Codex sends this after every model response: store it only when the figures changed.
      const same = (a: RateLimitView | null, b: RateLimitView) => a !== null && JSON.stringify({ ...a, observedAt: '' }) === JSON.stringify({ ...b, observedAt: '' });
      if (!same(prev, view)) save({ rateLimits: view });
      if (until !== null) hold(until, 'rate_limit_window_exhausted');
    },
    classifyTurnError(error) {
      if (!isProviderLimitError(error)) return null;
      const at = now();
      const until = exhaustedReset(current()?.rateLimits ?? null, at) ?? at + options.defaultBackoffMs;
      hold(until, 'provider_refused_turn');
      return PROVIDER_RATE_LIMITED;
    },
    heldUntil(at = now()) {
      const until = current()?.heldUntil;
      if (!until) return null;
      const t = Date.parse(until);
      return t > at ? t : null;
    },
    status(at = now()) {
      const rec = current();
      const until = rec?.heldUntil ? Date.parse(rec.heldUntil) : null;
      const held = until !== null && until > at;
      return {
        held,
        heldUntil: held ? rec!.heldUntil : null,
        reason: held ? rec!.reason : null,
        since: held ? rec!.since : null,
        rateLimits: rec?.rateLimits ?? null,
      };
    },
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    flush: () => writes.then(() => undefined),
  };
}
