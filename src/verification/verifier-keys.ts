/** The verifier actor kind and the keys it writes under, shared by its effects and its projection. */
export const VERIFIER_KIND = 'verifier';

export function verifierActorId(turnKey: string): string {
  return `verifier:${turnKey}`;
}

/** The `comments` row of a turn's reply: `<turnKey>:reply`. */
export function replyCommentKey(turnKey: string): string {
  return `${turnKey}:reply`;
}

/** The verifier's final states: it settles there and its outcome is read. */
export const FINAL_VERIFIER_STATES: ReadonlySet<string> = new Set(['confirmed', 'confirmed_via_fallback', 'failed']);
