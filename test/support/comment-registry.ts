// A stand-in for Gitea's comment API (`GET /repos/{o}/{r}/issues/comments/{id}`) for tests and
// benches whose Gitea is a function (the intake harness, the API harness, the intake benches): intake
// confirms every acting comment with Gitea, so these harnesses' "Gitea"
// holds each comment the test posts — as if the user had written it there — learnt from the
// delivery before intake sees it. A test that sends a forged payload registers nothing for it
// (`learn: false`, or its own `commentOnGitea`); tests of the real comparison use a real Gitea
// (test/integration/comment-confirmation-real-gitea.test.ts).
import type { GiteaCommentFacts } from '../../src/intake/confirm-comment.js';
import type { IntakeRequest } from '../../src/intake/intake.js';
import { getHeader } from '../../src/webhook/headers.js';
import { extractPayload } from '../../src/webhook/verify-signature.js';

export interface CommentRegistry {
  /** Records the comment a delivery carries (ignored when it carries none). */
  learn(request: Pick<IntakeRequest, 'rawBody' | 'headers' | 'contentType'>): void;
  /** Adds or replaces a comment by hand. */
  put(owner: string, repo: string, facts: GiteaCommentFacts): void;
  /** Gitea's answer: the comment, or a 404-like error. */
  lookup(owner: string, repo: string, id: number): Promise<GiteaCommentFacts>;
}

export function notFound(): Error {
  return Object.assign(new Error('comment not found'), { code: 'gitea_not_found', status: 404 });
}

export function createCommentRegistry(): CommentRegistry {
  const comments = new Map<string, GiteaCommentFacts>();
  const keyOf = (owner: string, repo: string, id: number) => `${owner}/${repo}#${id}`.toLowerCase();
  return {
    learn(request) {
      const extracted = extractPayload(request.rawBody, request.contentType ?? getHeader(request.headers, 'content-type'));
      if ('error' in extracted) return;
      let p: any;
      try {
        p = JSON.parse(extracted.json.toString('utf8'));
      } catch {
        return;
      }
      const c = p?.comment;
      const owner = p?.repository?.owner?.login;
      const repo = p?.repository?.name;
      if (typeof c?.id !== 'number' || typeof owner !== 'string' || typeof repo !== 'string' || typeof p?.issue?.number !== 'number') return;
      const html = `http://gitea.test/${owner}/${repo}/${p.is_pull ? 'pulls' : 'issues'}/${p.issue.number}`;
      comments.set(keyOf(owner, repo, c.id), {
        id: c.id,
        body: String(c.body ?? ''),
        user: { id: Number(p?.sender?.id ?? c?.user?.id ?? 0), login: String(p?.sender?.login ?? '') },
        issueUrl: p.is_pull ? '' : html,
        pullRequestUrl: p.is_pull ? html : '',
        createdAt: String(c.created_at ?? ''),
        updatedAt: String(c.updated_at ?? ''),
      });
    },
    put(owner, repo, facts) {
      comments.set(keyOf(owner, repo, facts.id), facts);
    },
    async lookup(owner, repo, id) {
      const found = comments.get(keyOf(owner, repo, id));
      if (found === undefined) throw notFound();
      return found;
    },
  };
}

/** `intake` with every delivery's comment learnt by `registry` first. */
export function learningIntake<T extends { handle(request: IntakeRequest): Promise<unknown> }>(intake: T, registry: CommentRegistry): Pick<T, 'handle'> {
  return {
    handle: ((request: IntakeRequest) => {
      registry.learn(request);
      return intake.handle(request);
    }) as T['handle'],
  };
}
