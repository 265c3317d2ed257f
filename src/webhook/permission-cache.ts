// The commenter's write access is confirmed with Gitea, not taken from the payload. One
// comment thread can bring many mentions in a minute, so answers are cached briefly per repository
// and user; failures are never cached (the next mention asks again, and meanwhile fails closed).
// A revoked permission takes effect at most `ttlMs` later.
import type { RepoPermission } from './authorize-actor.js';

export type PermissionLookup = (owner: string, repo: string, login: string) => Promise<RepoPermission>;

export interface PermissionCacheOptions {
  /** Default 30 s. */
  ttlMs?: number;
  /** Entries kept at most (oldest dropped first). Default 10,000. */
  maxEntries?: number;
  now?: () => number;
}

export function cachedPermissionLookup(lookup: PermissionLookup, options: PermissionCacheOptions = {}): PermissionLookup {
  const ttlMs = options.ttlMs ?? 30_000;
  const maxEntries = options.maxEntries ?? 10_000;
  const now = options.now ?? Date.now;
  const cache = new Map<string, { permission: RepoPermission; expiresAt: number }>();
  return async (owner, repo, login) => {
    // Gitea logins and repository names are case-insensitive.
    const key = `${owner}/${repo}\u0000${login}`.toLowerCase();
    const hit = cache.get(key);
    if (hit !== undefined && hit.expiresAt > now()) return hit.permission;
    cache.delete(key);
    const permission = await lookup(owner, repo, login);
    cache.set(key, { permission, expiresAt: now() + ttlMs });
    while (cache.size > maxEntries) cache.delete(cache.keys().next().value!);
    return permission;
  };
}
