// The service's own status comments (spec §6.4), in the language of CCWEB_LOCALE (the catalogue in
// src/messages/). Only data the service produced goes in: the task id, a Gitea login (checked
// against Gitea's login alphabet) and a fixed sentence per error code. Nothing from the untrusted
// comment text is ever echoed back.
import { TASK_STATE, taskStateHas, taskStatesWith, type TaskState } from '../../machines/task-lifecycle.js';
import type { ProgressStage } from '../domain/record-fields.js';
import type { TaskRecord } from '../domain/records.js';
import { DEFAULT_LOCALE, messages, type Locale } from '../messages/catalogue.js';
import { pathsForText } from './path-text.js';

/**
 * The states that get a failure receipt, by name, for the text each one gets (the machine's
 * `failureReceipt` tag says which they are; test/unit/task-lifecycle-table.test.ts pins it to these).
 */
export type FailureReceiptState = Extract<TaskState, 'failed' | 'failed_reply' | 'aborted' | 'cancelled'>;

/** Task states that get one failure receipt (the machine's `failureReceipt` tag); running/waiting/success states get none (§5.2.5). */
export const FAILURE_RECEIPT_STATES = taskStatesWith('failureReceipt') as readonly FailureReceiptState[];

export function isFailureReceiptState(state: string): state is FailureReceiptState {
  return taskStateHas(state, 'failureReceipt');
}

/** A plain sentence for an error code; unknown codes get a generic one (the code is shown beside it). */
export function describeErrorCode(code: string | null | undefined, locale: Locale = DEFAULT_LOCALE): string {
  const m = messages(locale);
  if (!code) return m.unexpectedError;
  return (m.errors as Record<string, string>)[code] ?? m.unexpectedError;
}

const LOGIN_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;

/** `@alice` for a Gitea login, or null when the text is not a plain login. */
export function mentionOf(login: string | null | undefined): string | null {
  return login && LOGIN_RE.test(login) ? `@${login}` : null;
}

/** Who stopped a task, from the runtime's `by` (`admin:alice`, `gitea:user:bob`, `bob`). */
export function describeStopper(by: string | null | undefined, locale: Locale = DEFAULT_LOCALE): string {
  const words = messages(locale).stoppers;
  if (!by) return words.someone;
  if (by.startsWith('admin:')) {
    const name = by.slice('admin:'.length);
    return LOGIN_RE.test(name) ? words.operator(name) : words.anOperator;
  }
  if (by === 'system') return words.service;
  const login = by.startsWith('gitea:user:') ? by.slice('gitea:user:'.length) : by;
  return mentionOf(login) ?? words.someone;
}

/** The receipt's first line; it says what the request is at `stage` (as posted: queued). */
export function receivedReceiptText(task: Pick<TaskRecord, 'taskId' | 'author'>, locale: Locale = DEFAULT_LOCALE, stage: ProgressStage = 'queued'): string {
  const m = messages(locale);
  return m.received({ taskId: task.taskId, mention: mentionOf(task.author), status: m.progress.headline[stage] });
}

/** A place an unpublished change is kept, as the service names it on Gitea: a branch of its workspace and a patch under `patches/`. */
export interface KeptPlace {
  branch: string;
  patch: string;
}

/** What of a task's change did not reach Gitea and where it is kept. */
export interface UnpublishedChange {
  /** CCWEB_DELIVERY=off: nothing was published by choice of the operator. */
  deliveryOff: boolean;
  /** The whole change, unpublished (refused, or delivery off). */
  kept: KeptPlace | null;
  /** Paths left out of the commit (CI definitions), named and kept apart. */
  withheld: (KeptPlace & { paths: string[]; more: number }) | null;
}

const plain = (s: unknown) => (typeof s === 'string' ? s : '').replace(/[^A-Za-z0-9._/-]/g, '_');
const patchName = (file: unknown) => `patches/${plain(typeof file === 'string' ? (file.split('/').at(-1) ?? '') : '')}`;

