/**
 * A scripted "model" for the demo and the end-to-end tests (`startScriptedAgent` serves it on 127.0.0.1 and
 * points a CODEX_HOME at it): it reads what Codex sends (the turn's
 * prompt with the marker, earlier tool outputs) and answers like a well-behaved agent would — one
 * comment through the gitea tool carrying the marker, then a final message. Keywords in the user's
 * comment choose a behaviour, so a test or the demo steers it by what it writes on the issue:
 *
 * - `question`  → posts a question and ends with CCWEB_WAITING_USER (the task waits for the user);
 * - `head`      → runs `git rev-parse HEAD` through Codex's shell tool first and reports the sha;
 * - `change-file` (or naming `CHANGES.md`) → appends a line naming the task to CHANGES.md through Codex's shell tool, then answers
 *   (change delivery publishes it); with `publish-tool` it then calls the service's `ccweb_publish_changes`
 *   tool and links the pull request URL it returns; with `add-workflow` it also writes `.gitea/workflows/x.yml`;
 * - `workflow-only` → writes `.gitea/workflows/x.yml` and nothing else (a change made only of a CI definition);
 * - `forget`    → answers without calling the gitea tool (the reply goes missing: the reply-retry turn posts it);
 * - `forget-always` → never posts, not even in the reply-retry turn (→ REST fallback);
 * - `question` with `forget` (or `forget-always`) → ends its turn asking (CCWEB_WAITING_USER) without
 *   posting the question: the question's retry turn re-posts it (with `forget-always` it does not, and
 *   the REST fallback posts the question); with `retry-stall-once` that retry turn stalls the first time
 *   (a restart test: the service dies while the question is being verified);
 * - `slow`      → stalls (the turn runs until interrupted);
 * - `slow-once` → stalls in the first attempt of a task only (a restart test's second attempt answers);
 * - `answer-late` → runs `sleep 20` through Codex's shell tool first, then answers (a test pauses its
 *   node meanwhile: the answer comes after the node's lease has expired);
 * - `post-then-stall` → posts its answer, then stalls before finishing the turn (a restart test: the
 *   answer is on Gitea but the turn never completed);
 * - otherwise   → a short answer.
 * The reply-retry turn (its prompt says the answer "did not appear as a comment") re-posts.
 */
import { join } from 'node:path';
import { startScriptedModel, writeCodexHome, type ScriptedModel, type ScriptStep } from './scripted-model.js';

const MARKER_RE = /<!-- ccweb taskId=\S+ turnKey=\S+ resource=(default:([^/\s]+)\/([^:\s]+):(issue|pull_request):(\d+)) -->/g;

interface InputItem {
  type?: string;
  role?: string;
  content?: Array<{ type?: string; text?: string }>;
  output?: unknown;
  call_id?: string;
  name?: string;
}

function textOf(item: InputItem): string {
  return (item.content ?? []).map((c) => c.text ?? '').join('\n');
}

export interface AgentOptions {
  /** What the agent answers (before the marker), given the user's text. */
  answer?: (userText: string) => string;
}

