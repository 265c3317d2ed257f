/**
 * Review deliveries from a real Gitea: what Gitea 1.26 sends for a line comment, a reply in a
 * line thread and a submitted review, recorded byte for byte. Used by `scripts/record-gitea-webhooks.ts
 * --reviews` (writes test/fixtures/gitea/webhooks/review_*) and by test/integration/review-deliveries-real.test.ts
 * (re-records and compares the shapes with the saved fixtures).
 *
 * The scenario, on the seeded acme/widget (seed.ts) with ROOT_URL https://gitea.example.com/ (so URLs name
 * no port) and a hook subscribed to `issue_comment`, `pull_request_comment` and `pull_request_review` (the
 * API's one name for the three review deliveries, routers/api/v1/utils/hook.go):
 *   review_comment_single_web   the owner's "Add single comment" on src/login.js line 2 of PR #2 (web UI)
 *   review_reply_web            alice's reply in that line's thread (web UI; the REST API has no reply)
 *   review_comment_api          alice's review through the API: event COMMENT, empty body, one line comment
 *   review_submitted_comment    the owner's review through the API: a body mentioning the bot, three line comments
 *   review_submitted_rejected   the owner's REQUEST_CHANGES review through the API, with a body
 */
import { startSeededGitea, type SeededGitea } from './seed.js';
import { GiteaWebSession } from './web-session.js';
import { startWebhookRecorder, type RecordedRequest } from './webhook-recorder.js';

export const REVIEW_FIXTURE_SECRET = 'test-secret';
export const REVIEW_FIXTURE_ROOT_URL = 'https://gitea.example.com/';
/** The API's event names a hook needs for every kind the service follows. */
export const REVIEW_HOOK_EVENTS = ['issue_comment', 'pull_request_comment', 'pull_request_review'];

export const REVIEW_FIXTURE_NAMES = [
  'review_comment_single_web',
  'review_reply_web',
  'review_comment_api',
  'review_submitted_comment',
  'review_submitted_rejected',
] as const;
export type ReviewFixtureName = (typeof REVIEW_FIXTURE_NAMES)[number];

export interface ReviewRecording {
  version: string;
  deliveries: Array<[ReviewFixtureName, RecordedRequest]>;
  /** What the review API answered for the reviews, by fixture name (for the notes and the tests). */
  readBack: Partial<Record<ReviewFixtureName, unknown>>;
}

interface ReviewAnswer {
  id: number;
  body: string;
  state: string;
  user: { login: string };
}

function eventType(r: RecordedRequest): string {
  return String(r.headers['x-gitea-event-type'] ?? '');
}

