/**
 * A pull request's reviews and a review's line comments as Gitea has them, reduced to what
 * intake decides on (src/intake/review-tasks.ts). A review delivery names neither the review id nor its
 * line comments, so both are read here. Shapes checked against a real Gitea 1.26.3
 * (test/fixtures/gitea/webhooks/review_*.readback.json).
 */
import type { GiteaClient } from './gitea-client.js';

const PAGE = 50;
/** Reviews read at most (pages of 50): a pull request with more is read up to here, newest pages unread. */
const MAX_PAGES = 20;
/** Reviews with line comments searched for a reply's thread at most. */
const MAX_THREADS = 30;

export interface ReviewOnGitea {
  reviews(owner: string, repo: string, index: number): Promise<Array<{ id: number; body: string; state: string; user: { id: number; login: string }; submittedAt: string; htmlUrl: string; commitId: string; dismissed: boolean; commentsCount: number }>>;
  comments(owner: string, repo: string, index: number, reviewId: number): Promise<Array<{ id: number; body: string; user: { id: number; login: string }; path: string; position: number; originalPosition: number; diffHunk: string; htmlUrl: string; commitId: string; createdAt: string; updatedAt: string; reviewId: number }>>;
  pullRequestAuthor(owner: string, repo: string, index: number): Promise<string>;
  /**
   * A conversation comment's line, when it is a reply in a line thread (Gitea announces those as ordinary
   * PR comments, without file, line or hunk, and answers 204 to `GET …/issues/comments/{id}` of one). The
   * timeline does not list it (only its thread's review), so the reviews with line comments are read,
   * newest first, up to MAX_THREADS of them, until one holds it. Null when none does.
   */
  lineOf(owner: string, repo: string, index: number, commentId: number): Promise<Awaited<ReturnType<ReviewOnGitea['comments']>>[number] | null>;
}

export function reviewOnGitea(gitea: Pick<GiteaClient, 'listPullReviews' | 'listPullReviewComments' | 'getPullRequestAuthor'>): ReviewOnGitea {
  const self: ReviewOnGitea = {
    async reviews(owner, repo, index) {
      const out = [];
      for (let page = 1; page <= MAX_PAGES; page++) {
        const got = await gitea.listPullReviews(owner, repo, index, page, PAGE);
        out.push(...got);
        if (got.length < PAGE) break;
      }
      return out.map((r) => ({ id: r.id, body: r.body, state: r.state, user: { id: r.user.id, login: r.user.login }, submittedAt: r.submitted_at, htmlUrl: r.html_url, commitId: r.commit_id ?? '', dismissed: r.dismissed === true, commentsCount: r.comments_count ?? 0 }));
    },
    async comments(owner, repo, index, reviewId) {
      return (await gitea.listPullReviewComments(owner, repo, index, reviewId)).map((c) => ({
        id: c.id,
        body: c.body,
        user: { id: c.user.id, login: c.user.login },
        path: c.path,
        position: c.position,
        originalPosition: c.original_position,
        diffHunk: c.diff_hunk,
        htmlUrl: c.html_url,
        commitId: c.commit_id ?? '',
        createdAt: c.created_at,
        updatedAt: c.updated_at,
        reviewId: c.pull_request_review_id,
      }));
    },
    async pullRequestAuthor(owner, repo, index) {
      return (await gitea.getPullRequestAuthor(owner, repo, index)).login;
    },
    async lineOf(owner, repo, index, commentId) {
      const threads = (await self.reviews(owner, repo, index)).filter((r) => r.commentsCount > 0).sort((a, b) => b.id - a.id).slice(0, MAX_THREADS);
      for (const r of threads) {
        const found = (await self.comments(owner, repo, index, r.id)).find((c) => c.id === commentId);
        if (found !== undefined) return found;
      }
      return null;
    },
  };
  return self;
}
