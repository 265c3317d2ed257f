// A normalised comment re-keyed to the repository record already stored for its name (the
// rule is in src/domain/repository-identity.ts). A payload naming `ACME/Widget` for
// the stored `default:acme/widget` becomes a comment on `default:acme/widget`: same disabled
// status, limits, lease, session and comment-trigger key. A name nothing is stored for keeps the
// payload's form and registers the repository under it.
//
// Called twice per delivery: before authorisation (to spare the lookup for a disabled repository or a
// known comment), and again inside the write transaction, where it is final: a case variant
// registered by a concurrent delivery in between is seen there, so two variants racing to register
// still make one record.
import { matchingRepositories, rekey } from '../domain/repository-identity.js';
import type { RepositoryRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';
import type { NormalizedComment } from '../webhook/normalize-comment.js';

export interface ResolvedComment {
  comment: NormalizedComment;
  /** Every stored record for the comment's repository, the canonical one first (usually one, or none). */
  records: RepositoryRecord[];
}

/**
 * Repositories are few (one record per repository ever followed) and this runs only for comments that
 * passed the signature and the mention filter, so a scan of the hot records is cheap enough (≈ 4 µs
 * with 10 repositories, 60 µs with 1,000); an index would need a stored folded key, which existing
 * records do not have.
 */
export async function resolveRepository(reader: Pick<Store, 'list'>, c: NormalizedComment): Promise<ResolvedComment> {
  const records = matchingRepositories(c.repoKey, await reader.list<RepositoryRecord>('repositories'), c.repo.id);
  const canonical = records[0];
  if (canonical === undefined || canonical.repoKey === c.repoKey) return { comment: c, records };
  return { comment: canonicalComment(c, canonical), records };
}

/** `c` under `record`'s key and owner/name (the stored, canonical form). Pure. */
export function canonicalComment(c: NormalizedComment, record: Pick<RepositoryRecord, 'repoKey' | 'owner' | 'name'>): NormalizedComment {
  return {
    ...c,
    repoKey: record.repoKey,
    resourceKey: rekey(c.resourceKey, c.repoKey, record.repoKey),
    repo: { ...c.repo, owner: record.owner, name: record.name, fullName: `${record.owner}/${record.name}` },
  };
}
