// Edges of the intake's pure rules that the main webhook tests pass over: header values with
// surrounding whitespace, empty or repeated headers, the signature headers' forms, the
// form-encoded body's corner cases (HMAC over the exact JSON bytes Gitea signed), an empty bot login.
import { describe, expect, it } from 'vitest';
import { classifyEvent, isBotSelf } from '../../src/webhook/classify.js';
import { getHeader } from '../../src/webhook/headers.js';
import { findMentions, parseCommand } from '../../src/webhook/mention.js';
import { computeSignature, extractPayload, mediaType, verifySignature } from '../../src/webhook/verify-signature.js';

const JSON_BYTES = Buffer.from('{"a":1}');
const SECRET = 'hook-secret';
const SIG = computeSignature(JSON_BYTES, SECRET);

describe('event headers', () => {
  it('surrounding whitespace is ignored; an empty header is missing', () => {
    expect(classifyEvent({ 'x-gitea-event': ' issue_comment ', 'x-gitea-event-type': ' pull_request_comment ' })).toEqual({ ok: true, eventType: 'pull_request_comment' });
    expect(classifyEvent({ 'x-gitea-event': '  ', 'x-gitea-event-type': 'issue_comment' })).toEqual({
      ok: false,
      outcome: 'invalid',
      code: 'invalid_payload',
      issues: 'missing X-Gitea-Event header',
    });
    expect(classifyEvent({ 'x-gitea-event': 'issue_comment', 'x-gitea-event-type': '' })).toEqual({
      ok: false,
      outcome: 'invalid',
      code: 'invalid_payload',
      issues: 'missing X-Gitea-Event-Type header',
    });
  });

  it('another event with a comment event type is still unsupported', () => {
    expect(classifyEvent({ 'x-gitea-event': 'issues', 'x-gitea-event-type': 'issue_comment' })).toEqual({ ok: false, outcome: 'ignored', reason: 'unsupported_event' });
  });

  it('a header sent twice is ambiguous, so missing; once in a list is its value', () => {
    expect(getHeader({ 'x-a': ['1', '2'] }, 'X-A')).toBeUndefined();
    expect(getHeader({ 'x-a': ['1'] }, 'X-A')).toBe('1');
    expect(getHeader({ 'X-A': '3' }, 'x-a')).toBe('3');
  });
});

describe('signature headers', () => {
  it('X-Gitea-Signature and X-Hub-Signature-256 are read with surrounding whitespace', () => {
    expect(verifySignature(JSON_BYTES, { 'x-gitea-signature': ` ${SIG} ` }, [SECRET])).toBe(true);
    expect(verifySignature(JSON_BYTES, { 'x-hub-signature-256': ` sha256=${SIG} ` }, [SECRET])).toBe(true);
  });

  it('X-Hub-Signature-256 without its sha256= prefix is not a signature', () => {
    expect(verifySignature(JSON_BYTES, { 'x-hub-signature-256': SIG }, [SECRET])).toBe(false);
  });

  it('an empty secret is skipped, another secret still verifies', () => {
    expect(verifySignature(JSON_BYTES, { 'x-gitea-signature': computeSignature(JSON_BYTES, '') }, ['', SECRET])).toBe(false);
    expect(verifySignature(JSON_BYTES, { 'x-gitea-signature': SIG }, ['', SECRET])).toBe(true);
  });
});

describe('the form-encoded body: the JSON bytes Gitea signed', () => {
  const form = 'application/x-www-form-urlencoded';

  it('decodes lower- and upper-case percent escapes and +, skipping empty fields', () => {
    const r = extractPayload(Buffer.from('&&other=1&payload=%7b%22a%22%3A1%2c%22b%22%3a%22x+y%22%7D&'), form);
    expect(r).toEqual({ json: Buffer.from('{"a":1,"b":"x y"}') });
  });

  it('every hex digit decodes to its value', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const enc = [...all].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
    expect(extractPayload(Buffer.from(`payload=${enc}`), form)).toEqual({ json: all });
    expect(extractPayload(Buffer.from(`payload=${enc.toUpperCase()}`), form)).toEqual({ json: all });
  });

  it('a bad escape in a name or value, a bare or repeated payload field: invalid_form', () => {
    for (const body of ['pay%zzload=1', 'payload=%7', 'payload=%g0', 'payload=%0g', 'payload=%!0', 'payload=%:0', 'payload=%G0', 'payload=%`0', 'payload', 'payload=', 'payload=1&payload=1', 'x=%']) {
      expect(extractPayload(Buffer.from(body), form), body).toEqual({ error: 'invalid_form' });
    }
  });

  it('a field named with escapes counts as payload; a longer name does not', () => {
    expect(extractPayload(Buffer.from('pay%6Coad=1'), form)).toEqual({ json: Buffer.from('1') });
    expect(extractPayload(Buffer.from('payloadx=1'), form)).toEqual({ error: 'invalid_form' });
  });

  it('the media type is case- and space-insensitive; an empty one is none', () => {
    expect(mediaType(' Application/JSON ; charset=utf-8')).toBe('application/json');
    expect(mediaType(' ; charset=utf-8')).toBeUndefined();
    expect(mediaType('')).toBeUndefined();
    expect(extractPayload(JSON_BYTES, ' Application/Json; charset=utf-8')).toEqual({ json: JSON_BYTES });
  });
});

describe('an empty bot login', () => {
  it('mentions nobody and is nobody', () => {
    expect(findMentions('hello @ there', '')).toEqual([]);
    expect(parseCommand('hello @ there', '')).toBeNull();
    expect(isBotSelf('', '')).toBe(false);
  });
});
