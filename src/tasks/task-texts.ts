// A comment's text is stored once per task: every task transition rewrites the whole task record, so
// a 1.9 MB comment stored in it would be written again at each of them. A text longer than
// INLINE_TEXT_LIMIT goes into its own `task_texts` record, written once, archived from the start
// (it is only read by key); the task record keeps a preview and the reference. Readers that need
// the whole text (the agent's instructions) go through `withFullTexts`.
//
// A mention that is refused or rejected never runs, so its text is never needed whole, and anyone
// who can read can send many large ones (three 1.4 MB mentions would add 4.2 MB to the store). Its
// task keeps only an excerpt, the text's length and its sha256 (`taskWithExcerptOnly`), whatever the
// text's size.
import { createHash } from 'node:crypto';
import type { TaskRecord } from '../domain/records.js';
import type { Store, Tx } from '../store/types.js';

export const TASK_TEXTS = 'task_texts' as const;
/** Characters kept in the task record itself; longer texts are stored once, by reference. */
export const INLINE_TEXT_LIMIT = 4096;

export interface TaskTextRecord {
  key: string;
  taskId: string;
  text: string;
  createdAt: string;
}

/** Characters of a refused or rejected mention's text kept on its task. */
export const EXCERPT_CHARS = 200;

export interface TextExcerpt {
  excerpt: string;
  /** The whole text's length in UTF-16 code units, as `String.length`. */
  length: number;
  /** `sha256:<hex>` of the whole text's UTF-8 bytes: the operator can match it against the comment on Gitea. */
  sha256: string;
}

/** The first EXCERPT_CHARS characters (never half of a surrogate pair), the length and the hash. */
export function textExcerpt(text: string): TextExcerpt {
  let excerpt = text.slice(0, EXCERPT_CHARS);
  const last = excerpt.charCodeAt(excerpt.length - 1);
  if (excerpt.length < text.length && last >= 0xd800 && last <= 0xdbff) excerpt = excerpt.slice(0, -1);
  return { excerpt, length: text.length, sha256: 'sha256:' + createHash('sha256').update(text, 'utf8').digest('hex') };
}

/**
 * The task record of a mention that will never run: the instruction cut to its excerpt, with
 * `instructionExcerptOnly`, `instructionLength` and `instructionSha256` saying so. Nothing goes to
 * `task_texts`. The retention sweep keys on `instructionExcerptOnly` (security-event retention).
 */
export function taskWithExcerptOnly(task: TaskRecord): TaskRecord {
  const { excerpt, length, sha256 } = textExcerpt(task.instruction);
  return { ...task, instruction: excerpt, instructionExcerptOnly: true, instructionLength: length, instructionSha256: sha256 };
}

type FollowUp = NonNullable<TaskRecord['followUps']>[number];

async function storeOnce(tx: Tx, key: string, taskId: string, text: string, at: string): Promise<void> {
  await tx.insertIfAbsent<TaskTextRecord>(TASK_TEXTS, key, { key, taskId, text, createdAt: at });
  await tx.archive(TASK_TEXTS, key);
}

/** The task record to insert: a long instruction moved to `task_texts` (inside the same transaction). */
export async function taskWithTextStoredOnce(tx: Tx, task: TaskRecord): Promise<TaskRecord> {
  if (task.instruction.length <= INLINE_TEXT_LIMIT) return task;
  const key = `${task.taskId}:instruction`;
  await storeOnce(tx, key, task.taskId, task.instruction, task.createdAt);
  return { ...task, instruction: task.instruction.slice(0, INLINE_TEXT_LIMIT), instructionRef: key, instructionLength: task.instruction.length };
}

/**
 * The task record of a comment refused for its size: a preview and the length, the rest dropped
 * (it would never be read; a refused 1 MB comment must not cost the store 1 MB).
 */
export function taskWithTextDropped(task: TaskRecord): TaskRecord {
  if (task.instruction.length <= INLINE_TEXT_LIMIT) return task;
  return { ...task, instruction: task.instruction.slice(0, INLINE_TEXT_LIMIT), instructionLength: task.instruction.length };
}

/** A follow-up entry for the task record: a long body moved to `task_texts`. */
export async function followUpWithTextStoredOnce(tx: Tx, taskId: string, entry: FollowUp): Promise<FollowUp> {
  if (entry.body.length <= INLINE_TEXT_LIMIT) return entry;
  const key = `${taskId}:follow-up:${entry.commentId}`;
  await storeOnce(tx, key, taskId, entry.body, entry.at);
  return { ...entry, body: entry.body.slice(0, INLINE_TEXT_LIMIT), bodyRef: key };
}

/** The task with its instruction and follow-up bodies whole (read back from `task_texts`). */
export async function withFullTexts(store: Pick<Store, 'get'>, task: TaskRecord): Promise<TaskRecord> {
  const full = async (ref: string | undefined, inline: string): Promise<string> => {
    if (typeof ref !== 'string') return inline;
    return (await store.get<TaskTextRecord>(TASK_TEXTS, ref))?.text ?? inline;
  };
  const hasRefs = typeof task.instructionRef === 'string' || (task.followUps ?? []).some((f) => typeof f.bodyRef === 'string');
  if (!hasRefs) return task;
  return {
    ...task,
    instruction: await full(task.instructionRef, task.instruction),
    ...(task.followUps ? { followUps: await Promise.all(task.followUps.map(async (f) => ({ ...f, body: await full(f.bodyRef, f.body) }))) } : {}),
  };
}
