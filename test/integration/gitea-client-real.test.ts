// The service's Gitea client (src/gitea/gitea-client.ts) against a REAL Gitea 1.26: every method, with the
// bot's token and documented scopes, and how real refusals map to our error codes. (Faults a real Gitea
// cannot produce on cue — timeouts, dropped connections, 5xx on a healthy path — are in
// test/unit/gitea-client.test.ts against the stand-in.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGiteaClient, GiteaError, type GiteaClient } from '../../src/gitea/gitea-client.js';
import { reviewOnGitea } from '../../src/gitea/review-on-gitea.js';
import { GiteaWebSession } from '../support/real-gitea/web-session.js';
import { startSeededGitea, type SeededGitea } from '../support/real-gitea/index.js';

let g: SeededGitea;
let bot: GiteaClient;

beforeAll(async () => {
  g = await startSeededGitea();
  bot = createGiteaClient({ baseUrl: g.url, token: g.users.bot.token, retries: 0 });
}, 600_000);

afterAll(async () => {
  await g?.close();
});

async function failure(p: Promise<unknown>): Promise<GiteaError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof GiteaError) return e;
    throw e;
  }
  throw new Error('expected a GiteaError');
}

describe('the Gitea client against a real Gitea', () => {
  it('getCurrentUser: the bot', async () => {
    expect(await bot.getCurrentUser()).toMatchObject({ login: 'ccweb-bot' });
  });

  it('createIssueComment, getComment, listIssueComments (since/before inclusive, whole seconds)', async () => {
    const before = new Date(Date.now() - 1_000);
    const c = await bot.createIssueComment('acme', 'widget', g.issueNumber, 'from the client <b>&</b>');
    expect(c).toMatchObject({ body: 'from the client <b>&</b>', user: { login: 'ccweb-bot' } });
    expect(c.html_url).toBe(`${g.url}/acme/widget/issues/${g.issueNumber}#issuecomment-${c.id}`);
    expect(await bot.getComment('acme', 'widget', c.id)).toMatchObject({ id: c.id, body: c.body });
    const all = await bot.listIssueComments('acme', 'widget', g.issueNumber, { since: before });
    expect(all.map((x) => x.id)).toContain(c.id);
    // `since` with sub-second precision is floored: a comment made in that very second is still listed.
    const sameSecond = await bot.listIssueComments('acme', 'widget', g.issueNumber, { since: new Date(Date.parse(c.updated_at) + 999) });
    expect(sameSecond.map((x) => x.id)).toContain(c.id);
    const later = await bot.listIssueComments('acme', 'widget', g.issueNumber, { since: new Date(Date.parse(c.updated_at) + 1_000) });
    expect(later.map((x) => x.id)).not.toContain(c.id);
    const onPr = await bot.createIssueComment('acme', 'widget', g.prNumber, 'on the PR');
    expect(onPr.html_url).toContain(`/pulls/${g.prNumber}#issuecomment-`);
  });

  it('listPullReviews (paged, oldest first), listPullReviewComments, getPullRequestAuthor with the documented bot scopes', async () => {
    const review = (body: string, comments: Array<{ path: string; new_position: number; body: string }>) =>
      g.api<{ id: number }>('alice', 'POST', `/repos/acme/widget/pulls/${g.prNumber}/reviews`, { event: 'COMMENT', body, comments }, 200).then((r) => r.body.id);
    const first = await review('first review', []);
    const second = await review('', [{ path: 'src/login.js', new_position: 2, body: 'a line comment' }]);
    expect((await bot.listPullReviews('acme', 'widget', g.prNumber, 1, 1)).map((r) => r.id)).toEqual([first]);
    expect((await bot.listPullReviews('acme', 'widget', g.prNumber, 2, 1)).map((r) => r.id)).toEqual([second]);
    const adapter = reviewOnGitea(bot);
    expect((await adapter.reviews('acme', 'widget', g.prNumber)).map((r) => [r.id, r.state, r.user.login, r.body])).toEqual([
      [first, 'COMMENT', 'alice', 'first review'],
      [second, 'COMMENT', 'alice', ''],
    ]);
    const [line] = await adapter.comments('acme', 'widget', g.prNumber, second);
    expect(line).toMatchObject({ body: 'a line comment', path: 'src/login.js', position: 2, originalPosition: 0, reviewId: second, user: { login: 'alice' } });
    expect(line!.diffHunk).toContain('// retried by the caller');
    expect(await adapter.pullRequestAuthor('acme', 'widget', g.prNumber)).toBe('alice');

    // A reply in that line's thread (web UI only): Gitea answers getComment with 204, no body; lineOf finds it in its thread.
    const web = await GiteaWebSession.login(g.url, 'alice', g.users.writer.password);
    const res = await web.request('POST', `/acme/widget/pulls/${g.prNumber}/files/reviews/comments`, new URLSearchParams({ origin: 'diff', content: 'a reply', side: 'proposed', line: '2', path: 'src/login.js', single_review: 'true', reply: String(second), latest_commit_id: g.prHeadSha }));
    expect(res.status).toBe(200);
    const reply = (await adapter.comments('acme', 'widget', g.prNumber, second)).find((c) => c.body === 'a reply')!;
    expect(await failure(bot.getComment('acme', 'widget', reply.id))).toMatchObject({ code: 'gitea_bad_response', status: 204 });
    expect(await adapter.lineOf('acme', 'widget', g.prNumber, reply.id)).toMatchObject({ id: reply.id, body: 'a reply', path: 'src/login.js', position: 2, reviewId: second });
    expect(await adapter.lineOf('acme', 'widget', g.prNumber, line!.id + 1000)).toBeNull();
  });

  it('getCollaboratorPermission: own answer; another user refused to a write bot (gitea_forbidden), answered to the owner', async () => {
    expect(await bot.getCollaboratorPermission('acme', 'widget', 'ccweb-bot')).toMatchObject({ permission: 'write' });
    expect((await failure(bot.getCollaboratorPermission('acme', 'widget', 'alice'))).code).toBe('gitea_forbidden');
    const owner = createGiteaClient({ baseUrl: g.url, token: g.users.owner.token, retries: 0 });
    expect(await owner.getCollaboratorPermission('acme', 'widget', 'bob')).toMatchObject({ permission: 'read' });
    expect(await owner.getCollaboratorPermission('acme', 'widget', 'alice')).toMatchObject({ permission: 'write' });
  });

  it('refusals: wrong token, unknown comment, comment on a missing issue (real Gitea: 500), archived repository', async () => {
    const wrong = createGiteaClient({ baseUrl: g.url, token: 'f'.repeat(40), retries: 0 });
    const unauthorized = await failure(wrong.getCurrentUser());
    expect(unauthorized).toMatchObject({ code: 'gitea_unauthorized', status: 401 });
    expect(unauthorized.message).not.toContain('f'.repeat(40));
    expect(await failure(bot.getComment('acme', 'widget', 999_999))).toMatchObject({ code: 'gitea_not_found', status: 404 });
    expect(await failure(bot.createIssueComment('acme', 'widget', 999, 'x'))).toMatchObject({ code: 'gitea_server_error', status: 500 });
    await g.api('acme', 'PATCH', '/repos/acme/widget', { archived: true }, 200);
    try {
      expect(await failure(bot.createIssueComment('acme', 'widget', g.issueNumber, 'x'))).toMatchObject({ code: 'gitea_locked', status: 423 });
    } finally {
      await g.api('acme', 'PATCH', '/repos/acme/widget', { archived: false }, 200);
    }
  });
});
