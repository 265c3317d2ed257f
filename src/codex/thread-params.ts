// Pure builders of the Codex app-server request params used by ccweb-gitea (spec §5.3, §6.3;
// checked against the real binary, codex 0.171). Shapes follow the generated protocol types; tests validate the
// built messages against the generated JSON Schema.
import type { JsonValue } from './protocol/ts/serde_json/JsonValue.js';
import type { DynamicToolSpec } from './protocol/ts/v2/DynamicToolSpec.js';
import type { ThreadStartParams } from './protocol/ts/v2/ThreadStartParams.js';
import type { ThreadResumeParams } from './protocol/ts/v2/ThreadResumeParams.js';
import type { TurnStartParams } from './protocol/ts/v2/TurnStartParams.js';
import type { TurnInterruptParams } from './protocol/ts/v2/TurnInterruptParams.js';
import type { UserInput } from './protocol/ts/v2/UserInput.js';

/** The MCP server name Codex sees; the model sees its tools under the namespace `mcp__gitea`. */
export const GITEA_MCP_SERVER_NAME = 'gitea';

export interface GiteaMcpConfig {
  /** gitea-mcp executable (absolute path or a name on PATH). */
  command: string;
  /** Gitea base URL, e.g. `https://gitea.example`. */
  giteaUrl: string;
  /** Bot access token: passed ONLY in this server's env (never in the app-server's env). */
  token: string;
  /** How long Codex waits for the server's MCP handshake (Codex default 30). */
  startupTimeoutSec?: number;
  /** Overrides the default args `['-t','stdio','-host', giteaUrl]`. */
  args?: string[];
  /** Extra env for the MCP server (e.g. correlation ids); cannot override the token/host. */
  extraEnv?: Record<string, string>;
}

/**
 * Where a thread's commands run, as thread/start|resume carry it. isolation/agent-sandbox.ts builds
 * it; declared here, with the params it goes into, so codex/ does not import isolation/ (which
 * imports codex/: no folder cycle).
 */
export interface ThreadSandbox {
  /** Named profile (isolation on) … */
  permissions?: string;
  /** … or the legacy full-access mode (isolation off). */
  sandbox?: 'danger-full-access';
  /** Merged into thread/start|resume `config`. */
  config: { [key: string]: JsonValue };
}

export interface ThreadParamsInput {
  /** The task's workspace. */
  cwd: string;
  giteaMcp: GiteaMcpConfig;
  /**
   * Thread-level developer instructions. Only for the plain-turn fallback (collaborationMode
   * downgraded): with collaborationMode the instructions travel in `settings.developer_instructions`.
   */
  developerInstructions?: string;
  /**
   * Where the agent's commands run (src/isolation/agent-sandbox.ts): a named permission profile and
   * its config. Absent: `danger-full-access` (tests of the protocol only; the service always sets it).
   */
  sandbox?: ThreadSandbox;
}

/** `config.mcp_servers.gitea` for thread/start and thread/resume (`required: true`). */
export function giteaMcpServerConfig(g: GiteaMcpConfig): { [key: string]: JsonValue } {
  return {
    command: g.command,
    args: g.args ?? ['-t', 'stdio', '-host', g.giteaUrl],
    env: { ...(g.extraEnv ?? {}), GITEA_ACCESS_TOKEN: g.token, GITEA_HOST: g.giteaUrl },
    required: true,
    startup_timeout_sec: g.startupTimeoutSec ?? 30,
    // Under a permission profile Codex asks before every MCP call, and with approvalPolicy "never"
    // that ask is a refusal: the bot's own tools are approved up front (they run outside the sandbox).
    default_tools_approval_mode: 'approve',
  };
}

function threadCommon(input: ThreadParamsInput) {
  const sb = input.sandbox ?? { sandbox: 'danger-full-access' as const, config: {} };
  return {
    cwd: input.cwd,
    approvalPolicy: 'never' as const,
    // `permissions` (a named profile) and `sandbox` are mutually exclusive in Codex.
    ...(sb.permissions !== undefined ? { permissions: sb.permissions } : { sandbox: sb.sandbox ?? ('danger-full-access' as const) }),
    config: { ...sb.config, mcp_servers: { [GITEA_MCP_SERVER_NAME]: giteaMcpServerConfig(input.giteaMcp) } },
    ...(input.developerInstructions !== undefined ? { developerInstructions: input.developerInstructions } : {}),
  };
}

/**
 * `thread/start` params: workspace cwd, approvals never, the agent's sandbox, gitea MCP, and the
 * service's client-side tools (`dynamicTools`; thread/resume has no such field — Codex keeps them
 * with the thread across an app-server restart, proved by test/e2e/publish.e2e.test.ts).
 */
export function threadStartParams(input: ThreadParamsInput & { dynamicTools?: DynamicToolSpec[] }): ThreadStartParams {
  return { ...threadCommon(input), ...(input.dynamicTools && input.dynamicTools.length > 0 ? { dynamicTools: input.dynamicTools } : {}) };
}

/** `thread/resume` params: the SAME config as thread/start — Codex does not persist MCP config. */
export function threadResumeParams(input: ThreadParamsInput & { threadId: string }): ThreadResumeParams {
  return { threadId: input.threadId, ...threadCommon(input) };
}

export interface TurnInput {
  threadId: string;
  text: string;
  model: string;
  reasoningEffort?: string | null;
  developerInstructions?: string | null;
}

function textInput(text: string): UserInput[] {
  return [{ type: 'text', text, text_elements: [] }];
}

/**
 * `turn/start` with `collaborationMode {mode:"default", settings:{model, reasoning_effort,
 * developer_instructions}}` — and NO top-level model/effort (they would bypass the mode).
 */
export function turnStartParams(input: TurnInput): TurnStartParams {
  return {
    threadId: input.threadId,
    input: textInput(input.text),
    collaborationMode: {
      mode: 'default',
      settings: {
        model: input.model,
        reasoning_effort: input.reasoningEffort ?? null,
        developer_instructions: input.developerInstructions ?? null,
      },
    },
  };
}

/**
 * Fallback when the server rejected collaborationMode (`capability_downgrade`): a plain turn with
 * top-level model/effort. Developer instructions then go on thread/start|resume
 * (`ThreadParamsInput.developerInstructions`).
 */
export function plainTurnStartParams(input: Omit<TurnInput, 'developerInstructions'>): TurnStartParams {
  return {
    threadId: input.threadId,
    input: textInput(input.text),
    model: input.model,
    ...(input.reasoningEffort ? { effort: input.reasoningEffort } : {}),
  };
}

export function turnInterruptParams(threadId: string, turnId: string): TurnInterruptParams {
  return { threadId, turnId };
}
