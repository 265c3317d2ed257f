// What /readyz and `doctor` ask the outside dependencies.
import type { CodexAppServerConnection } from '../codex/jsonrpc-connection.js';
import type { GetAccountResponse } from '../codex/protocol/ts/v2/GetAccountResponse.js';
import type { GiteaClient } from '../gitea/index.js';
import { probeGatedMcp } from '../sessions/mcp-preflight.js';
import type { ReadinessPart } from './readiness.js';

/** Gitea answers its API (`GET /version`). */
export async function giteaPart(gitea: Pick<GiteaClient, 'getVersion'>): Promise<ReadinessPart> {
  try {
    const { version } = await gitea.getVersion();
    return { ok: true, detail: `Gitea ${version}` };
  } catch (error) {
    return { ok: false, detail: `Gitea not reachable [CCWEB_GITEA_URL]: ${(error instanceof Error ? error.message : String(error)).slice(0, 160)}` };
  }
}

/** The MCP command resolves and completes `initialize` (the same probe as doctor's). */
export async function mcpPart(input: { command: string; args: string[]; giteaUrl: string; token: string }, timeoutMs: number): Promise<ReadinessPart> {
  const result = await probeGatedMcp(input, { timeoutMs });
  if (!result.ok) return { ok: false, detail: `${result.errorCode} [CCWEB_GITEA_MCP_COMMAND]: ${result.reason}` };
  if (!result.hasCommentTool) return { ok: false, detail: `gitea-mcp ${result.serverVersion ?? '?'} offers the agent no comment tool (issue_write add_comment) [CCWEB_GITEA_MCP_COMMAND]` };
  return { ok: true, detail: `gitea-mcp ${result.serverVersion ?? '?'} answered initialize behind the gate (${result.tools.length} tools offered, issue_write add_comment among them)` };
}

/**
 * Codex can call its model: logged in (`account/read` names an account), or its model provider
 * needs no OpenAI login (`requiresOpenaiAuth: false`, e.g. a custom provider with its own key).
 */
export async function codexLoginPart(connection: Pick<CodexAppServerConnection, 'request'>, timeoutMs: number): Promise<ReadinessPart> {
  const answer = (await connection.request('account/read', { refreshToken: false }, { timeoutMs })) as GetAccountResponse;
  return describeAccount(answer);
}

export function describeAccount(answer: GetAccountResponse): ReadinessPart {
  const account = answer.account;
  if (account === null) {
    return answer.requiresOpenaiAuth
      ? { ok: false, detail: 'Codex is not logged in: run `codex login` as the service user (same CODEX_HOME), or configure an API key' }
      : { ok: true, detail: 'the model provider needs no OpenAI login' };
  }
  switch (account.type) {
    case 'chatgpt':
      return { ok: true, detail: `logged in with ChatGPT (${account.planType})` };
    case 'apiKey':
      return { ok: true, detail: 'logged in with an API key' };
    default:
      return { ok: true, detail: `logged in (${account.type})` };
  }
}
