// The commit message and pull request texts the service writes. The agent's summary is untrusted
// text: it only ever becomes commit/PR prose, never a command; markers and control characters are
// removed and its length is bounded.
import { taskTrailer } from './branch-names.js';

const MAX_SUBJECT = 72;
const MAX_BODY = 4000;

/** Removes HTML comments (our markers among them), control characters and the wait-for-user token. */
export function cleanSummary(text: string | null | undefined): string {
  if (!text) return '';
  return text
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/CCWEB_WAITING_USER/g, '')
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '')
    .trim()
    .slice(0, MAX_BODY);
}

function subjectOf(summary: string, fallback: string): string {
  const first = summary.split('\n').map((l) => l.trim().replace(/^#+\s*/, '')).find((l) => l.length > 0) ?? '';
  const s = first.length > 0 ? first : fallback;
  return s.length > MAX_SUBJECT ? `${s.slice(0, MAX_SUBJECT - 1)}…` : s;
}

/** `<subject>\n\n<summary>\n\nCcweb-Task: <taskId>` — the trailer names the task (exactly-once checks, audits). */
export function commitMessage(input: { summary: string | null; taskId: string; resourceLabel: string }): string {
  const summary = cleanSummary(input.summary);
  const subject = subjectOf(summary, `ccweb: changes for ${input.resourceLabel}`);
  const rest = summary.split('\n').slice(1).join('\n').trim();
  return [subject, ...(rest ? ['', rest] : []), '', taskTrailer(input.taskId)].join('\n') + '\n';
}

export function pullRequestTitle(summary: string | null, issueNumber: number): string {
  return subjectOf(cleanSummary(summary), `ccweb: changes for #${issueNumber}`);
}

export function pullRequestBody(input: { summary: string | null; issueNumber: number; taskId: string; marker: string }): string {
  const summary = cleanSummary(input.summary);
  return [
    `Changes requested in #${input.issueNumber}, made by the agent of task ${input.taskId}.`,
    ...(summary ? ['', summary] : []),
    '',
    input.marker,
  ].join('\n');
}
