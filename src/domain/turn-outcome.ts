// What one agent turn came to for its task, declared once (sessions/, the
// executor's port and codex/ would otherwise each write their own copy of this union).
// sessions/turn-result.ts decides it from Codex's report; the executor maps it to the task event.
// In domain/ because both sides name it and neither imports the other.
import type { CommentCall } from './records.js';

export type TurnOutcome =
  | { kind: 'replied'; turnKey: string; turnId: string; finalMessage: string | null; commentCall: CommentCall }
  | { kind: 'no_comment'; turnKey: string; turnId: string; finalMessage: string | null }
  | { kind: 'waiting_user'; turnKey: string; turnId: string; question: string; commentCall: CommentCall | null }
  | { kind: 'failed'; turnKey: string; turnId: string | null; errorCode: string; retryable: boolean }
  | { kind: 'interrupted'; turnKey: string; turnId: string };
