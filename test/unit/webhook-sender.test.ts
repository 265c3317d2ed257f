// The stand-in's webhook sender (src/demo/gitea-double/webhook-sender.ts) against the deliveries
// recorded from a real Gitea (test/fixtures/gitea/webhooks/).
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildCommentPayload, createWebhookSender } from '../../src/demo/gitea-double/webhook-sender.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/gitea/webhooks');

describe('sandbox webhook sender behaves like Gitea', () => {
  it.each(['issue_comment_created_on_issue', 'pull_request_comment_created', 'issue_comment_edited'])(
    'rebuilds %s byte for byte',
    (name) => {
      const raw = readFileSync(join(FIXTURES, `${name}.json`));
      const p = JSON.parse(raw.toString('utf8'));
      const rebuilt = buildCommentPayload({
        action: p.action,
        issue: p.issue,
        comment: p.comment,
        repository: p.repository,
        sender: p.sender,
        isPull: p.is_pull,
        pullRequest: p.pull_request,
        changes: p.changes,
      });
      expect(rebuilt.equals(raw)).toBe(true);
    },
  );

  it('signs like Gitea and replays with a new UUID and the same bytes', async () => {
    const seen: Array<{ headers: IncomingHttpHeaders; body: Buffer }> = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ headers: req.headers, body: Buffer.concat(chunks) });
        res.writeHead(202).end('{}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const expected = JSON.parse(readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.headers.json'), 'utf8')).headers;
    const p = JSON.parse(readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.json'), 'utf8'));
    const sender = createWebhookSender({ url, secret: 'test-secret' });
    const first = await sender.send({ issue: p.issue, comment: p.comment, repository: p.repository, sender: p.sender, isPull: false });
    const second = await sender.replay(first.deliveryId);
    server.close();
    expect(first.status).toBe(202);
    expect(second.deliveryId).not.toBe(first.deliveryId);
    expect(seen[1]!.body.equals(seen[0]!.body)).toBe(true);
    const h = seen[0]!.headers;
    // Same signature as Gitea computed for the fixture, since the bytes are the same.
    expect(h['x-gitea-signature']).toBe(expected['X-Gitea-Signature']);
    expect(h['x-hub-signature-256']).toBe(expected['X-Hub-Signature-256']);
    expect(h['x-hub-signature']).toBe(expected['X-Hub-Signature']);
    expect(h['x-gitea-event']).toBe('issue_comment');
    expect(h['x-gitea-event-type']).toBe('issue_comment');
    expect(h['user-agent']).toBe('Go-http-client/1.1');
    expect(h['x-gitea-signature']).toBe(createHmac('sha256', 'test-secret').update(seen[0]!.body).digest('hex'));
  });
});
