import { describe, expect, it } from 'vitest';
import {
  computeSignature,
  extractPayload,
  verifyRequest,
  verifySignature,
} from '../../src/webhook/verify-signature.js';
import {
  FIXTURE_NAMES,
  FIXTURE_SECRET,
  formEncode,
  hmacHex,
  loadFixture,
  mutatedDelivery,
  signedHeaders,
  withoutHeader,
} from '../support/webhook-fixtures.js';

describe('verifySignature over the shared fixtures', () => {
  for (const name of FIXTURE_NAMES) {
    it(`${name}: verifies with test-secret, byte-exact`, () => {
      const { body, headers } = loadFixture(name);
      expect(body.length).toBe(Number(headers['Content-Length']));
      expect(verifySignature(body, headers, [FIXTURE_SECRET])).toBe(true);
      expect(verifyRequest(body, headers, [FIXTURE_SECRET])).toEqual({ ok: true, json: body });
    });

    it(`${name}: fails with another secret`, () => {
      const { body, headers } = loadFixture(name);
      expect(verifySignature(body, headers, ['other-secret'])).toBe(false);
      expect(verifyRequest(body, headers, ['other-secret'])).toEqual({ ok: false, reason: 'invalid_signature' });
    });
  }

  it('computeSignature reproduces the fixture header', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    expect(computeSignature(body, FIXTURE_SECRET)).toBe(headers['X-Gitea-Signature']);
  });

  it('accepts any secret of a rotation list, in any position', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    expect(verifySignature(body, headers, ['new-secret', FIXTURE_SECRET])).toBe(true);
    expect(verifySignature(body, headers, [FIXTURE_SECRET, 'new-secret'])).toBe(true);
    expect(verifySignature(body, headers, ['new-secret', 'older-secret'])).toBe(false);
  });

  it('an empty secret list, or only empty secrets, never verifies', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    expect(verifySignature(body, headers, [])).toBe(false);
    expect(verifySignature(body, headers, [''])).toBe(false);
    // A body signed with the empty key must not pass because an empty secret is configured.
    const forged = signedHeaders(headers, body, '');
    expect(verifySignature(body, forged, [''])).toBe(false);
  });

  it('accepts X-Hub-Signature-256 alone (sha256= prefix)', () => {
    const { body, headers } = loadFixture('pull_request_comment_created');
    const hubOnly = withoutHeader(withoutHeader(headers, 'X-Gitea-Signature'), 'X-Gogs-Signature');
    expect(verifySignature(body, hubOnly, [FIXTURE_SECRET])).toBe(true);
    expect(verifySignature(body, { ...hubOnly, 'X-Hub-Signature-256': headers['X-Gitea-Signature']! }, [FIXTURE_SECRET])).toBe(false);
  });

  it('falls back to X-Hub-Signature-256 when X-Gitea-Signature is empty', () => {
    const { body, headers } = loadFixture('issue_comment_edited');
    expect(verifySignature(body, { ...headers, 'X-Gitea-Signature': '' }, [FIXTURE_SECRET])).toBe(true);
  });

  it('empty signature headers (a hook without secret) fail', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const empty = { ...headers, 'X-Gitea-Signature': '', 'X-Gogs-Signature': '', 'X-Hub-Signature-256': 'sha256=' };
    expect(verifySignature(body, empty, [FIXTURE_SECRET])).toBe(false);
  });

  it('missing signature headers fail', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const none = withoutHeader(withoutHeader(headers, 'X-Gitea-Signature'), 'X-Hub-Signature-256');
    expect(verifySignature(body, none, [FIXTURE_SECRET])).toBe(false);
    expect(verifyRequest(body, none, [FIXTURE_SECRET])).toEqual({ ok: false, reason: 'invalid_signature' });
  });

  it('a malformed, truncated or sha1 signature fails', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const sig = headers['X-Gitea-Signature']!;
    const only = (value: string) => ({ ...withoutHeader(headers, 'X-Hub-Signature-256'), 'X-Gitea-Signature': value });
    expect(verifySignature(body, only(sig.slice(0, 63)), [FIXTURE_SECRET])).toBe(false);
    expect(verifySignature(body, only(sig + '0'), [FIXTURE_SECRET])).toBe(false);
    expect(verifySignature(body, only(sig.slice(0, 62) + 'zz'), [FIXTURE_SECRET])).toBe(false);
    expect(verifySignature(body, only(`sha256=${sig}`), [FIXTURE_SECRET])).toBe(false);
    expect(verifySignature(body, only(headers['X-Hub-Signature']!), [FIXTURE_SECRET])).toBe(false);
    // Upper-case hex is the same digest.
    expect(verifySignature(body, only(sig.toUpperCase()), [FIXTURE_SECRET])).toBe(true);
  });

  it('one flipped byte anywhere in the body fails', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    for (const at of [0, 1, Math.floor(body.length / 2), body.length - 1]) {
      const tampered = Buffer.from(body);
      tampered[at] = tampered[at]! ^ 0x01;
      expect(verifySignature(tampered, headers, [FIXTURE_SECRET])).toBe(false);
    }
    // A trailing newline is a different body too.
    expect(verifySignature(Buffer.concat([body, Buffer.from('\n')]), headers, [FIXTURE_SECRET])).toBe(false);
  });

  it('works with Node-style lower-case header keys', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    expect(verifySignature(body, lower, [FIXTURE_SECRET])).toBe(true);
  });

  it('a header sent twice as separate values counts as missing', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const sig = headers['X-Gitea-Signature']!;
    const twice = { 'x-gitea-signature': [sig, sig] as readonly string[] };
    expect(verifySignature(body, twice, [FIXTURE_SECRET])).toBe(false);
  });
});

