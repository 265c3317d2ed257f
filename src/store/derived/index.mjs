// The derived-record formats the store knows (see intake-accept-v1.mjs for why they exist). A journal
// op `["x", name, payload]` stands for the ops `expand(payload)` returns; main thread (apply, replay)
// and compaction worker expand with the same code, so memory, checkpoint and archives agree.
import * as intakeAcceptV1 from './intake-accept-v1.mjs';

const FORMATS = new Map([[intakeAcceptV1.NAME, intakeAcceptV1]]);

export function derivedFormat(name) {
  const format = FORMATS.get(name);
  if (!format) throw new Error(`unknown derived-record format ${JSON.stringify(name)} (written by a newer version?)`);
  return format;
}

/** The ops a derived record stands for. Throws for an unknown format or a malformed payload. */
export function expandDerived(name, payload) {
  if (!payload || typeof payload !== 'object' || !Number.isSafeInteger(payload.a0)) {
    throw new Error(`derived record ${JSON.stringify(name)} without a first audit seq`);
  }
  return derivedFormat(name).expand(payload);
}
