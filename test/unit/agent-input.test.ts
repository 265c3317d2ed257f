// The agent's input limit: how a comment is counted against it, and that the
// largest comment intake lets through still fits Codex's limit once the turn's framing is added.
// The Codex figure itself (1,048,576 code points, JSON-RPC -32602 input_too_large) was measured
// against the real app-server; see src/domain/agent-input.ts.
import { describe, expect, it } from 'vitest';
import { CODEX_TURN_INPUT_MAX_CHARS, COMMENT_MAX_CHARS, codePointCount, commentInputChars, inputTooLarge } from '../../src/domain/agent-input.js';
import { developerInstructions, plainTurnText, turnInputText } from '../../src/sessions/developer-instructions.js';
import type { TaskRecord } from '../../src/domain/records.js';

describe('inputTooLarge', () => {
  it('accepts up to the limit and refuses one character more, naming both figures', () => {
    expect(inputTooLarge('a'.repeat(COMMENT_MAX_CHARS))).toBeNull();
    expect(inputTooLarge('a'.repeat(COMMENT_MAX_CHARS + 1))).toEqual({ chars: COMMENT_MAX_CHARS + 1, limit: COMMENT_MAX_CHARS });
  });

  it('counts code points as Codex does: an emoji (two UTF-16 units, four UTF-8 bytes) is one character', () => {
    const emoji = '😀'.repeat(COMMENT_MAX_CHARS);
    expect(emoji.length).toBe(2 * COMMENT_MAX_CHARS);
    expect(codePointCount(emoji)).toBe(COMMENT_MAX_CHARS);
    expect(inputTooLarge(emoji)).toBeNull();
    expect(inputTooLarge(`${emoji}x`)?.chars).toBe(COMMENT_MAX_CHARS + 1);
    // A lone surrogate is one code point too.
    expect(codePointCount('\ud83d')).toBe(1);
  });

  it('counts the longer fences a run of backticks needs', () => {
    expect(commentInputChars('plain ``` text')).toBe(14 + 2);
    const ticks = '`'.repeat(400_000);
    // Quoted between fences of 400,001 backticks each: 1.2 million characters, over the limit.
    expect(inputTooLarge(ticks)).toEqual({ chars: 400_000 + 2 * (400_001 - 3), limit: COMMENT_MAX_CHARS });
  });
});

describe('the largest comment intake accepts fits the turn Codex takes', () => {
  const long = 'x'.repeat(200);
  const task = {
    taskId: 'gitea-task-0123456789abcdef',
    author: 'a'.repeat(40),
    commentUrl: `https://${long}.example/${long}/${long}/issues/999999999#issuecomment-999999999`,
    resource: { kind: 'pull_request', number: 999_999_999 },
    owner: long,
    repo: long,
    followUps: [],
  } as unknown as TaskRecord;
  const marker = `<!-- ccweb-gitea:task=${task.taskId} turn=${'t'.repeat(64)} -->`;
  const context = { botLogin: 'b'.repeat(40), giteaUrl: `https://${long}.example`, owner: long, repo: long, kind: 'pull_request' as const, number: 999_999_999, marker };

  for (const [what, instruction] of [
    ['plain text', 'y'.repeat(COMMENT_MAX_CHARS)],
    // As long as the rule allows with the fence grown to the most it can be.
    ['a long backtick run', '`'.repeat(Math.floor((COMMENT_MAX_CHARS + 4) / 3))],
  ] as const) {
    it(`${what}: with the plain-turn fallback's developer instructions included`, () => {
      expect(inputTooLarge(instruction)).toBeNull();
      const input = turnInputText({ ...task, instruction }, { kind: 'normal', marker });
      const plain = plainTurnText(developerInstructions(context), input);
      const framing = codePointCount(plain) - codePointCount(instruction);
      console.log(`${what}: comment ${commentInputChars(instruction)} + framing → turn of ${codePointCount(plain)} characters (Codex limit ${CODEX_TURN_INPUT_MAX_CHARS})`);
      expect(framing).toBeGreaterThan(0);
      expect(codePointCount(plain)).toBeLessThanOrEqual(CODEX_TURN_INPUT_MAX_CHARS);
    });
  }
});
