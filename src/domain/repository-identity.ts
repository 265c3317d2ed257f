// Which stored repository a name stands for. Pure.
//
// Gitea compares owner and repository names without regard to letter case (it keeps `lower_name`
// next to the name and looks repositories up by it), so `ACME/Widget` and `acme/widget` are one
// repository. Our keys (`default:<owner>/<name>`, and the resourceKey/sessionKey/trigger keys built
// on it) are case-sensitive store keys, written in whatever case the first payload used. Keys are
// therefore NOT lowercased: existing records, tasks, sessions, leases and triggers written in mixed
// case (Gitea keeps a name's case, `Acme/Widget` is an ordinary repository) would be orphaned. A name
// is instead resolved to the record already stored for it, compared case-insensitively, and that
// record's key and owner/name are used from then on: the stored form is the canonical one.
import type { RepositoryRecord } from './records.js';

/** The form two names are compared in. Gitea's names are ASCII (isSafeName), so this is Gitea's rule. */
export function foldName(value: string): string {
  return value.toLowerCase();
}

/** Whether two repoKeys (or owner/name pairs) name the same repository by Gitea's rule. */
export function sameRepoKey(a: string, b: string): boolean {
  return a === b || foldName(a) === foldName(b);
}

/**
 * Every record whose key names the same repository as `repoKey`, the one that stands for it first:
 * the record with the same Gitea id (when one is given), then the earliest registered, then by key
 * (deterministic). More than one only in data written before names were compared this way (a case
 * variant registered a second record); those keep working under their own keys.
 */
export function matchingRepositories<R extends Pick<RepositoryRecord, 'repoKey' | 'registeredAt'> & { repoId?: unknown }>(
  repoKey: string,
  records: Iterable<R>,
  repoId?: number,
): R[] {
  const folded = foldName(repoKey);
  const found: R[] = [];
  for (const r of records) if (foldName(r.repoKey) === folded) found.push(r);
  const rank = (r: R) => (repoId !== undefined && r.repoId === repoId ? 0 : 1);
  return found.sort(
    (a, b) =>
      rank(a) - rank(b) ||
      String(a.registeredAt).localeCompare(String(b.registeredAt)) ||
      (a.repoKey < b.repoKey ? -1 : a.repoKey > b.repoKey ? 1 : 0),
  );
}

/** The record `repoKey` stands for (see matchingRepositories), or undefined when none is stored. */
export function canonicalRepository<R extends Pick<RepositoryRecord, 'repoKey' | 'registeredAt'> & { repoId?: unknown }>(
  repoKey: string,
  records: Iterable<R>,
  repoId?: number,
): R | undefined {
  return matchingRepositories(repoKey, records, repoId)[0];
}

/** A repository is refused while any record standing for it is disabled (an old case variant included). */
export function anyDisabled(records: ReadonlyArray<Pick<RepositoryRecord, 'status'>>): boolean {
  return records.some((r) => r.status === 'disabled');
}

/**
 * `key` with its repoKey prefix replaced by `canonicalRepoKey` when that prefix names the same
 * repository (resourceKey `<repoKey>:<kind>:<n>`, trigger `<repoKey>:comment:…`); otherwise unchanged.
 */
export function rekey(key: string, repoKey: string, canonicalRepoKey: string): string {
  if (!key.startsWith(repoKey) || !sameRepoKey(repoKey, canonicalRepoKey)) return key;
  return canonicalRepoKey + key.slice(repoKey.length);
}

/**
 * The record an operator means by `repoKey` (control API `/repos/:repoKey/…`): the record stored
 * under exactly that key, else the one standing for it in another letter case.
 */
export function findRepository<R extends Pick<RepositoryRecord, 'repoKey' | 'registeredAt'> & { repoId?: unknown }>(
  repoKey: string,
  records: Iterable<R>,
): R | undefined {
  const matches = matchingRepositories(repoKey, records);
  return matches.find((r) => r.repoKey === repoKey) ?? matches[0];
}
