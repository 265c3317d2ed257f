// How the service answers the app-server's requests (server → client). We run
// `approvalPolicy: "never"`: nothing is approved, elicitations are declined, a question for the user
// is answered empty (the task goes waiting_user from the turn's items), and only our own dynamic
// tools are run. Unknown methods are refused with -32601.
import type { RequestId } from './jsonrpc-types.js';
import { routingKeys } from './jsonrpc-messages.js';

export type ServerRequestAnswer =
  | { kind: 'declined'; result: unknown }
  | { kind: 'user_input'; threadId: string | null; turnId: string | null; itemId: string | null; questions: any[]; result: unknown }
  /** Run the dynamic tool handler (declined when there is none). */
  | { kind: 'dynamic_tool' }
  | { kind: 'rejected'; code: number; message: string };

export function answerServerRequest(method: string, params: any): ServerRequestAnswer {
  switch (method) {
    case 'item/commandExecution/requestApproval':
    case 'item/fileChange/requestApproval':
      return { kind: 'declined', result: { decision: 'decline' } };
    case 'applyPatchApproval':
    case 'execCommandApproval':
      return { kind: 'declined', result: { decision: { denied: { rejection: 'ccweb-gitea: approvals are not granted (approvalPolicy never)' } } } };
    case 'mcpServer/elicitation/request':
      return { kind: 'declined', result: { action: 'decline', content: null, _meta: null } };
    case 'item/permissions/requestApproval':
      return { kind: 'declined', result: { permissions: {}, scope: 'turn' } };
    case 'item/tool/requestUserInput': {
      const keys = routingKeys(params);
      return {
        kind: 'user_input',
        threadId: keys.threadId,
        turnId: keys.turnId,
        itemId: typeof params?.itemId === 'string' ? params.itemId : null,
        questions: Array.isArray(params?.questions) ? params.questions : [],
        result: { answers: {} },
      };
    }
    case 'item/tool/call':
      return { kind: 'dynamic_tool' };
    default:
      return { kind: 'rejected', code: -32601, message: `method not supported by ccweb-gitea: ${method}` };
  }
}

/** The answer to `item/tool/call` when no handler is set. */
export const DYNAMIC_TOOLS_UNSUPPORTED = {
  success: false,
  contentItems: [{ type: 'inputText' as const, text: 'ccweb-gitea: dynamic tools are not supported' }],
};

/** The answer when the dynamic tool handler threw: the agent sees a failed tool, never an RPC error. */
export function dynamicToolFailure(error: string): { success: false; contentItems: Array<{ type: 'inputText'; text: string }> } {
  return { success: false, contentItems: [{ type: 'inputText', text: `ccweb-gitea: the tool failed: ${error.slice(0, 300)}` }] };
}

export type { RequestId };
