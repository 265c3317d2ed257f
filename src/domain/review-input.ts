// What the agent is given for a line comment or a review. Pure. Intake renders it once, from
// what Gitea's review API answered (never from the webhook payload, which holds neither the review id
// nor its line comments), and stores it as the task's instruction; the turn input quotes it as
// untrusted data like any comment (src/sessions/developer-instructions.ts). The short summary
// (`ReviewContext`) travels on the task record so that the turn input can say what it is and where
// the answer goes.
//
// Gitea 1.26's `PullReviewComment`: `position` is the line in the pull request's version of the file
// (`original_position` the line in the base's version, for a comment on a removed line); `diff_hunk`
// ends at the commented line.
import { fenceFor } from './agent-input.js';

/** One line comment as Gitea's review API has it, reduced to what the agent needs. */
export interface ReviewLine {
  commentId: number;
  path: string;
  line: number;
  /** `new`: the pull request's version of the file; `old`: the base's (a removed line). */
  side: 'new' | 'old';
  diffHunk: string;
  body: string;
  author: string;
  htmlUrl: string;
  commitId: string;
}

/** A line comment's place and the commented line, without the comment's text (kept on the task record). */
export type ReviewLineRef = Pick<ReviewLine, 'commentId' | 'path' | 'line' | 'side' | 'htmlUrl'> & { quote: string };

export interface ReviewContext {
  /** `line_comment`: one line comment mentioning the bot; `review`: a submitted review to address as a whole. */
  kind: 'line_comment' | 'review';
  reviewId: number;
  /** Gitea's review state: `COMMENT`, `APPROVED`, `REQUEST_CHANGES`. */
  reviewState: string;
  reviewUrl: string;
  /** Why a review became a task: its body mentions the bot, or it requests changes on the bot's own PR. */
  trigger: 'mention' | 'request_changes';
  lines: ReviewLineRef[];
}

/** The commented line itself: the hunk's last line without its diff prefix (`+`, `-` or space). */
export function commentedLine(hunk: string): string {
  const last = hunk.replace(/\n+$/, '').split('\n').at(-1) ?? '';
  return /^[-+ ]/.test(last) ? last.slice(1) : last;
}

function where(l: Pick<ReviewLine, 'path' | 'line' | 'side'>): string {
  return `\`${l.path}\`, line ${l.line} (${l.side === 'new' ? "the pull request's version" : "the base's version, a removed line"})`;
}

function lineBlock(l: ReviewLine): string[] {
  const f = fenceFor(l.diffHunk);
  return [
    `File: ${where(l)}${l.commitId ? `, at commit ${l.commitId}` : ''}`,
    `Link: ${l.htmlUrl}`,
    'Diff hunk (its last line is the commented line):',
    `${f}diff`,
    l.diffHunk,
    f,
    `Comment by ${l.author}:`,
    l.body,
  ];
}

/** One line comment: its text first (what previews show), then where it is and the hunk it is on. */
export function renderLineComment(l: ReviewLine): string {
  const f = fenceFor(l.diffHunk);
  return [
    `Line comment by ${l.author} on ${where(l)}:`,
    l.body,
    '',
    `Link: ${l.htmlUrl}${l.commitId ? ` (commit ${l.commitId})` : ''}`,
    'Diff hunk (its last line is the commented line):',
    `${f}diff`,
    l.diffHunk,
    f,
  ].join('\n');
}

/** A review as a whole: its body and every line comment with its place and hunk. */
export function renderReview(review: { author: string; state: string; body: string }, lines: readonly ReviewLine[]): string {
  const out = [`A review by ${review.author} (state ${review.state}).`, 'Review body:', review.body === '' ? '(empty)' : review.body, '', `Line comments (${lines.length}):`];
  lines.forEach((l, i) => out.push('', `${i + 1}.`, ...lineBlock(l)));
  return out.join('\n');
}

export function lineRef(l: ReviewLine): ReviewLineRef {
  return { commentId: l.commentId, path: l.path, line: l.line, side: l.side, htmlUrl: l.htmlUrl, quote: commentedLine(l.diffHunk).slice(0, 200) };
}

/**
 * Where the answer goes and how it reads (Gitea 1.26.3's REST API cannot reply in a line thread: a
 * line comment is only ever created inside a new review). So: ONE comment on the pull request that
 * quotes the line(s) it answers and links the line comment(s).
 */
export function reviewAnswerGuidance(r: ReviewContext): string[] {
  if (r.kind === 'line_comment') {
    const l = r.lines[0]!;
    return [
      `Your answer goes on the pull request's conversation (Gitea cannot reply in a line thread): begin it with the line you answer, quoted, and a link to the line comment, e.g.`,
      `> \`${l.path}\` line ${l.line}: ${l.quote}`,
      `> (${l.htmlUrl})`,
    ];
  }
  return [
    'Address every line comment of the review (make the changes in the working directory). Your answer goes on the pull request\'s conversation: for each line comment, quote its file and line and link it, and say what you did.',
  ];
}
