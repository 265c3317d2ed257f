import type { TurnRecord } from '../domain/records.js';

/**
 * The turn whose reply a verifier checks. After a restart the executor may hand over the
 * `reply_retry` turn: the verifier belongs to the latest normal turn that started before it.
 */
export function verifiedTurnOf(turn: TurnRecord, turnsOfTask: readonly TurnRecord[]): TurnRecord {
  if (turn.kind !== 'reply_retry') return turn;
  const normals = turnsOfTask.filter((t) => t.kind === 'normal' && t.startedAt <= turn.startedAt);
  return normals.at(-1) ?? turn;
}
