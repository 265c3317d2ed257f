/**
 * A registered repository's owner/name on Gitea now, looked up by its id (it follows renames and
 * transfers), for the task effects' `currentRepository`. Null when the record has no usable id.
 */
import type { RepositoryRecord } from '../domain/records.js';
import type { GiteaClient } from './gitea-client.js';

/** The record's Gitea repository id, or null when it has none that Gitea could know. */
export function giteaRepoIdOf(repo: { repoId?: unknown }): number | null {
  // A record read from disk is whatever an older version wrote: checked, not trusted.
  const id = Number(repo.repoId);
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

/** A repository's owner/name as Gitea has it now, by id (intake: the name a new repository is registered under). */
export function repositoryNameOnGitea(gitea: Pick<GiteaClient, 'getRepositoryById'>): (repoId: number) => Promise<{ owner: string; name: string }> {
  return async (repoId) => {
    const found = await gitea.getRepositoryById(repoId);
    return { owner: found.owner.login, name: found.name };
  };
}
