/**
 * A registered repository's owner/name on Gitea now, looked up by its id (issue 15: renames and
 * transfers), for task-executor's `currentRepository`. Null when the record has no usable id.
 */
import type { RepositoryRecord } from '../domain/records.js';
import type { GiteaClient } from './gitea-client.js';

/** The record's Gitea repository id, or null when it has none that Gitea could know. */
export function giteaRepoIdOf(repo: Pick<RepositoryRecord, 'repoId'> | Record<string, unknown>): number | null {
  const id = Number(repo['repoId']);
  return Number.isSafeInteger(id) && id > 0 ? id : null;
}

export function currentRepositoryOnGitea(gitea: Pick<GiteaClient, 'getRepositoryById'>): (repo: RepositoryRecord) => Promise<{ owner: string; name: string } | null> {
  return async (repo) => {
    const id = giteaRepoIdOf(repo);
    if (id === null) return null;
    const found = await gitea.getRepositoryById(id);
    return { owner: found.owner.login, name: found.name };
  };
}
