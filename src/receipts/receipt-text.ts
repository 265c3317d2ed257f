// The service's own status comments (spec §6.4), in the language of CCWEB_LOCALE (the catalogue in
// src/messages/). Only data the service produced goes in: the task id, a Gitea login (checked
// against Gitea's login alphabet) and a fixed sentence per error code. Nothing from the untrusted
// comment text is ever echoed back.
import type { TaskRecord } from '../domain/records.js';
import { DEFAULT_LOCALE, messages, type Locale } from '../messages/catalogue.js';
import { pathsForText } from './path-text.js';

/** Task states that get one failure receipt; running/waiting/success states get none (§5.2.5). */
export const FAILURE_RECEIPT_STATES = ['failed', 'failed_reply', 'aborted', 'cancelled'] as const;
export type FailureReceiptState = (typeof FAILURE_RECEIPT_STATES)[number];

export function isFailureReceiptState(state: string): state is FailureReceiptState {
  return (FAILURE_RECEIPT_STATES as readonly string[]).includes(state);
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

export function receivedReceiptText(task: Pick<TaskRecord, 'taskId' | 'author'>, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).received({ taskId: task.taskId, mention: mentionOf(task.author) });
}

/** Where an unpublished change was kept (change delivery), in the service's own words: nothing is lost. */
function keptText(task: { publish?: unknown }, locale: Locale): string {
  const kept = (task.publish as { kept?: { branch?: unknown; patchFile?: unknown } | null } | undefined)?.kept;
  if (!kept || typeof kept.branch !== 'string' || typeof kept.patchFile !== 'string') return '';
  const name = (s: string) => s.replace(/[^A-Za-z0-9._/-]/g, '_');
  const file = kept.patchFile.split('/').at(-1) ?? '';
  return messages(locale).keptChange({ branch: name(kept.branch), patch: `patches/${name(file)}` });
}

/** CCWEB_DELIVERY=off: the task's changes were not published; the user is told once where they are. */
export const NOT_PUBLISHED_NOTICE_STATE = 'changes_not_published';

export function notPublishedReceiptText(task: Pick<TaskRecord, 'taskId'> & { publish?: unknown }, locale: Locale = DEFAULT_LOCALE): string {
  return `${messages(locale).notPublished({ taskId: task.taskId })}${keptText(task, locale)}`;
}

/** Some paths (CI definitions) were withheld from the published change: the user is told once which. */
export const WITHHELD_PATHS_NOTICE_STATE = 'paths_withheld';

export function withheldPathsReceiptText(task: Pick<TaskRecord, 'taskId'> & { publish?: unknown }, locale: Locale = DEFAULT_LOCALE): string {
  const w = (task.publish as { withheld?: { paths?: unknown; branch?: unknown; patchFile?: unknown } | null } | undefined)?.withheld;
  const paths = Array.isArray(w?.paths) ? w.paths.filter((p): p is string => typeof p === 'string') : [];
  const name = (s: unknown) => (typeof s === 'string' ? s : '').replace(/[^A-Za-z0-9._/-]/g, '_');
  const { shown, more } = pathsForText(paths);
  const file = typeof w?.patchFile === 'string' ? (w.patchFile.split('/').at(-1) ?? '') : '';
  return messages(locale).withheldPaths({ taskId: task.taskId, paths: shown, more, branch: name(w?.branch), patch: `patches/${name(file)}` });
}

export function failureReceiptText(
  task: Pick<TaskRecord, 'taskId' | 'errorCode' | 'stoppedBy'> & { publish?: unknown },
  state: FailureReceiptState,
  locale: Locale = DEFAULT_LOCALE,
): string {
  const m = messages(locale);
  const failure = { taskId: task.taskId, reason: describeErrorCode(task.errorCode, locale), code: task.errorCode ?? null };
  switch (state) {
    case 'cancelled':
      return m.cancelled({ taskId: task.taskId, stopper: describeStopper(task.stoppedBy, locale) });
    case 'aborted':
      return m.aborted({ taskId: task.taskId, stopper: describeStopper(task.stoppedBy, locale) });
    case 'failed_reply':
      return m.failedReply(failure);
    case 'failed':
      return `${m.failed(failure)}${keptText(task, locale)}`;
  }
}
