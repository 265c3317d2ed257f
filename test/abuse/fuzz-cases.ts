// Hostile requests for the abuse run, each with the answers it may get. Every case is built so that
// no answer could be a stored success: a correctly signed request is always broken in a way intake
// must refuse (400), and everything else is unsigned or signed wrongly (401), of the wrong type
// (415), too large (413), malformed at the HTTP level (400/431 from Node's parser), or aimed at the
// admin API without its token (401) or at nothing (404/405).
import { createHmac, randomUUID } from 'node:crypto';
import type { RawRequest } from './raw-http.js';

export const WEBHOOK_PATH = '/api/gitea/webhook';
export const API_PREFIX = '/api/gitea-workflow';

export interface FuzzCase {
  category: string;
  request: RawRequest;
  /** Acceptable statuses; null = the connection may close without an answer. */
  expect: ReadonlyArray<number | null>;
  /** Counted as a webhook request that reached intake's signature check with a 401. */
  webhook: boolean;
}

type Rand = () => number;
type Json = Record<string, unknown>;

const pick = <T>(rand: Rand, items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;

function basePayload(rand: Rand): Json {
  const id = 1 + Math.floor(rand() * 1e9);
  const at = new Date(Date.UTC(2025, 0, 1) + Math.floor(rand() * 1e10)).toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    action: 'created',
    issue: { id, number: 1, title: 'The login test is flaky', html_url: 'http://127.0.0.1/acme/widget/issues/1' },
    comment: { id, body: '@ccweb-bot please fix the build', html_url: `http://127.0.0.1/acme/widget/issues/1#issuecomment-${id}`, created_at: at, updated_at: at },
    repository: {
      id: 1,
      owner: { login: 'acme' },
      name: 'widget',
      full_name: 'acme/widget',
      clone_url: 'http://127.0.0.1/acme/widget.git',
      default_branch: 'main',
      permissions: { admin: false, push: true, pull: true },
    },
    sender: { login: 'alice' },
    is_pull: false,
  };
}

function giteaHeaders(body: Buffer, signature: string | null, deliveryId: string = randomUUID(), contentType = 'application/json'): string[] {
  const h = [
    `Content-Type: ${contentType}`,
    `Content-Length: ${body.length}`,
    `X-Gitea-Delivery: ${deliveryId}`,
    'X-Gitea-Event: issue_comment',
    'X-Gitea-Event-Type: issue_comment',
    'User-Agent: Go-http-client/1.1',
  ];
  if (signature !== null) h.push(`X-Gitea-Signature: ${signature}`, `X-Hub-Signature-256: sha256=${signature}`);
  return h;
}

const sign = (secret: string, body: Buffer) => createHmac('sha256', secret).update(body).digest('hex');

function post(body: Buffer, headers: string[], extra: Partial<RawRequest> = {}): RawRequest {
  return { method: 'POST', path: WEBHOOK_PATH, headers, body, ...extra };
}

/** Sets `path` (dot-separated) in a deep copy of `obj`. */
function withField(obj: Json, path: string, value: unknown): Json {
  const copy = structuredClone(obj);
  const keys = path.split('.');
  let at: Json = copy;
  for (const k of keys.slice(0, -1)) at = at[k] as Json;
  at[keys.at(-1)!] = value;
  return copy;
}

/** Fields of the payload intake validates, with values of the wrong type (or out of range) for each. */
const WRONG_TYPES: Record<string, unknown[]> = {
  'issue.number': ['1', null, [], {}, true, 0, -3, 1.5],
  'comment.id': ['7', null, [], {}, false, 0, -1, 2.5],
  'repository.id': ['1', null, [], {}, true, 1.5],
  'comment.body': [1, null, [], {}, true],
  'comment.html_url': [1, null, [], {}],
  'comment.created_at': [1, null, 'yesterday', '2025-13-45T99:00:00Z', []],
  'comment.updated_at': [0, 'not a date', {}],
  'repository.owner.login': [1, null, [], {}, ''],
  'repository.name': [1, null, [], ''],
  'repository.full_name': [1, null, []],
  'repository.clone_url': [1, null, ''],
  'repository.default_branch': [1, null, {}],
  'repository.permissions': ['admin', 1, [], { admin: 'yes', push: 1, pull: null }],
  'sender.login': [1, null, [], {}, '', 'a b', 'x/y', 'a\u0000b'],
  is_pull: ['false', 0, null, []],
  action: [1, null, 'Created!', '', 'x'.repeat(64)],
  issue: ['x', 1, null, []],
  comment: ['x', 1, null, []],
  repository: ['x', 1, null, []],
  sender: ['x', 1, null, []],
};

