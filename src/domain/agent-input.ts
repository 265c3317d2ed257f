// How much text the agent can take in one turn, and how a comment's size is
// counted against it. Pure; intake refuses a mention over the limit with one comment, and the
// session manager quotes comments with the same fence, so both count the same characters.
//
// Measured against the real `codex app-server` (0.171.0): `turn/start` with more text than this
// answers JSON-RPC -32602 "Input exceeds the maximum length of 1048576 characters." with
// `data: {input_error_code: "input_too_large", max_chars: 1048576, actual_chars}`. Characters are
// Unicode scalar values (1,048,576 emoji — 4 MiB of UTF-8 — were accepted, one more refused), summed
// over every input item of the turn.

/** Codex's own limit on one turn's input, in characters (Unicode code points). */
export const CODEX_TURN_INPUT_MAX_CHARS = 1_048_576;

/**
 * The longest comment the agent is given. The rest of Codex's limit is the turn's own framing: who
 * wrote it, where, the fences, the marker, and in the plain-turn fallback the developer
 * instructions — a few thousand characters (test/unit/agent-input.test.ts checks the worst case).
 */
export const COMMENT_MAX_CHARS = 1_000_000;

/** Characters as Codex counts them: code points, so a surrogate pair is one. */
export function codePointCount(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // A high surrogate followed by a low one is a single code point.
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

function longestBacktickRun(text: string): number {
  let longest = 0;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) === 96) {
      run++;
      if (run > longest) longest = run;
    } else run = 0;
  }
  return longest;
}

/** The fence that quotes `text` for the agent: longer than any backtick run in it (at least 3). */
export function fenceFor(text: string): string {
  return '`'.repeat(Math.max(2, longestBacktickRun(text)) + 1);
}

/**
 * What a comment costs the agent's input: its characters, plus what its fences grow by past the
 * usual three backticks (a comment of a million backticks would otherwise be quoted at three times
 * its size). For ordinary text this is its length.
 */
export function commentInputChars(body: string): number {
  return codePointCount(body) + 2 * (fenceFor(body).length - 3);
}

export interface InputTooLarge {
  /** The comment's size as counted by `commentInputChars`. */
  chars: number;
  limit: number;
}

/** Null when the agent can take the comment; otherwise its size and the limit, for the notice. */
export function inputTooLarge(body: string, limit = COMMENT_MAX_CHARS): InputTooLarge | null {
  const chars = commentInputChars(body);
  return chars > limit ? { chars, limit } : null;
}