export function scriptedAgent(options: AgentOptions = {}): (body: any) => ScriptStep {
  const answer = options.answer ?? ((t: string) => `Done. I looked at the request (${t.length} characters) and the repository.`);
  const stalledTasks = new Set<string>();
  return (body) => {
    const input: InputItem[] = Array.isArray(body?.input) ? body.input : [];
    // The current turn starts at the last user message; everything after it is this turn's tool traffic.
    let start = -1;
    input.forEach((item, i) => {
      if (item.type === 'message' && item.role === 'user') start = i;
    });
    const turnText = start >= 0 ? textOf(input[start]!) : '';
    // Keywords count only inside the quoted user comment, not in the service's own wording around it.
    const quoted = /(`{3,})untrusted-comment\n([\s\S]*?)\n\1/.exec(turnText);
    const userText = quoted ? quoted[2]! : turnText;
    const markers = [...JSON.stringify(body).matchAll(MARKER_RE)];
    const marker = markers.at(-1);
    if (!marker) return { type: 'message', text: 'No marker found; nothing to do.' };
    const markerLine = marker[0].replace(/\\"/g, '"');
    const [, , owner, repo, , num] = marker;
    const after = input.slice(start + 1);
    const outputs = after.filter((i) => i.type === 'function_call_output');
    const calls = after.filter((i) => i.type === 'function_call');
    const commented = calls.some((c) => c.name === 'create_issue_comment' || c.name === 'issue_write');
    const lower = userText.toLowerCase();
    const isRetry = turnText.toLowerCase().includes('did not appear as a comment');
    const history = JSON.stringify(input).toLowerCase();
    const taskId = /taskId=(\S+)/.exec(markerLine)?.[1] ?? '';

    if (lower.includes('slow-once') && !isRetry) {
      if (!stalledTasks.has(taskId)) {
        stalledTasks.add(taskId);
        return { type: 'stall' };
      }
    } else if (lower.includes('slow') && !isRetry) return { type: 'stall' };
    const workflowOnly = lower.includes('workflow-only');
    const wantsChange = (lower.includes('change-file') || lower.includes('changes.md') || workflowOnly) && !isRetry;
    if (commented) {
      if (lower.includes('post-then-stall') && !isRetry) return { type: 'stall' };
      if (lower.includes('question') && !isRetry) return { type: 'message', text: 'I asked a question.\nCCWEB_WAITING_USER' };
      // The final message is what change delivery turns into the commit and pull request title.
      return { type: 'message', text: wantsChange ? 'Append a line to CHANGES.md\n\nPosted my answer on the issue.' : 'Posted my answer on the issue.' };
    }
    if (lower.includes('question') && lower.includes('forget') && !isRetry) {
      return { type: 'message', text: 'Which browser does the flaky login test fail in?\nCCWEB_WAITING_USER' };
    }
    // The question's retry turn: it re-posts the comment its prompt quotes, as a real agent does.
    const quotedRetry = /Your question to the user did not appear[\s\S]*?\n-----\n([\s\S]*?)\n-----/.exec(turnText);
    if (quotedRetry && !history.includes('forget-always')) {
      if (history.includes('retry-stall-once') && !stalledTasks.has(`${taskId}:retry`)) {
        stalledTasks.add(`${taskId}:retry`);
        return { type: 'stall' };
      }
      return { type: 'tool_call', name: 'issue_write', namespace: 'mcp__gitea', arguments: { method: 'add_comment', owner, repo, index: Number(num), body: quotedRetry[1]! } };
    }
    if ((lower.includes('forget') && !isRetry) || history.includes('forget-always')) {
      return { type: 'message', text: 'Here is my answer (but I forgot to post it).' };
    }

    if (lower.includes('answer-late') && !isRetry && outputs.length === 0) return { type: 'shell', command: 'sleep 20 && echo waited', timeoutMs: 60_000 };
    let text = answer(userText);
    if (wantsChange) {
      // Edits the repository through Codex's own shell tool: a line naming the task, appended to CHANGES.md.
      // `change-file-pause` waits a few seconds first (a test moves the branch on Gitea meanwhile).
      const pause = lower.includes('change-file-pause') ? 'sleep 4 && ' : '';
      // `add-workflow` also writes a CI definition (the publisher withholds it unless allowed).
      const workflow = lower.includes('add-workflow') || workflowOnly ? `mkdir -p .gitea/workflows && printf 'on: push\\njobs: {}\\n' > .gitea/workflows/x.yml && ` : '';
      // `workflow-only`: the CI definition is the whole change (nothing else is edited).
      const edit = workflowOnly ? '' : `printf 'change by task %s\\n' '${taskId}' >> CHANGES.md && `;
      if (outputs.length === 0) return { type: 'shell', command: `${pause}${workflow}${edit}echo edited`, timeoutMs: 20_000 };
      text = 'I appended a line to CHANGES.md.';
      if (lower.includes('publish-tool')) {
        // The service's client-side tool: it publishes now and answers with the pull request URL.
        if (outputs.length === 1) return { type: 'tool_call', name: 'ccweb_publish_changes', arguments: { summary: 'Append a line to CHANGES.md\n\nAs asked in the issue.' } };
        const out = JSON.stringify(outputs.at(-1)!.output ?? '');
        const url = /https?:\/\/[^\s"\\]+\/pulls\/\d+/.exec(out)?.[0];
        text = url ? `I appended a line to CHANGES.md: ${url}` : `Publishing did not give a pull request: ${out.slice(0, 300)}`;
      }
    } else if (lower.includes('head') && !isRetry) {
      const shellDone = outputs.length > 0;
      if (!shellDone) return { type: 'shell', command: ['git', 'rev-parse', 'HEAD'] };
      const out = JSON.stringify(outputs.at(-1)!.output ?? '');
      const sha = /[0-9a-f]{40}/.exec(out)?.[0] ?? 'unknown';
      text = `The workspace is at commit ${sha}.`;
    } else if (lower.includes('question') && !isRetry) {
      text = 'Which browser does the flaky login test fail in?';
    }
    // The real gitea-mcp's comment tool (a5dd03c7f0d8 has no `create_issue_comment`).
    return {
      type: 'tool_call',
      name: 'issue_write',
      namespace: 'mcp__gitea',
      arguments: { method: 'add_comment', owner, repo, index: Number(num), body: `${text}\n\n${markerLine}` },
    };
  };
}

/**
 * The scripted agent served as a model on 127.0.0.1 (`port`: fixed, default a free one), and
 * `<root>/codex-home/config.toml` pointing the real Codex app-server at it.
 */
export async function startScriptedAgent(root: string, options: { port?: number } = {}): Promise<{ model: ScriptedModel; codexHome: string }> {
  const model = await startScriptedModel([], options.port !== undefined ? { port: options.port } : {});
  model.setResponder(scriptedAgent());
  const codexHome = join(root, 'codex-home');
  writeCodexHome(codexHome, { port: model.port, model: 'fake-model' });
  return { model, codexHome };
}
