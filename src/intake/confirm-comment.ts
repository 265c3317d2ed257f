// A comment is what Gitea says it is, not what a payload says. Anyone holding
// the webhook secret — every repository admin in the documented set-up — can sign a payload naming
// any repository, any writer and any text; so before anything runs, intake reads the comment back
// (`GET /repos/{o}/{r}/issues/comments/{id}`) and compares. Pure: the lookup is the caller's.
//
// What must agree (fields named in `mismatch`):
// - `resource`: the comment is on that issue or pull request of that repository (Gitea scopes the
//   lookup to the repository and answers 404 for a comment of another one; its `issue_url` or
//   `pull_request_url` — the HTML URL of the issue or PR, the other one empty — names the number);
// - `author`: the same user, by Gitea id when the payload carries one, and by login;
// - `created`: the same creation time (Gitea never changes it), and the payload's `updated_at` is one
//   Gitea had (its creation time, or its latest edit): otherwise one real comment could be replayed
//   under made-up times as new comments (the dedup key holds `updated_at`);
// - `body`: the same text. A payload whose text is not Gitea's is refused rather than run with
//   Gitea's text: edits never trigger (classify.ts), so a comment edited before the service read it
//   back is treated like any other disagreement (post a new comment to ask again).
import { createHash } from 'node:crypto';
import type { CommentOnGitea } from '../gitea/comment-on-gitea.js';
import type { NormalizedComment } from '../webhook/normalize-comment.js';

/** What Gitea answered for the comment, reduced to what is compared (`issueUrl` is `''` on a pull request's comment, `pullRequestUrl` on an issue's). */
export type GiteaCommentFacts = CommentOnGitea;

/** The payload's side: the normalised comment, its text possibly replaced by its hash (pending-intake.ts). */
export interface PayloadComment {
  comment: Pick<NormalizedComment, 'repo' | 'resource' | 'actor'> & {
    comment: Pick<NormalizedComment['comment'], 'id' | 'createdAt' | 'updatedAt'>;
  };
  /** SHA-256 (hex) of the payload's comment text. */
  bodySha256: string;
}

export type MismatchField = 'id' | 'resource' | 'author' | 'created' | 'body';

export type ConfirmDecision = { confirmed: true } | { confirmed: false; mismatch: MismatchField[] };

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Seconds since the epoch, or NaN: Gitea serialises at second resolution, with or without an offset. */
function seconds(iso: string): number {
  return Math.floor(Date.parse(iso) / 1000);
}

/** The issue/PR number the URL names when its path ends in `/{owner}/{repo}/{issues|pulls}/{n}` (names in any case). */
function numberIn(url: string, owner: string, repo: string, segment: 'issues' | 'pulls'): number | null {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return null;
  }
  const parts = path.replace(/\/+$/, '').split('/');
  const n = parts.at(-1);
  if (parts.length < 5 || n === undefined || !/^[1-9][0-9]{0,15}$/.test(n)) return null;
  const [o, r, s] = parts.slice(-4, -1);
  if (s !== segment || o?.toLowerCase() !== owner.toLowerCase() || r?.toLowerCase() !== repo.toLowerCase()) return null;
  return Number(n);
}

export function compareWithGitea(payload: PayloadComment, gitea: GiteaCommentFacts): ConfirmDecision {
  const c = payload.comment;
  const mismatch: MismatchField[] = [];
  if (gitea.id !== c.comment.id) mismatch.push('id');

  const isPull = c.resource.kind === 'pull_request';
  const url = isPull ? gitea.pullRequestUrl : gitea.issueUrl;
  const other = isPull ? gitea.issueUrl : gitea.pullRequestUrl;
  if (other !== '' || numberIn(url, c.repo.owner, c.repo.name, isPull ? 'pulls' : 'issues') !== c.resource.number) mismatch.push('resource');

  const sameLogin = gitea.user.login.toLowerCase() === c.actor.login.toLowerCase();
  if (!sameLogin || (c.actor.id !== undefined && c.actor.id !== gitea.user.id)) mismatch.push('author');

  const created = seconds(gitea.createdAt);
  const claimedUpdate = seconds(c.comment.updatedAt);
  if (Number.isNaN(created) || seconds(c.comment.createdAt) !== created || (claimedUpdate !== created && claimedUpdate !== seconds(gitea.updatedAt))) {
    mismatch.push('created');
  }

  if (sha256Hex(gitea.body) !== payload.bodySha256) mismatch.push('body');
  return mismatch.length === 0 ? { confirmed: true } : { confirmed: false, mismatch };
}

/**
 * Whether a failed lookup is Gitea's clear "no" (it answered 404: no such comment, user or
 * repository here) or a passing failure (5xx, a timeout, Gitea down, and also 401/403 — the bot's
 * token or rights, which an operator fixes): only the first decides; the second keeps the comment
 * waiting (pending-intake.ts).
 */
export function isClearNo(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { status?: unknown }).status === 404;
}

/** A bounded, secret-free description of a lookup failure, for the pending record and the admin page. */
export function describeLookupError(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const e = error as { code?: unknown; status?: unknown; message?: unknown };
    const code = typeof e.code === 'string' ? e.code : 'error';
    const status = typeof e.status === 'number' ? ` ${e.status}` : '';
    const message = typeof e.message === 'string' ? `: ${e.message}` : '';
    return `${code}${status}${message}`.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
  }
  return String(error).slice(0, 200);
}
