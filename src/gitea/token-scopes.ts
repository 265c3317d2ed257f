/**
 * Which scopes a Gitea access token has, where Gitea tells it.
 *
 * Gitea (1.26) has no endpoint that shows a token its own scopes under token auth, but every API
 * route group checks the token's scope category BEFORE it looks anything up, and a token that lacks
 * it gets (verified on a real Gitea 1.26.3, test/integration/gitea-token-scopes.test.ts):
 *
 *   403 {"message":"token does not have at least one of required scope(s), required=[write:admin], token scope=write:issue,read:repository", …}
 *
 * — Gitea's own words for the token's whole scope (as it stores it: normalised, so `write:x`
 * stands for read and write of x, and a token with write on every category is `all`). So the probe
 * asks, one category at a time, a write request aimed at something that cannot exist (an owner
 * named `ccweb-scope-probe--<random>`, which Gitea's user-name rules forbid; id 0, which no row
 * has), in the order least likely to be held first. The first refusal names every scope and ends
 * the probe (usually after one request). A token that is refused nothing holds write on every
 * category Gitea checks: `all`. A token is never refused anything for `misc` (no route checks it)
 * or `activitypub` (only with federation on): those come from Gitea's text only.
 *
 * If the refusal does not carry `token scope=` (an older Gitea), the probe falls back to the
 * answers themselves: a read request for every category whose write was refused (≤ 14 requests).
 *
 * Nothing here changes anything on Gitea: every request targets an object that does not exist,
 * and each would be harmless even if it did (delete a branch with a random name, a web hook / key /
 * comment with id 0, mark notification 0 read). The token is sent only to `baseUrl` (redirects are
 * not followed) and never appears in a result.
 */
import { randomBytes } from 'node:crypto';

export type ScopeCategory = 'activitypub' | 'admin' | 'issue' | 'misc' | 'notification' | 'organization' | 'package' | 'repository' | 'user';
export type ScopeLevel = 'read' | 'write';

/** Every category Gitea knows, in its own (alphabetical) order. */
export const SCOPE_CATEGORIES: readonly ScopeCategory[] = ['activitypub', 'admin', 'issue', 'misc', 'notification', 'organization', 'package', 'repository', 'user'];

export interface ProbeRequest {
  category: ScopeCategory;
  level: ScopeLevel;
  method: 'GET' | 'PATCH' | 'DELETE';
  /** Below `/api/v1`. */
  path: string;
}

/**
 * The requests, per category and level; `owner` is a name no Gitea account can have. Each route
 * was checked on Gitea 1.26.3 to sit behind exactly that category's scope check, which runs before
 * the owner/repository/organisation lookup. Write probes are listed least-likely-held first.
 */
export function probeRequests(owner: string): { write: ProbeRequest[]; read: Record<string, ProbeRequest> } {
  const o = encodeURIComponent(owner);
  const write: ProbeRequest[] = [
    { category: 'admin', level: 'write', method: 'DELETE', path: '/admin/hooks/0' },
    { category: 'package', level: 'write', method: 'DELETE', path: `/packages/${o}/generic/ccweb-scope-probe/0.0.0-probe` },
    { category: 'organization', level: 'write', method: 'DELETE', path: `/orgs/${o}/hooks/0` },
    { category: 'notification', level: 'write', method: 'PATCH', path: '/notifications/threads/0' },
    { category: 'user', level: 'write', method: 'DELETE', path: '/user/keys/0' },
    { category: 'repository', level: 'write', method: 'DELETE', path: `/repos/${o}/none/branches/ccweb-scope-probe` },
    { category: 'issue', level: 'write', method: 'DELETE', path: `/repos/${o}/none/issues/comments/0` },
  ];
  const read: Record<string, ProbeRequest> = {
    admin: { category: 'admin', level: 'read', method: 'GET', path: '/admin/hooks/0' },
    package: { category: 'package', level: 'read', method: 'GET', path: `/packages/${o}/generic/ccweb-scope-probe/0.0.0-probe` },
    organization: { category: 'organization', level: 'read', method: 'GET', path: `/orgs/${o}` },
    notification: { category: 'notification', level: 'read', method: 'GET', path: '/notifications/threads/0' },
    user: { category: 'user', level: 'read', method: 'GET', path: '/user' },
    repository: { category: 'repository', level: 'read', method: 'GET', path: `/repos/${o}/none` },
    issue: { category: 'issue', level: 'read', method: 'GET', path: `/repos/${o}/none/issues/comments/0` },
  };
  return { write, read };
}

