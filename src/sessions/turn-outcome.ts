// Pure reading of a finished turn's items (spec §5.3.5): did the agent post its comment through
// the gitea tool, and did it ask the user something. Every gitea-mcp generation's comment tool is
// recognised: `create_issue_comment {index}` (old) and `issue_write {method:"add_comment",
// index|issue_number}` (new). The verifier, not this, decides whether the comment really landed.
import type { CommentCall } from '../domain/records.js';
import type { ThreadItem } from '../codex/protocol/ts/v2/ThreadItem.js';
import { GITEA_MCP_SERVER_NAME } from '../codex/thread-params.js';
import { WAITING_USER_SENTINEL } from './developer-instructions.js';

// The turn record's field (domain/records.ts), found here.
export type { CommentCall };

function asRecord(v: unknown): Record<string, unknown> | null {
  if (typeof v === 'string') {
    try {
      return asRecord(JSON.parse(v));
    } catch {
      return null;
    }
  }
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

function toNumber(v: unknown): number | null {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && /^\d+$/.test(v)) return Number(v);
  return null;
}

function errorOf(item: Record<string, unknown>): string | null {
  const e = item.error;
  if (e === null || e === undefined) return null;
  if (typeof e === 'string') return e.slice(0, 300);
  const msg = asRecord(e)?.message;
  return typeof msg === 'string' ? msg.slice(0, 300) : JSON.stringify(e).slice(0, 300);
}

/**
 * The last gitea comment-creating call on this resource among the items, or null. Calls to other
 * issues/PRs are not a reply here (and are not trusted to be).
 */
export function findCommentCall(items: readonly ThreadItem[], resourceNumber: number): CommentCall | null {
  let found: CommentCall | null = null;
  for (const raw of items) {
    const item = raw as unknown as Record<string, unknown>;
    if (item.type !== 'mcpToolCall' || item.server !== GITEA_MCP_SERVER_NAME) continue;
    const tool = String(item.tool ?? '');
    const args = asRecord(item.arguments) ?? {};
    const isComment = tool === 'create_issue_comment' || (tool === 'issue_write' && args.method === 'add_comment');
    if (!isComment) continue;
    const index = toNumber(args.index) ?? toNumber(args.issue_number);
    if (index !== resourceNumber) continue;
    const result = asRecord(item.result);
    const accepted = item.status === 'completed' && result?.isError !== true;
    found = { tool, index, accepted, error: accepted ? null : errorOf(item) ?? (result?.isError ? 'tool returned an error' : `status ${String(item.status)}`) };
  }
  return found;
}

/** The question when the final message ends with the waiting-for-user line, else null. */
export function waitingUserQuestion(finalMessage: string | null): string | null {
  if (!finalMessage) return null;
  const lines = finalMessage.replace(/\s+$/, '').split('\n');
  if (lines.at(-1)?.trim() !== WAITING_USER_SENTINEL) return null;
  const question = lines.slice(0, -1).join('\n').trim();
  return question.length > 0 ? question : '(the agent is waiting for your answer)';
}

/** The questions of Codex's own `item/tool/requestUserInput` (if a future mode sends one), as text. */
export function requestedQuestionsText(requests: ReadonlyArray<{ questions: unknown[] }>): string | null {
  const texts: string[] = [];
  for (const r of requests) {
    for (const q of r.questions) {
      const text = asRecord(q)?.question;
      if (typeof text === 'string' && text.trim()) texts.push(text.trim());
    }
  }
  return texts.length > 0 ? texts.join('\n') : null;
}
