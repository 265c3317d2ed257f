// Shared Gitea webhook fixtures (byte-exact bodies + headers, signed with `test-secret`) and
// helpers to build new signed deliveries from them.
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** `test/fixtures/gitea/webhooks` (recorded from a real Gitea 1.26.3 by scripts/record-gitea-webhooks.ts, see its README) (override with CCWEB_GITEA_FIXTURES). */
export const FIXTURE_DIR =
  process.env['CCWEB_GITEA_FIXTURES'] ?? fileURLToPath(new URL('../fixtures/gitea/webhooks/', import.meta.url));
export const FIXTURE_SECRET = 'test-secret';

export const FIXTURE_NAMES = [
  'issue_comment_created_on_issue',
  'issue_comment_created_by_bot',
  'issue_comment_edited',
  'pull_request_comment_created',
] as const;
export type FixtureName = (typeof FIXTURE_NAMES)[number];

export interface Delivery {
  body: Buffer;
  headers: Record<string, string>;
}

export function loadFixture(name: FixtureName): Delivery {
  const body = readFileSync(path.join(FIXTURE_DIR, `${name}.json`));
  const meta = JSON.parse(readFileSync(path.join(FIXTURE_DIR, `${name}.headers.json`), 'utf8')) as {
    headers: Record<string, string>;
  };
  return { body, headers: { ...meta.headers } };
}

export function hmacHex(body: Buffer | string, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** Gitea's header set for `body`, signed with `secret`, based on `base` (a fixture's headers). */
export function signedHeaders(
  base: Record<string, string>,
  body: Buffer,
  secret = FIXTURE_SECRET,
  overrides: Record<string, string> = {},
): Record<string, string> {
  const sig = hmacHex(body, secret);
  return {
    ...base,
    'Content-Length': String(body.length),
    'X-Gitea-Signature': sig,
    'X-Gogs-Signature': sig,
    'X-Hub-Signature-256': `sha256=${sig}`,
    ...overrides,
  };
}

/** Parse a fixture body, let `mutate` change it, re-serialise Gitea-style (2-space indent) and re-sign. */
export function mutatedDelivery(name: FixtureName, mutate: (payload: any) => void, secret = FIXTURE_SECRET): Delivery {
  const fixture = loadFixture(name);
  const payload = JSON.parse(fixture.body.toString('utf8'));
  mutate(payload);
  const body = Buffer.from(JSON.stringify(payload, null, 2), 'utf8');
  return { body, headers: signedHeaders(fixture.headers, body, secret) };
}

/** The same delivery under a fresh delivery id: a new webhook, not a redelivery. */
export function withFreshDeliveryId(d: Delivery): Delivery {
  const id = randomUUID();
  return { body: d.body, headers: { ...d.headers, 'X-Gitea-Delivery': id, 'X-Gogs-Delivery': id, 'X-GitHub-Delivery': id } };
}

/** Gitea's `form` content type: `payload=<url-encoded JSON>` as Go's url.Values.Encode writes it. */
export function formEncode(json: Buffer): Buffer {
  const encoded = encodeURIComponent(json.toString('utf8'))
    .replace(/[!'()*~]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())
    .replace(/%20/g, '+');
  return Buffer.from(`payload=${encoded}`, 'latin1');
}

/** Copy of `headers` without `name` (case-insensitive). */
export function withoutHeader(headers: Record<string, string>, name: string): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== name.toLowerCase()));
}