export type Verdict =
  /** The scope check passed (the answer came from past it: 404 of the lookup, "user should be the site admin", …). */
  | 'held'
  /** Gitea's scope check refused the request for this very scope. */
  | 'missing'
  /** The answer says nothing about the scope (5xx, a route that is not there, a refusal for another scope). */
  | 'unknown'
  /** 401: Gitea does not accept the token at all. */
  | 'invalid-token';

export interface Classification {
  verdict: Verdict;
  /** The token's scopes as Gitea's refusal lists them (`token scope=…`), when it does. */
  tokenScopes?: string[];
  /** Gitea's message (or the start of its body). */
  message: string;
}

const SCOPE_REFUSAL = /token does not have at least one of required scope\(s\)(?:, required=|:\s*)\[([^\]]*)\](?:, token scope=(.*))?$/s;

/** Gitea's `message` from an API error body, else the body's start. */
export function giteaMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object' && typeof (parsed as { message?: unknown }).message === 'string') return (parsed as { message: string }).message;
  } catch {
    /* not JSON */
  }
  return body.trim().slice(0, 200);
}

const isJsonObject = (body: string): boolean => {
  try {
    const parsed: unknown = JSON.parse(body);
    return !!parsed && typeof parsed === 'object';
  } catch {
    return false;
  }
};

/** What one answer says about `level:category`. Pure. */
export function classifyProbe(category: ScopeCategory, level: ScopeLevel, status: number, body: string): Classification {
  const message = giteaMessage(body);
  if (status === 401) return { verdict: 'invalid-token', message };
  const refusal = status === 403 ? SCOPE_REFUSAL.exec(message) : null;
  if (refusal) {
    const required = (refusal[1] ?? '').split(/[\s,]+/).filter(Boolean);
    const told = refusal[2]?.trim();
    const tokenScopes = told ? told.split(',').map((s) => s.trim()).filter(Boolean) : undefined;
    const verdict: Verdict = required.includes(`${level}:${category}`) ? 'missing' : 'unknown';
    return tokenScopes ? { verdict, tokenScopes, message } : { verdict, message };
  }
  // Gitea's scope check itself failed: nothing learnt.
  if (status === 403 && /^(checking scope failed|parsing public resource scope failed)/.test(message)) return { verdict: 'unknown', message };
  // Past the scope check: refused for another reason (not a site admin, public-only token, …).
  if (status === 403) return { verdict: 'held', message };
  // The lookup's 404 is Gitea's JSON error; a route that does not exist answers plain text.
  if (status === 404) return { verdict: isJsonObject(body) ? 'held' : 'unknown', message };
  if ((status >= 200 && status < 300) || status === 405 || status === 409 || status === 422) return { verdict: 'held', message };
  return { verdict: 'unknown', message };
}

/** Gitea's scope names, deduplicated and sorted (`read:…` before `write:…`). */
export function normaliseScopes(scopes: readonly string[]): string[] {
  return [...new Set(scopes.map((s) => s.trim()).filter(Boolean))].sort();
}

/** The level a scope list grants on `category` (write implies read; `all` is write on everything). */
export function scopeLevel(scopes: readonly string[], category: ScopeCategory): ScopeLevel | null {
  if (scopes.includes('all') || scopes.includes(`write:${category}`)) return 'write';
  if (scopes.includes(`read:${category}`)) return 'read';
  return null;
}

export interface ProbeObservation {
  request: ProbeRequest;
  status: number;
  classification: Classification;
}

export type TokenScopesResult =
  | {
      ok: true;
      /** As Gitea names them, e.g. `['read:repository', 'write:issue']`, or `['all']`. */
      scopes: string[];
      /** The token may do everything its user may. */
      all: boolean;
      detail: string;
      /** `gitea`: Gitea's own text listed the scopes; `probes`: inferred from which requests were refused. */
      source: 'gitea' | 'probes';
      /** How many requests the probe sent. */
      requests: number;
    }
  /** `invalidToken`: Gitea answered 401, it does not accept the token at all. */
  | { ok: false; reason: string; invalidToken?: true };

const describe = (o: ProbeObservation) => `${o.request.method} /api/v1${o.request.path} → ${o.status}`;

/**
 * The result from the answers so far. Pure. `observations` are in the order sent; the probe stops
 * at the first that carries Gitea's list of the token's scopes or says the token is invalid.
 */