/**
 * Read from the task's publish record, a stored record: every field is checked, and what reaches the
 * comment is reduced to a plain alphabet (a withheld path came from the agent's change).
 */
export function unpublishedChangeOf(publish: unknown): UnpublishedChange {
  const p = (publish ?? {}) as { status?: unknown; kept?: { branch?: unknown; patchFile?: unknown } | null; withheld?: { paths?: unknown; branch?: unknown; patchFile?: unknown } | null };
  // A change published after all (a later publish of the task) is not "kept": an earlier attempt's branch is left unsaid.
  const kept = p.status !== 'published' && p.kept && typeof p.kept.branch === 'string' && typeof p.kept.patchFile === 'string' ? { branch: plain(p.kept.branch), patch: patchName(p.kept.patchFile) } : null;
  const w = p.withheld;
  const paths = Array.isArray(w?.paths) ? w.paths.filter((x): x is string => typeof x === 'string') : [];
  const { shown, more } = pathsForText(paths);
  return {
    deliveryOff: p.status === 'not_published',
    kept,
    withheld: w && paths.length > 0 ? { paths: shown, more, branch: plain(w.branch), patch: patchName(w.patchFile) } : null,
  };
}

/** The sentences saying what was not published and where it is kept, in the service's own words: nothing is lost. */
export function unpublishedSentences(u: UnpublishedChange, locale: Locale = DEFAULT_LOCALE): string[] {
  const p = messages(locale).progress;
  return [
    ...(u.deliveryOff ? [p.notPublished] : []),
    ...(u.kept ? [p.kept(u.kept)] : []),
    ...(u.withheld ? [p.withheld(u.withheld)] : []),
  ];
}

/** CCWEB_DELIVERY=off: the task's changes were not published; the user is told once where they are. */
export const NOT_PUBLISHED_NOTICE_STATE = 'changes_not_published';

export function notPublishedReceiptText(task: Pick<TaskRecord, 'taskId'> & { publish?: unknown }, locale: Locale = DEFAULT_LOCALE): string {
  const { kept } = unpublishedChangeOf(task.publish);
  return [messages(locale).notPublished({ taskId: task.taskId }), ...unpublishedSentences({ deliveryOff: false, kept, withheld: null }, locale)].join(' ');
}

/**
 * Some paths (CI definitions) were withheld from a change whose rest was published: the user is told
 * once which (the publisher queues this notice only once the rest is on Gitea).
 */
export const WITHHELD_PATHS_NOTICE_STATE = 'paths_withheld';

export function withheldPathsReceiptText(task: Pick<TaskRecord, 'taskId'> & { publish?: unknown }, locale: Locale = DEFAULT_LOCALE): string {
  const w = unpublishedChangeOf(task.publish).withheld ?? { paths: [], more: 0, branch: '', patch: patchName('') };
  return messages(locale).withheldPaths({ taskId: task.taskId, ...w });
}

export function failureReceiptText(
  task: Pick<TaskRecord, 'taskId' | 'errorCode' | 'stoppedBy'> & { publish?: unknown },
  state: FailureReceiptState,
  locale: Locale = DEFAULT_LOCALE,
): string {
  const m = messages(locale);
  const failure = { taskId: task.taskId, reason: describeErrorCode(task.errorCode, locale), code: task.errorCode ?? null };
  switch (state) {
    case TASK_STATE.cancelled:
      return m.cancelled({ taskId: task.taskId, stopper: describeStopper(task.stoppedBy, locale) });
    case TASK_STATE.aborted:
      return m.aborted({ taskId: task.taskId, stopper: describeStopper(task.stoppedBy, locale) });
    case TASK_STATE.failed_reply:
      return m.failedReply(failure);
    case TASK_STATE.failed: {
      const { kept, withheld } = unpublishedChangeOf(task.publish);
      return [m.failed(failure), ...unpublishedSentences({ deliveryOff: false, kept, withheld }, locale)].join(' ');
    }
  }
}
