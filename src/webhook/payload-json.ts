// A webhook body as JSON: a Buffer or string is decoded as strict UTF-8 and parsed; anything else is
// taken as already parsed (tests, the intake's own callers). Invalid UTF-8 or JSON is one answer.
const utf8 = new TextDecoder('utf-8', { fatal: true });

export function payloadJson(json: Buffer | string | unknown): { ok: true; data: unknown } | { ok: false } {
  if (!Buffer.isBuffer(json) && typeof json !== 'string') return { ok: true, data: json };
  try {
    return { ok: true, data: JSON.parse(typeof json === 'string' ? json : utf8.decode(json)) };
  } catch {
    return { ok: false };
  }
}