export function summariseProbes(observations: readonly ProbeObservation[]): TokenScopesResult {
  const requests = observations.length;
  const invalid = observations.find((o) => o.classification.verdict === 'invalid-token');
  if (invalid) return { ok: false, invalidToken: true, reason: `Gitea does not accept the token (HTTP 401: ${invalid.classification.message}; ${describe(invalid)})` };
  const told = observations.find((o) => o.classification.tokenScopes);
  if (told?.classification.tokenScopes) {
    const scopes = normaliseScopes(told.classification.tokenScopes);
    return {
      ok: true,
      scopes,
      all: scopes.includes('all'),
      detail: `Gitea says: token scope=${told.classification.tokenScopes.join(',')} (refusing ${told.request.level}:${told.request.category} to ${describe(told)})`,
      source: 'gitea',
      requests,
    };
  }
  if (observations.length > 0 && observations.every((o) => o.classification.verdict === 'unknown')) {
    const first = observations[0]!;
    return { ok: false, reason: `Gitea's answers say nothing about the token's scopes (${describe(first)}: ${first.classification.message})` };
  }
  const verdict = (c: ScopeCategory, l: ScopeLevel) => observations.find((o) => o.request.category === c && o.request.level === l)?.classification.verdict;
  const levelOf = (c: ScopeCategory): ScopeLevel | null | 'unknown' => {
    const w = verdict(c, 'write');
    const r = verdict(c, 'read');
    if (w === 'held') return 'write';
    if (w === 'missing' && r === 'held') return 'read';
    if (w === 'missing' && r === 'missing') return null;
    return 'unknown';
  };
  const levels = new Map(SCOPE_CATEGORIES.map((c) => [c, levelOf(c)] as const));
  const probed = [...new Set(observations.map((o) => o.request.category))];
  const unknown = probed.filter((c) => levels.get(c) === 'unknown');
  if (probed.length > 0 && probed.every((c) => levels.get(c) === 'write')) {
    return {
      ok: true,
      scopes: ['all'],
      all: true,
      detail: `no request was refused for want of a scope (${probed.map((c) => `write:${c}`).join(', ')} all held): the token has write on every category Gitea checks, i.e. all`,
      source: 'probes',
      requests,
    };
  }
  const scopes = normaliseScopes(probed.flatMap((c) => {
    const l = levels.get(c);
    return l === 'read' || l === 'write' ? [`${l}:${c}`] : [];
  }));
  const none = probed.filter((c) => levels.get(c) === null);
  return {
    ok: true,
    scopes,
    all: false,
    detail:
      `from which requests Gitea refused (its refusals do not list the token's scopes): ${scopes.length ? scopes.join(', ') : 'no scope'}` +
      (none.length ? `; none of ${none.join(', ')}` : '') +
      (unknown.length ? `; unknown: ${unknown.join(', ')}` : '') +
      '; misc and activitypub cannot be probed',
    source: 'probes',
    requests,
  };
}

export interface ProbeTokenScopesOptions {
  /** Gitea root URL (with or without `/api/v1`). */
  baseUrl: string;
  token: string;
  fetch?: typeof globalThis.fetch;
  /** Per request. Default 10 000 ms. */
  timeoutMs?: number;
}

function apiRoot(u: string): string {
  const trimmed = u.replace(/\/+$/, '');
  return trimmed.endsWith('/api/v1') ? trimmed : `${trimmed}/api/v1`;
}

