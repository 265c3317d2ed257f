/** The verifier actor kind and the keys it writes under, shared by its effects and its projection. */
import { replyVerdictOf, replyVerifierMachine } from '../../machines/reply-verifier.js';

export const VERIFIER_KIND = 'verifier';

export function verifierActorId(turnKey: string): string {
  return `verifier:${turnKey}`;
}

/** The `comments` row of a turn's reply: `<turnKey>:reply`. */
export function replyCommentKey(turnKey: string): string {
  return `${turnKey}:reply`;
}

/** The verifier's final states (each one a verdict): it settles there and its outcome is read. */
export const FINAL_VERIFIER_STATES: ReadonlySet<string> = new Set(Object.keys(replyVerifierMachine.root.states).filter((s) => replyVerdictOf(s) !== null));
