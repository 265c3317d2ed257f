// The agent's client-side tool (a Codex "dynamic tool"): it publishes the change now — the
// same idempotent publisher the `publishing` step runs — and returns the pull request's URL, so the
// agent's one answer can link it. The service does the work with its own credentials; the agent never
// sees a token. Whatever the agent leaves unpublished is published after the turn anyway.
import type { DynamicToolCallResponse } from '../codex/protocol/ts/v2/DynamicToolCallResponse.js';
import type { DynamicToolSpec } from '../codex/protocol/ts/v2/DynamicToolSpec.js';
import type { Publisher } from './publisher.js';

export const PUBLISH_TOOL_NAME = 'ccweb_publish_changes';

export function publishToolSpecs(): DynamicToolSpec[] {
  return [
    {
      type: 'function',
      name: PUBLISH_TOOL_NAME,
      description:
        'Publish the changes you made in the working directory: the service commits them (you do not need to commit or push), pushes them to the branch of this issue or pull request and opens or updates its pull request. Returns the branch and the pull request URL. Call it once your edits are done, before you post your answer, and link the URL in the answer.',
      inputSchema: {
        type: 'object',
        properties: {
          summary: { type: 'string', description: 'What you changed and why, in a few lines (becomes the commit message and the pull request description).' },
        },
        required: ['summary'],
        additionalProperties: false,
      },
    },
  ];
}

export const PUBLISH_TOOL_INSTRUCTIONS = [
  'Changing code:',
  `- Edit files in the working directory. Do not commit, push or open pull requests yourself: call the tool ${PUBLISH_TOOL_NAME} with a short summary, and put the pull request URL it returns in your answer.`,
  '- Changes you leave without calling it are still published after your turn.',
].join('\n');

function text(t: string, success: boolean): DynamicToolCallResponse {
  return { success, contentItems: [{ type: 'inputText', text: t }] };
}

export function createPublishToolHandler(publisher: Pick<Publisher, 'publish'>) {
  return async (taskId: string, tool: string, args: unknown): Promise<DynamicToolCallResponse> => {
    if (tool !== PUBLISH_TOOL_NAME) return text(`unknown tool ${tool}`, false);
    const raw = (args as { summary?: unknown } | null)?.summary;
    const summary = typeof raw === 'string' ? raw.slice(0, 4000) : null;
    const result = await publisher.publish(taskId, { summary });
    if (!result.ok) {
      return text(JSON.stringify({ published: false, error: result.errorCode, message: result.message, keptAs: result.record?.kept?.branch ?? null }), false);
    }
    const r = result.record;
    return text(
      JSON.stringify({
        published: r.status === 'published',
        status: r.status,
        branch: r.branch,
        commit: r.headSha,
        pullRequest: r.pullRequest ? { number: r.pullRequest.number, url: r.pullRequest.url } : null,
        // CI definitions the service refused to commit here (the user is told in a notice too).
        ...(r.withheld?.paths.length ? { notCommitted: r.withheld.paths, why: 'the bot may not change CI definitions in this repository; the rest was published' } : {}),
      }),
      true,
    );
  };
}