/** Asks Gitea, without changing anything, which scopes `token` has. Never throws. */
export async function probeTokenScopes(options: ProbeTokenScopesOptions): Promise<TokenScopesResult> {
  const { token } = options;
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const redact = (s: string): string => (token ? s.split(token).join('[REDACTED]') : s);
  if (!token) return { ok: false, reason: 'no token to probe' };
  let root: string;
  try {
    root = new URL(apiRoot(options.baseUrl)).toString().replace(/\/+$/, '');
  } catch {
    return { ok: false, reason: redact(`not a URL: ${options.baseUrl}`) };
  }
  const owner = `ccweb-scope-probe--${randomBytes(4).toString('hex')}`;
  const { write, read } = probeRequests(owner);
  const observations: ProbeObservation[] = [];

  const send = async (request: ProbeRequest): Promise<ProbeObservation> => {
    const res = await doFetch(`${root}${request.path}`, {
      method: request.method,
      headers: { Authorization: `token ${token}`, Accept: 'application/json', 'User-Agent': 'ccweb-gitea token-scope probe' },
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = await res.text();
    const classification = classifyProbe(request.category, request.level, res.status, redact(body));
    return { request, status: res.status, classification };
  };

  try {
    for (const w of write) {
      const o = await send(w);
      observations.push(o);
      if (o.classification.verdict === 'invalid-token' || o.classification.tokenScopes) break;
      if (o.classification.verdict !== 'held') {
        const r = read[w.category];
        if (!r) continue;
        const ro = await send(r);
        observations.push(ro);
        if (ro.classification.verdict === 'invalid-token' || ro.classification.tokenScopes) break;
      }
    }
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    const why = err?.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : [err?.message, err?.cause?.code ?? err?.cause?.message].filter(Boolean).join(': ');
    return { ok: false, reason: redact(`could not ask Gitea at ${root}: ${why || String(e)}`) };
  }
  const result = summariseProbes(observations);
  return result.ok ? { ...result, detail: redact(result.detail) } : { ...result, reason: redact(result.reason) };
}

export interface TokenAdvice {
  /** fail: the service cannot do its work with this token; warn: it works, with a gap or more rights than needed. */
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  fix?: string;
}
/** The former name (the advice on the agent's token only warned). */
export type AgentTokenAdvice = TokenAdvice;

const AGENT_FIX =
  "Create a token with only read:repository and write:issue (Gitea: Settings → Applications → Generate token → Select permissions: repository Read, issue Read and Write) and set CCWEB_GITEA_MCP_TOKEN to it.";

/**
 * Whether the agent's token (CCWEB_GITEA_MCP_TOKEN, else the bot's) lets it work and is as narrow as
 * it should be: read:repository and write:issue (read:user and public-only are fine too). Less, and
 * the agent cannot read the repository or answer: a failure. More makes the gate the only wall
 * between the agent and those rights: a warning. Pure.
 */
export function agentTokenAdvice(scopes: readonly string[]): TokenAdvice {
  const fine = new Set(['read:repository', 'write:issue', 'read:issue', 'read:user', 'public-only']);
  const extra = normaliseScopes(scopes).filter((s) => !fine.has(s));
  const lacks: string[] = [];
  if (!scopeLevel(scopes, 'repository')) lacks.push('read:repository');
  if (scopeLevel(scopes, 'issue') !== 'write') lacks.push('write:issue');
  if (lacks.length > 0) {
    return {
      status: 'fail',
      detail:
        `the agent's token lacks ${lacks.join(' and ')}: the agent cannot ${lacks.includes('read:repository') ? 'read the repository' : ''}${lacks.length === 2 ? ' or ' : ''}${lacks.includes('write:issue') ? 'answer on the issue' : ''}` +
        (extra.length ? `; and it holds ${extra.join(', ')}, which the agent does not need` : ''),
      fix: AGENT_FIX,
    };
  }
  if (extra.length > 0) {
    return {
      status: 'warn',
      detail: `the agent's token holds ${extra.join(', ')} beyond read:repository and write:issue: the gate is then the only wall between the agent and ${extra.includes('all') ? 'everything its user may do' : 'those rights'}`,
      fix: AGENT_FIX,
    };
  }
  return { status: 'ok', detail: `the agent's token holds ${normaliseScopes(scopes).join(', ')}: no more than the agent needs` };
}

const BOT_FIX =
  'Create a token for the bot with write:issue, read:repository, read:user (and write:repository to publish changes) — Gitea: Settings → Applications → Generate token — and set CCWEB_GITEA_TOKEN to it (docs/getting-started.md, step 4).';

/**
 * Whether the bot's token (CCWEB_GITEA_TOKEN) lets the service work: write:issue (the receipt and
 * the answer), read:repository (clone and fetch), read:user (`GET /api/v1/user` at start, which serve
 * refuses to pass without it). Without write:repository the service answers but cannot publish the
 * agent's changes (each is kept and its task fails): a warning, unless delivery is off. Pure.
 */
export function botTokenAdvice(scopes: readonly string[], delivery: 'pull_request' | 'branch' | 'off'): TokenAdvice {
  const lacks: string[] = [];
  if (scopeLevel(scopes, 'issue') !== 'write') lacks.push('write:issue (to post the receipt and the answer)');
  if (!scopeLevel(scopes, 'repository')) lacks.push('read:repository (to clone the repository)');
  if (!scopeLevel(scopes, 'user')) lacks.push('read:user (serve asks GET /api/v1/user at start and stops without it)');
  if (lacks.length > 0) return { status: 'fail', detail: `the bot's token lacks ${lacks.join(', ')}: the service cannot work with it`, fix: BOT_FIX };
  if (delivery !== 'off' && scopeLevel(scopes, 'repository') !== 'write') {
    return {
      status: 'warn',
      detail: `the bot's token lacks write:repository: with CCWEB_DELIVERY=${delivery} the agent's changes cannot be pushed (each is kept, and its task fails with push_rejected)`,
      fix: 'give the bot a token with write:repository as well, or set CCWEB_DELIVERY=off',
    };
  }
  return { status: 'ok', detail: "the bot's token holds what the service needs" };
}
