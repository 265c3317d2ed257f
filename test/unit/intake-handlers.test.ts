// The intake's table of handlers: which delivery each takes (by Gitea's event headers), which waiting
// delivery each owns, and what the intake does with a delivery no handler takes. Real store, runtime
// and signed fixture deliveries; Gitea is never asked (every delivery here ends before a lookup).
import { afterEach, describe, expect, it } from 'vitest';
import { createIntake } from '../../src/intake/intake.js';
import { createIntakeKit } from '../../src/intake/intake-kit.js';
import type { IntakeOptions } from '../../src/intake/intake-options.js';
import { createMentionHandler } from '../../src/intake/mention-handler.js';
import type { PendingIntakeRecord } from '../../src/intake/pending-intake.js';
import { createReviewHandler } from '../../src/intake/review-handler.js';
import { taskKind } from '../../src/tasks/task-actor.js';
import { FIXTURE_SECRET, loadFixture, signedHeaders } from '../support/webhook-fixtures.js';
import { createTestRuntime } from '../support/test-runtime.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function options(extra: Partial<IntakeOptions> = {}): Promise<IntakeOptions> {
  const t = await createTestRuntime([taskKind()]);
  cleanups.push(() => t.close());
  const never = () => Promise.reject(new Error('test: Gitea is not asked here'));
  return { store: t.store, runtime: t.runtime, botLogin: 'ccweb-bot', secrets: [FIXTURE_SECRET], fetchPermission: never, commentOnGitea: never, workspaceRoot: t.dir, ...extra };
}

const headers = (event: string, type: string) => ({ 'x-gitea-event': event, 'x-gitea-event-type': type });
const reviewReader = { review: () => Promise.reject(new Error('unused')) } as never;

describe('the handlers of the intake', () => {
  it('a mention takes comment deliveries on issues and pull requests, nothing else; it owns waiting comments', async () => {
    const mention = createMentionHandler(createIntakeKit(await options()));
    expect(mention.takes(headers('issue_comment', 'issue_comment'))).toBe(true);
    expect(mention.takes(headers('issue_comment', 'pull_request_comment'))).toBe(true);
    expect(mention.takes(headers('push', 'issue_comment'))).toBe(false);
    expect(mention.takes(headers('pull_request_approved', 'pull_request_review_approved'))).toBe(false);
    expect(mention.owns({ key: 'k' } as PendingIntakeRecord)).toBe(true);
    expect(mention.owns({ key: 'k', review: {} } as PendingIntakeRecord)).toBe(false);
  });

  it('a review takes each review delivery kind; it owns waiting reviews', async () => {
    const review = createReviewHandler(createIntakeKit(await options()), reviewReader);
    for (const type of ['pull_request_review_comment', 'pull_request_review_approved', 'pull_request_review_rejected']) expect(review.takes(headers('pull_request_review', type))).toBe(true);
    expect(review.takes(headers('issue_comment', 'issue_comment'))).toBe(false);
    expect(review.owns({ key: 'k', review: {} } as PendingIntakeRecord)).toBe(true);
    expect(review.owns({ key: 'k' } as PendingIntakeRecord)).toBe(false);
  });

  it('a signed delivery no handler takes is recorded as ignored (unsupported_event); a review too while reviews are off', async () => {
    const opts = await options();
    const intake = createIntake(opts);
    cleanups.push(() => intake.close());
    const fixture = loadFixture('issue_comment_created_on_issue');
    const send = async (event: string, type: string, deliveryId: string) => {
      const signed = signedHeaders({ ...fixture.headers, 'X-Gitea-Event': event, 'X-Gitea-Event-Type': type }, fixture.body, FIXTURE_SECRET, { 'X-Gitea-Delivery': deliveryId });
      return intake.handle({ rawBody: fixture.body, headers: Object.fromEntries(Object.entries(signed).map(([k, v]) => [k.toLowerCase(), v])) });
    };
    const push = await send('push', 'push', '0d5c1a3e-0000-4000-8000-000000000001');
    expect(push).toMatchObject({ status: 200, body: { status: 'ignored', reason: 'unsupported_event' } });
    const review = await send('pull_request_approved', 'pull_request_review_approved', '0d5c1a3e-0000-4000-8000-000000000002');
    expect(review).toMatchObject({ status: 200, body: { status: 'ignored', reason: 'unsupported_event' } });
    expect(await opts.store.get('webhook_deliveries', 'default:0d5c1a3e-0000-4000-8000-000000000001')).toMatchObject({ status: 'ignored', reason: 'unsupported_event' });
  });
});
