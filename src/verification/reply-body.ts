import { WAITING_USER_SENTINEL } from '../sessions/developer-instructions.js';

/** The comment body that carries the reply: the agent's final text, ending with the marker once. */
export function replyBodyWithMarker(finalMessage: string, marker: string): string {
  if (finalMessage.includes(marker)) return finalMessage;
  return `${finalMessage.trimEnd()}\n\n${marker}`;
}

/**
 * The prompt of the one `reply_retry` turn (§5.4.3): re-post the previous final answer, unchanged,
 * with its marker, and do nothing else. It runs on the same thread, so the agent still has the
 * context; the text is repeated so the comment is identical even if the agent's memory is not.
 */
export function replyRetryPrompt(previousFinalMessage: string | null, marker: string): string {
  const rules = [
    'Your previous final answer did not appear as a comment on this issue or pull request.',
    'Post it again now as exactly ONE comment with the Gitea comment tool, unchanged, keeping the marker line',
    `\`${marker}\` as its last line.`,
    'Change nothing else: do not edit files, run commands, commit, push, or post any other comment.',
  ].join('\n');
  if (previousFinalMessage === null || previousFinalMessage.trim() === '') {
    return `${rules}\n\nPost your previous final answer, followed by the marker line above.`;
  }
  const body = replyBodyWithMarker(previousFinalMessage, marker);
  return `${rules}\n\nThe comment to post is everything between the two lines below:\n-----\n${body}\n-----`;
}

/**
 * The prompt of the one retry turn after a QUESTION that did not land (the agent ended its turn asking
 * the user something, but no comment with its marker is on Gitea): post the question, unchanged, and
 * end the turn asking again, so the task waits on a question the user can see.
 */
export function questionRetryPrompt(question: string, marker: string): string {
  return [
    'Your question to the user did not appear as a comment on this issue or pull request.',
    'Post it again now as exactly ONE comment with the Gitea comment tool, unchanged, keeping the marker line',
    `\`${marker}\` as its last line, then end your final message with a line containing exactly ${WAITING_USER_SENTINEL}.`,
    'Change nothing else: do not edit files, run commands, commit, push, or post any other comment.',
    '',
    'The comment to post is everything between the two lines below:',
    '-----',
    replyBodyWithMarker(question, marker),
    '-----',
  ].join('\n');
}
