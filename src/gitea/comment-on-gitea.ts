/**
 * One comment as Gitea has it (`GET /repos/{o}/{r}/issues/comments/{id}`), reduced to what intake
 * compares with a webhook payload (src/intake/confirm-comment.ts). Gitea scopes
 * the lookup to the repository: a comment of another repository is a 404 here. `issue_url` and
 * `pull_request_url` are HTML URLs, one of them empty (checked against a real Gitea 1.26.3 in
 * test/integration/comment-confirmation-real-gitea.test.ts).
 */
import type { GiteaClient } from './gitea-client.js';

export interface CommentOnGitea {
  id: number;
  body: string;
  user: { id: number; login: string };
  issueUrl: string;
  pullRequestUrl: string;
  createdAt: string;
  updatedAt: string;
}

export function commentOnGitea(gitea: Pick<GiteaClient, 'getComment'>): (owner: string, repo: string, id: number) => Promise<CommentOnGitea> {
  return async (owner, repo, id) => {
    const c = await gitea.getComment(owner, repo, id);
    return {
      id: c.id,
      body: c.body,
      user: { id: c.user.id, login: c.user.login },
      issueUrl: typeof c.issue_url === 'string' ? c.issue_url : '',
      pullRequestUrl: typeof c.pull_request_url === 'string' ? c.pull_request_url : '',
      createdAt: c.created_at,
      updatedAt: c.updated_at,
    };
  };
}