/** Plays the scenario on a fresh seeded Gitea and returns what it sent. */
export async function recordReviewDeliveries(options: { keepGitea?: (g: SeededGitea) => void } = {}): Promise<ReviewRecording> {
  const g = await startSeededGitea({ rootUrl: REVIEW_FIXTURE_ROOT_URL });
  const recorder = await startWebhookRecorder();
  try {
    options.keepGitea?.(g);
    const o = g.owner;
    const r = g.repo;
    const pr = g.prNumber;
    await g.addWebhook(recorder.url, REVIEW_FIXTURE_SECRET, { events: REVIEW_HOOK_EVENTS });
    const seen = new Set<RecordedRequest>();
    const next = async (match: (r: RecordedRequest) => boolean) => {
      const got = await recorder.waitFor((x) => !seen.has(x) && match(x));
      seen.add(got);
      return got;
    };
    const deliveries: ReviewRecording['deliveries'] = [];
    const readBack: ReviewRecording['readBack'] = {};
    const reviewsOf = async () => (await g.api<ReviewAnswer[]>(g.users.owner.login, 'GET', `/repos/${o}/${r}/pulls/${pr}/reviews`)).body;
    const commentsOf = async (id: number) => (await g.api<unknown[]>(g.users.owner.login, 'GET', `/repos/${o}/${r}/pulls/${pr}/reviews/${id}/comments`)).body;

    // 1. The web UI's "Add single comment" on a line without a thread.
    const ownerWeb = await GiteaWebSession.login(g.url, g.users.owner.login, g.users.owner.password);
    const single = await ownerWeb.request(
      'POST',
      `/${o}/${r}/pulls/${pr}/files/reviews/comments`,
      new URLSearchParams({ origin: 'diff', content: '@ccweb-bot is the retry comment still true here?', side: 'proposed', line: '2', path: 'src/login.js', single_review: 'true', reply: '0', latest_commit_id: g.prHeadSha }),
    );
    if (single.status >= 400) throw new Error(`single line comment (web): HTTP ${single.status}: ${(await single.text()).slice(0, 300)}`);
    deliveries.push(['review_comment_single_web', await next((x) => eventType(x) === 'pull_request_review_comment')]);
    const firstReview = (await reviewsOf()).at(-1)!;
    const firstComments = (await commentsOf(firstReview.id)) as Array<{ id: number }>;
    readBack.review_comment_single_web = { review: firstReview, comments: firstComments };

    // 2. A reply in that thread (web UI: `reply` = the thread's review id).
    const aliceWeb = await GiteaWebSession.login(g.url, g.users.writer.login, g.users.writer.password);
    const reply = await aliceWeb.request(
      'POST',
      `/${o}/${r}/pulls/${pr}/files/reviews/comments`,
      new URLSearchParams({ origin: 'diff', content: '@ccweb-bot and please add a test for it', side: 'proposed', line: '2', path: 'src/login.js', single_review: 'true', reply: String(firstReview.id), latest_commit_id: g.prHeadSha }),
    );
    if (reply.status >= 400) throw new Error(`reply in a line thread (web): HTTP ${reply.status}: ${(await reply.text()).slice(0, 300)}`);
    deliveries.push(['review_reply_web', await next((x) => eventType(x) === 'pull_request_comment')]);
    readBack.review_reply_web = { comments: await commentsOf(firstReview.id) };

    // 3. A line comment through the API: always inside a review (event COMMENT, empty body).
    const apiReview = await g.api<ReviewAnswer>(g.users.writer.login, 'POST', `/repos/${o}/${r}/pulls/${pr}/reviews`, {
      event: 'COMMENT',
      body: '',
      commit_id: g.prHeadSha,
      comments: [{ path: 'src/login.js', new_position: 1, body: '@ccweb-bot rename `user` to `name` here' }],
    }, 200);
    deliveries.push(['review_comment_api', await next((x) => eventType(x) === 'pull_request_review_comment')]);
    readBack.review_comment_api = { review: apiReview.body, comments: await commentsOf(apiReview.body.id) };

    // 4. A submitted review whose body mentions the bot, with three line comments.
    const full = await g.api<ReviewAnswer>(g.users.owner.login, 'POST', `/repos/${o}/${r}/pulls/${pr}/reviews`, {
      event: 'COMMENT',
      body: '@ccweb-bot please address this review',
      commit_id: g.prHeadSha,
      comments: [
        { path: 'src/login.js', new_position: 1, body: 'validate both arguments' },
        { path: 'src/login.js', new_position: 2, body: 'drop the trailing comment' },
        { path: 'src/login.js', new_position: 3, body: 'add a newline at the end' },
      ],
    }, 200);
    deliveries.push(['review_submitted_comment', await next((x) => eventType(x) === 'pull_request_review_comment')]);
    readBack.review_submitted_comment = { review: full.body, comments: await commentsOf(full.body.id) };

    // 5. Request changes (a "rejected" review).
    const rejected = await g.api<ReviewAnswer>(g.users.owner.login, 'POST', `/repos/${o}/${r}/pulls/${pr}/reviews`, {
      event: 'REQUEST_CHANGES',
      body: 'the retry must be bounded',
      commit_id: g.prHeadSha,
      comments: [{ path: 'src/login.js', new_position: 2, body: 'bound the retry' }],
    }, 200);
    deliveries.push(['review_submitted_rejected', await next((x) => eventType(x) === 'pull_request_review_rejected')]);
    readBack.review_submitted_rejected = { review: rejected.body, comments: await commentsOf(rejected.body.id) };

    return { version: g.version, deliveries, readBack };
  } finally {
    await recorder.close();
    await g.close();
  }
}