const TRAVERSAL = ['..', '../..', '.', 'a/../b', '..%2f..', '%2e%2e', 'a\\b', '-rf', '--upload-pack=x', 'a..b', '/etc', 'acme/../../etc', 'x y', 'ü', 'a\u0000', '', 'a'.repeat(300)];

const BAD_SIGNATURES = (rand: Rand, body: Buffer): Array<string[] | null> => [
  null,
  [`X-Gitea-Signature: ${'0'.repeat(64)}`],
  [`X-Gitea-Signature: ${sign('not-the-secret', body)}`],
  [`X-Gitea-Signature: ${sign('not-the-secret', body).slice(0, 63)}`],
  [`X-Gitea-Signature: ${sign('not-the-secret', body)}00`],
  [`X-Gitea-Signature: zz${'f'.repeat(62)}`],
  [`X-Hub-Signature-256: sha1=${'a'.repeat(64)}`],
  [`X-Hub-Signature: sha1=${createHmac('sha1', 'x').update(body).digest('hex')}`],
  [`X-Gitea-Signature: `],
  [`X-Gitea-Signature: ${randomUUID()}`],
  [`X-Gitea-Signature: ${sign('a', body)}`, `X-Gitea-Signature: ${sign('b', body)}`],
  [`X-Gitea-Signature: ${Buffer.from(sign('x', body), 'hex').toString('base64')}`],
  [`X-Gitea-Signature: ${Math.floor(rand() * 1e9).toString(16).padStart(64, 'a')}`],
];

function invalidUtf8(rand: Rand): Buffer {
  const bad = [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xe2, 0x82]];
  return Buffer.from(pick(rand, bad));
}

export interface CaseFactory {
  category: string;
  weight: number;
  make: (rand: Rand) => FuzzCase;
}

