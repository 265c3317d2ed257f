// Webhook authenticity: HMAC-SHA256 over the exact JSON bytes Gitea signed, compared in constant time.
//
// What Gitea signs (services/webhook/deliver.go): `hex(HMAC-SHA256(secret, PayloadContent))`, where
// PayloadContent is the JSON document. For a `json` hook the request body *is* those bytes; for a
// `form` hook the body is `payload=<url-encoded JSON>` (Go's `url.Values.Encode`, spaces as `+`)
// and the signature is still over the decoded JSON. So: extract the JSON bytes first, then verify.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { getHeader, type WebhookHeaders } from './headers.js';

export type ExtractPayloadResult =
  | { json: Buffer }
  | { error: 'unsupported_content_type' | 'invalid_form' };

export type VerifyRequestResult =
  | { ok: true; json: Buffer }
  | { ok: false; reason: 'invalid_signature' | 'unsupported_content_type' | 'invalid_form' };

const SHA256_HEX = /^[0-9a-fA-F]{64}$/;

/** Lower-case hex HMAC-SHA256 of `body` — what Gitea puts in `X-Gitea-Signature`. */
export function computeSignature(body: Buffer | string, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** The media type of a `Content-Type` value, lower-cased, without parameters (`; charset=…`). */
export function mediaType(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const type = contentType.split(';', 1)[0]?.trim().toLowerCase();
  return type === '' ? undefined : type;
}

/**
 * The JSON bytes Gitea signed. `application/json` → the body itself (byte-exact, no copy);
 * `application/x-www-form-urlencoded` → the value of the single `payload` field, percent-decoded
 * byte by byte (so the bytes are exactly what Gitea encoded, with no UTF-8 round trip).
 * Anything else → `unsupported_content_type`; a malformed form, a missing or repeated `payload`
 * → `invalid_form`.
 */
export function extractPayload(rawBody: Buffer, contentType: string | undefined): ExtractPayloadResult {
  const type = mediaType(contentType);
  if (type === 'application/json') return { json: rawBody };
  if (type !== 'application/x-www-form-urlencoded') return { error: 'unsupported_content_type' };

  let payload: Buffer | undefined;
  let start = 0;
  while (start <= rawBody.length) {
    let end = rawBody.indexOf(0x26 /* & */, start);
    if (end === -1) end = rawBody.length;
    const field = rawBody.subarray(start, end);
    start = end + 1;
    if (field.length === 0) continue;
    const eq = field.indexOf(0x3d /* = */);
    const rawName = eq === -1 ? field : field.subarray(0, eq);
    const name = percentDecode(rawName);
    if (name === undefined) return { error: 'invalid_form' };
    if (name.toString('latin1') !== 'payload') continue;
    if (payload !== undefined) return { error: 'invalid_form' };
    const value = percentDecode(eq === -1 ? Buffer.alloc(0) : field.subarray(eq + 1));
    if (value === undefined) return { error: 'invalid_form' };
    payload = value;
  }
  if (payload === undefined || payload.length === 0) return { error: 'invalid_form' };
  return { json: payload };
}

/** `application/x-www-form-urlencoded` decoding of one name or value; `undefined` on a bad `%XX`. */
function percentDecode(input: Buffer): Buffer | undefined {
  if (!input.includes(0x25 /* % */) && !input.includes(0x2b /* + */)) return input;
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    const byte = input[i]!;
    if (byte === 0x2b) {
      out[n++] = 0x20;
    } else if (byte === 0x25) {
      const hi = hexValue(input[i + 1]);
      const lo = hexValue(input[i + 2]);
      if (hi === undefined || lo === undefined) return undefined;
      out[n++] = hi * 16 + lo;
      i += 2;
    } else {
      out[n++] = byte;
    }
  }
  return out.subarray(0, n);
}

function hexValue(byte: number | undefined): number | undefined {
  if (byte === undefined) return undefined;
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x41 + 10;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x61 + 10;
  return undefined;
}

/**
 * The signature the request claims: `X-Gitea-Signature` (bare hex) if non-empty, else
 * `X-Hub-Signature-256` (`sha256=<hex>`). Gitea sends both with the same value, and both empty
 * when the hook has no secret.
 */
function claimedSignature(headers: WebhookHeaders): Buffer | undefined {
  const gitea = getHeader(headers, 'x-gitea-signature')?.trim();
  let hex: string | undefined;
  if (gitea !== undefined && gitea !== '') {
    hex = gitea;
  } else {
    const hub = getHeader(headers, 'x-hub-signature-256')?.trim();
    if (hub !== undefined && hub.toLowerCase().startsWith('sha256=')) hex = hub.slice('sha256='.length);
  }
  if (hex === undefined || !SHA256_HEX.test(hex)) return undefined;
  return Buffer.from(hex, 'hex');
}

/**
 * True when `signedBytes` (the JSON Gitea signed — see `extractPayload`) carries a valid
 * HMAC-SHA256 under any of `secrets` (several for rotation). A missing, empty or malformed
 * signature header, or no usable (non-empty) secret, is `false`. Every secret is tried (no early
 * exit) and each comparison is `timingSafeEqual` over two 32-byte digests, so timing reveals
 * neither the expected digest nor which secret matched.
 */
export function verifySignature(signedBytes: Buffer, headers: WebhookHeaders, secrets: readonly string[]): boolean {
  const claimed = claimedSignature(headers);
  if (claimed === undefined) return false;
  let valid = false;
  for (const secret of secrets) {
    if (typeof secret !== 'string' || secret.length === 0) continue;
    const expected = createHmac('sha256', secret).update(signedBytes).digest();
    // Both are 32 bytes (claimed was validated as 64 hex digits).
    if (timingSafeEqual(expected, claimed)) valid = true;
  }
  return valid;
}

/**
 * Content type + signature in one step, over the right bytes: the JSON to parse next on success.
 * The caller maps failures to HTTP (e.g. `invalid_signature`/`invalid_form` → 401,
 * `unsupported_content_type` → 415) and never echoes the reason to an unauthenticated caller.
 */
export function verifyRequest(rawBody: Buffer, headers: WebhookHeaders, secrets: readonly string[]): VerifyRequestResult {
  const extracted = extractPayload(rawBody, getHeader(headers, 'content-type'));
  if ('error' in extracted) return { ok: false, reason: extracted.error };
  if (!verifySignature(extracted.json, headers, secrets)) return { ok: false, reason: 'invalid_signature' };
  return { ok: true, json: extracted.json };
}