describe('extractPayload and the form content type', () => {
  it('json: the body itself, with or without charset', () => {
    const { body } = loadFixture('issue_comment_created_on_issue');
    expect(extractPayload(body, 'application/json')).toEqual({ json: body });
    expect(extractPayload(body, 'Application/JSON; charset=utf-8')).toEqual({ json: body });
  });

  it('form: the signature is over the JSON inside payload=, byte-exact', () => {
    for (const name of ['issue_comment_created_on_issue', 'pull_request_comment_created'] as const) {
      const { body, headers } = loadFixture(name);
      const form = formEncode(body);
      expect(form.includes(Buffer.from('+'))).toBe(true); // spaces were encoded Go-style
      const formHeaders = { ...headers, 'Content-Type': 'application/x-www-form-urlencoded' };
      const extracted = extractPayload(form, 'application/x-www-form-urlencoded');
      expect(extracted).toEqual({ json: body });
      expect(verifyRequest(form, formHeaders, [FIXTURE_SECRET])).toEqual({ ok: true, json: body });
      // The form bytes themselves are not what Gitea signed.
      expect(verifySignature(form, formHeaders, [FIXTURE_SECRET])).toBe(false);
    }
  });

  it('form: unicode and RTL/bidi characters survive byte-exact', () => {
    const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
      p.comment.body = '@ccweb-bot 请修复 — مرحبا \u202Eevil\u202C 🚀 e\u0301';
    });
    const form = formEncode(d.body);
    const res = verifyRequest(form, { ...d.headers, 'Content-Type': 'application/x-www-form-urlencoded' }, [FIXTURE_SECRET]);
    expect(res.ok).toBe(true);
    expect(res.ok && res.json.equals(d.body)).toBe(true);
  });

  it('form: other fields are ignored; missing, empty, repeated or malformed payload is invalid_form', () => {
    const json = Buffer.from('{"a":1}');
    expect(extractPayload(Buffer.from('x=1&payload=%7B%22a%22%3A1%7D&y=2'), 'application/x-www-form-urlencoded')).toEqual({ json });
    expect(extractPayload(Buffer.from('x=1'), 'application/x-www-form-urlencoded')).toEqual({ error: 'invalid_form' });
    expect(extractPayload(Buffer.from('payload='), 'application/x-www-form-urlencoded')).toEqual({ error: 'invalid_form' });
    expect(extractPayload(Buffer.from(''), 'application/x-www-form-urlencoded')).toEqual({ error: 'invalid_form' });
    expect(extractPayload(Buffer.from('payload=1&payload=2'), 'application/x-www-form-urlencoded')).toEqual({ error: 'invalid_form' });
    expect(extractPayload(Buffer.from('payload=%7'), 'application/x-www-form-urlencoded')).toEqual({ error: 'invalid_form' });
    expect(extractPayload(Buffer.from('payload=%zz'), 'application/x-www-form-urlencoded')).toEqual({ error: 'invalid_form' });
  });

  it('a wrong or missing content type is unsupported_content_type, whatever the signature', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    for (const type of ['text/plain', 'application/xml', 'multipart/form-data; boundary=x', '']) {
      expect(extractPayload(body, type)).toEqual({ error: 'unsupported_content_type' });
      expect(verifyRequest(body, { ...headers, 'Content-Type': type }, [FIXTURE_SECRET])).toEqual({
        ok: false,
        reason: 'unsupported_content_type',
      });
    }
    expect(verifyRequest(body, withoutHeader(headers, 'Content-Type'), [FIXTURE_SECRET])).toEqual({
      ok: false,
      reason: 'unsupported_content_type',
    });
  });

  it('hmacHex helper agrees with the fixtures (sanity of the support module)', () => {
    const { body, headers } = loadFixture('issue_comment_created_by_bot');
    expect(hmacHex(body, FIXTURE_SECRET)).toBe(headers['X-Gitea-Signature']);
  });
});