export function caseFactories(secret: string): CaseFactory[] {
  const json = (v: unknown) => Buffer.from(JSON.stringify(v));
  const webhook = (category: string, request: RawRequest, expect: Array<number | null>, reachesSignature = true): FuzzCase => ({
    category,
    request,
    expect,
    webhook: reachesSignature && expect.length === 1 && expect[0] === 401,
  });
  return [
    {
      category: 'bad signature',
      weight: 20,
      make: (rand) => {
        const body = json(basePayload(rand));
        const sig = pick(rand, BAD_SIGNATURES(rand, body));
        return webhook('bad signature', post(body, [...giteaHeaders(body, null), ...(sig ?? [])]), [401]);
      },
    },
    {
      category: 'truncated body (signature over the whole)',
      weight: 6,
      make: (rand) => {
        const full = json(basePayload(rand));
        const body = full.subarray(0, Math.floor(rand() * full.length));
        return webhook('truncated body (signature over the whole)', post(body, giteaHeaders(body, sign(secret, full))), [401]);
      },
    },
    {
      category: 'truncated body (signed as sent)',
      weight: 6,
      make: (rand) => {
        const full = json(basePayload(rand));
        const body = full.subarray(0, 1 + Math.floor(rand() * (full.length - 2)));
        return webhook('truncated body (signed as sent)', post(body, giteaHeaders(body, sign(secret, body))), [400]);
      },
    },
    {
      category: 'client hangs up mid-body',
      weight: 3,
      make: (rand) => {
        const full = json(basePayload(rand));
        const body = full.subarray(0, Math.floor(rand() * full.length));
        const headers = giteaHeaders(full, sign(secret, full)); // declares the full length
        return webhook('client hangs up mid-body', post(body, headers, { cut: true }), [400, null], false);
      },
    },
    {
      category: 'huge body (declared)',
      weight: 2,
      make: (rand) => {
        const body = Buffer.alloc(1024, 0x20);
        const headers = giteaHeaders(body, sign(secret, body)).map((h) =>
          h.startsWith('Content-Length') ? `Content-Length: ${3 * 1024 * 1024 + Math.floor(rand() * 1e9)}` : h,
        );
        return webhook('huge body (declared)', post(body, headers), [413, null], false);
      },
    },
    {
      category: 'huge body (chunked, undeclared)',
      weight: 0.15,
      make: () => {
        const payload = Buffer.alloc(2 * 1024 * 1024 + 4096, 0x61);
        const chunked = Buffer.concat([Buffer.from(`${payload.length.toString(16)}\r\n`), payload, Buffer.from('\r\n0\r\n\r\n')]);
        const headers = giteaHeaders(payload, sign(secret, payload)).filter((h) => !h.startsWith('Content-Length'));
        return webhook('huge body (chunked, undeclared)', post(chunked, [...headers, 'Transfer-Encoding: chunked']), [413, null], false);
      },
    },
    {
      category: 'wrong types in fields (signed)',
      weight: 14,
      make: (rand) => {
        const field = pick(rand, Object.keys(WRONG_TYPES));
        const body = json(withField(basePayload(rand), field, pick(rand, WRONG_TYPES[field]!)));
        return webhook('wrong types in fields (signed)', post(body, giteaHeaders(body, sign(secret, body))), [400]);
      },
    },
    {
      category: 'missing fields (signed)',
      weight: 4,
      make: (rand) => {
        const p = basePayload(rand);
        const field = pick(rand, ['issue', 'comment', 'repository', 'sender', 'is_pull', 'action']);
        delete p[field];
        const body = json(p);
        return webhook('missing fields (signed)', post(body, giteaHeaders(body, sign(secret, body))), [400]);
      },
    },
    {
      category: 'deep JSON nesting',
      weight: 2,
      make: (rand) => {
        const depth = 10_000 + Math.floor(rand() * 400_000);
        const deep = `${'['.repeat(depth)}${']'.repeat(depth)}`;
        const where = pick(rand, ['top', 'field', 'object']);
        const text =
          where === 'top'
            ? deep
            : where === 'field'
              ? JSON.stringify(basePayload(rand)).replace('"@ccweb-bot please fix the build"', deep)
              : `${'{"a":'.repeat(Math.floor(depth / 4))}1${'}'.repeat(Math.floor(depth / 4))}`;
        const body = Buffer.from(text);
        const signed = rand() < 0.5;
        return webhook('deep JSON nesting', post(body, giteaHeaders(body, signed ? sign(secret, body) : null)), [signed ? 400 : 401]);
      },
    },
    {
      category: 'invalid UTF-8',
      weight: 5,
      make: (rand) => {
        const text = Buffer.from(JSON.stringify(basePayload(rand)));
        // Signed: the bad bytes replace a structural character, so the JSON itself is broken.
        const signed = rand() < 0.5;
        const at = signed ? text.indexOf(pick(rand, [':', ',', '{', '"action"'].map((s) => Buffer.from(s)))) : Math.floor(rand() * text.length);
        const body = Buffer.concat([text.subarray(0, at), invalidUtf8(rand), text.subarray(at + 1)]);
        return webhook('invalid UTF-8', post(body, giteaHeaders(body, signed ? sign(secret, body) : null)), [signed ? 400 : 401]);
      },
    },
    {
      category: 'traversal in owner/repo (signed)',
      weight: 8,
      make: (rand) => {
        const name = pick(rand, TRAVERSAL);
        const field = pick(rand, ['repository.owner.login', 'repository.name']);
        const body = json(withField(basePayload(rand), field, name));
        return webhook('traversal in owner/repo (signed)', post(body, giteaHeaders(body, sign(secret, body))), [400]);
      },
    },
    {
      category: 'hostile delivery id (signed)',
      weight: 4,
      make: (rand) => {
        const body = json(basePayload(rand));
        const id = pick(rand, ['../../etc/passwd', 'a b', '', '-x', 'x'.repeat(200), 'id;rm -rf', 'a\u00e9b', '%00', 'a/b']);
        return webhook('hostile delivery id (signed)', post(body, giteaHeaders(body, sign(secret, body), id)), [400]);
      },
    },
    {
      category: 'header injection / malformed HTTP',
      weight: 8,
      make: (rand) => {
        const body = json(basePayload(rand));
        const headers = giteaHeaders(body, null);
        const variant = Math.floor(rand() * 8);
        switch (variant) {
          case 0: // bare LF smuggling a header
            return webhook('header injection / malformed HTTP', post(body, [...headers, 'X-Gitea-Event: issue_comment\nX-Gitea-Signature: 00']), [400, 401], false);
          case 1: // NUL byte in a value
            return webhook('header injection / malformed HTTP', post(body, [...headers, 'X-Evil: a\u0000b']), [400], false);
          case 2: // conflicting Content-Length
            return webhook('header injection / malformed HTTP', post(body, [...headers, `Content-Length: ${body.length + 5}`]), [400], false);
          case 3: // Content-Length and Transfer-Encoding together (request smuggling)
            return webhook('header injection / malformed HTTP', post(body, [...headers, 'Transfer-Encoding: chunked']), [400], false);
          case 4: // header name with a space
            return webhook('header injection / malformed HTTP', post(body, [...headers, 'X Gitea Signature: 00']), [400], false);
          case 5: // headers beyond Node's limit
            return webhook('header injection / malformed HTTP', post(body, [...headers, `X-Pad: ${'a'.repeat(20_000)}`]), [431, 400, null], false);
          case 6: // CR without LF inside a value
            return webhook('header injection / malformed HTTP', post(body, [...headers, 'X-Gitea-Delivery2: a\rX-Injected: 1']), [400], false);
          default: // obsolete line folding
            return webhook('header injection / malformed HTTP', post(body, [...headers, 'X-Folded: a', ' continued']), [400, 401], false);
        }
      },
    },
    {
      category: 'wrong content type',
      weight: 6,
      make: (rand) => {
        const body = json(basePayload(rand));
        const type = pick(rand, ['text/plain', 'multipart/form-data; boundary=x', 'application/xml', 'application/jsonx', 'json', '', 'application/json;', 'text/json']);
        const v = rand();
        if (v < 0.2) {
          const h = giteaHeaders(body, sign(secret, body)).concat(`Content-Encoding: ${pick(rand, ['gzip', 'br', 'deflate', 'identity, gzip'])}`);
          return webhook('wrong content type', post(body, h), [415]);
        }
        if (type === 'application/json;') return webhook('wrong content type', post(body, giteaHeaders(body, null, randomUUID(), type)), [401]);
        const h = giteaHeaders(body, sign(secret, body), randomUUID(), type).filter((x) => type !== '' || !x.startsWith('Content-Type'));
        return webhook('wrong content type', post(body, h), [415]);
      },
    },
    {
      category: 'broken form encoding',
      weight: 3,
      make: (rand) => {
        const body = Buffer.from(pick(rand, ['payload=%zz', 'payload=%4', 'a=1&payload=1&payload=2', 'nopayload=1', '', 'payload=', '%%%']));
        return webhook('broken form encoding', post(body, giteaHeaders(body, sign(secret, body), randomUUID(), 'application/x-www-form-urlencoded')), [401]);
      },
    },
    {
      category: 'admin API without/with a wrong token',
      weight: 10,
      make: (rand) => {
        const path = pick(rand, ['/overview', '/tasks', '/tasks/gitea-task-0123456789abcdef01234567', '/audit', '/audit?format=ndjson', '/actors', '/machines', '/events', '/events?ticket=abc']);
        const auth = pick(rand, [
          null,
          'Authorization: Bearer wrong-token',
          'Authorization: Bearer ',
          'Authorization: Basic YWRtaW46YWRtaW4=',
          'Authorization: token x',
          `Authorization: Bearer ${randomUUID().replace(/-/g, '')}`,
          'Authorization: Bearer a b',
          'Cookie: token=x',
        ]);
        const post = rand() < 0.3;
        const target = post ? pick(rand, ['/control/pause', '/control/resume', '/repos/default:acme%2Fwidget/disable', '/tasks/x/cancel', '/events/ticket']) : path;
        const body = post ? Buffer.from(JSON.stringify({ requestId: randomUUID(), operator: 'mallory', reason: 'x' })) : undefined;
        const headers = [...(auth ? [auth] : []), ...(body ? ['Content-Type: application/json', `Content-Length: ${body.length}`] : [])];
        // 429 once the client failed 10 times within a minute: failed admin authentications are limited.
        return { category: 'admin API without/with a wrong token', request: { method: post ? 'POST' : 'GET', path: `${API_PREFIX}${target}`, headers, ...(body ? { body } : {}) }, expect: [401, 429], webhook: false };
      },
    },
    {
      category: 'random paths and methods',
      weight: 8,
      make: (rand) => {
        const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789-._~/%';
        let path = '/';
        for (let i = 0, n = 1 + Math.floor(rand() * 40); i < n; i++) path += alphabet[Math.floor(rand() * alphabet.length)];
        const prefix = pick(rand, ['', '/api', '/api/gitea', API_PREFIX, '/admin', '/visualizer', '/..', '/%2e%2e']);
        const method = pick(rand, ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS']);
        const isWebhook = rand() < 0.15;
        const full = isWebhook ? WEBHOOK_PATH : `${prefix}${path}`;
        // The webhook route answers only POST; everything else there is 405 (OPTIONS: 200 Allow).
        const expect = isWebhook
          ? method === 'POST'
            ? [415]
            : method === 'OPTIONS'
              ? [200, 204]
              : [405]
          : full.startsWith(`${API_PREFIX}/`)
            ? [400, 401, 404, 405, 429] // 429: this client already failed 10 admin authentications this minute
            : [400, 401, 404, 405];
        return { category: 'random paths and methods', request: { method, path: full, headers: [] }, expect, webhook: false };
      },
    },
  ];
}

/** `count` cases drawn by weight, each factory at least once. */
export function drawCases(rand: Rand, secret: string, count: number): FuzzCase[] {
  const factories = caseFactories(secret);
  const total = factories.reduce((a, f) => a + f.weight, 0);
  const out = factories.map((f) => f.make(rand));
  while (out.length < count) {
    let r = rand() * total;
    const f = factories.find((x) => (r -= x.weight) < 0) ?? factories.at(-1)!;
    out.push(f.make(rand));
  }
  return out;
}
