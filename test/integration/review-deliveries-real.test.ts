// The review webhook fixtures (test/fixtures/gitea/webhooks/review_*) are what a real Gitea 1.26 sends:
// the scenario is played again on a fresh real Gitea and every delivery, its event headers and what the
// review API answers for it are compared key by key (shapes, not values: ids, times and shas change) with
// the saved files. A fixture that drifts from Gitea, or a Gitea that changes what it sends, fails here.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { REVIEW_FIXTURE_NAMES, recordReviewDeliveries, type ReviewRecording } from '../support/real-gitea/review-scenario.js';
import { shapeDifferences } from '../support/real-gitea/shape-diff.js';

const dir = fileURLToPath(new URL('../fixtures/gitea/webhooks/', import.meta.url));
const saved = (name: string, suffix: string): unknown => JSON.parse(readFileSync(`${dir}${name}${suffix}`, 'utf8'));

let rec: ReviewRecording;
beforeAll(async () => {
  rec = await recordReviewDeliveries();
}, 600_000);

describe('review deliveries of a real Gitea 1.26.3', () => {
  it('records every kind the fixtures hold, in order', () => {
    expect(rec.version).toBe('1.26.3');
    expect(rec.deliveries.map(([n]) => n)).toEqual([...REVIEW_FIXTURE_NAMES]);
  });

  it.each([...REVIEW_FIXTURE_NAMES])('%s: same event headers, body and read-back shape as the saved fixture', (name) => {
    const [, r] = rec.deliveries.find(([n]) => n === name)!;
    const meta = saved(name, '.headers.json') as { headers: Record<string, string> };
    expect({ event: r.headers['x-gitea-event'], type: r.headers['x-gitea-event-type'] }).toEqual({ event: meta.headers['X-Gitea-Event'], type: meta.headers['X-Gitea-Event-Type'] });
    expect(shapeDifferences(saved(name, '.json'), JSON.parse(r.body.toString('utf8')))).toEqual([]);
    expect(shapeDifferences(saved(name, '.readback.json'), rec.readBack[name])).toEqual([]);
  });

  it('a review delivery names no review id and no line comment; a reply in a line thread has no path, line or hunk', () => {
    const body = (n: string) => JSON.parse(rec.deliveries.find(([x]) => x === n)![1].body.toString('utf8')) as Record<string, unknown>;
    const single = body('review_comment_single_web');
    expect(single.review).toEqual({ type: 'pull_request_review_comment', content: '' });
    expect(single).not.toHaveProperty('comment');
    const reply = body('review_reply_web') as { comment: Record<string, unknown> };
    for (const k of ['path', 'line', 'position', 'diff_hunk']) expect(reply.comment).not.toHaveProperty(k);
    expect((body('review_submitted_comment').review as { content: string }).content).toContain('@ccweb-bot');
  });
});
