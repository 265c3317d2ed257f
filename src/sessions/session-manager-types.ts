import type { AgentStep } from '../domain/agent-step.js';
import type { DynamicToolCallResponse } from '../codex/protocol/ts/v2/DynamicToolCallResponse.js';
import type { DynamicToolSpec } from '../codex/protocol/ts/v2/DynamicToolSpec.js';
import type { TaskRecord } from '../domain/records.js';
import type { AgentSandbox } from '../isolation/agent-sandbox.js';
import type { GateCallLine } from '../mcp-gate/gate-files.js';
import type { ExtraGroup } from '../mcp-gate/gate-policy.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store, Tx } from '../store/types.js';
import type { TurnUsageHooks } from '../usage/usage-accounting.js';
import type { AppServerSupervisor } from './app-server-supervisor.js';
import type { SessionLogger } from './session-logger.js';
import type { TurnOutcome } from './turn-result.js';

export interface SessionManagerOptions {
  /** Several nodes: this node's id, recorded on a session whose thread it starts or resumes (the scheduler's thread preference). */
  nodeId?: string;
  store: Store;
  runtime: ActorRuntime;
  supervisor: AppServerSupervisor;
  giteaUrl: string;
  /** The bot token: only ever placed in `config.mcp_servers.gitea.env` of thread/start|resume. */
  giteaToken: string;
  mcpCommand: string;
  /** Default `['-t','stdio','-host', giteaUrl]`. */
  mcpArgs?: string[];
  mcpStartupTimeoutSec: number;
  /**
   * The gate every thread's gitea MCP server runs behind (src/mcp-gate/): its per-thread files live
   * under `<dataDir>/mcp-gate/`; `token` is the agent's own narrower token (CCWEB_GITEA_MCP_TOKEN),
   * else the bot's is used, behind the gate.
   */
  mcpGate: {
    dataDir: string;
    token?: string;
    extraFor?: (task: TaskRecord) => Promise<ExtraGroup[]>;
    onCall?: (line: GateCallLine) => void;
    /**
     * Several nodes: until when the gate forwards the task's writes (GateTaskFile.writesUntil), or
     * undefined for no limit; asked whenever the task file is written.
     */
    writesUntil?: (taskId: string) => number | undefined;
  };
  /** Default: the connection's model (CCWEB_CODEX_MODEL, else Codex's config/read). */
  model?: string;
  reasoningEffort?: string | null;
  turnTimeoutMs: number;
  /** How long an interrupt waits for `turn/completed interrupted` (default 10 s). */
  abortTimeoutMs?: number;
  botLogin?: string | null;
  /** `sessions.mcp.hostRef` (default `gitea-main`). */
  hostRef?: string;
  /** Approve a new thread automatically after a definitive resume failure (default true). */
  autoApproveNewThread?: boolean;
  /** Where the agent's commands run (src/isolation/); absent: Codex's `danger-full-access`. */
  agentSandbox?: Pick<AgentSandbox, 'forThread'>;
  logger?: SessionLogger;
  now?: () => Date;
  /**
   * Client-side tools offered to the agent on thread/start (change delivery's publish tool). Codex
   * asks for them with `item/tool/call`; `call` runs for the task whose turn is active on that thread.
   */
  dynamicTools?: {
    specs: DynamicToolSpec[];
    /** Appended to the developer instructions: when and how to use the tools. */
    instructions?: string;
    call(taskId: string, tool: string, args: unknown): Promise<DynamicToolCallResponse>;
  };
  /** Usage accounting and per-task budgets (src/usage/): none when absent. */
  usage?: TurnUsageHooks;
  /** What the agent is doing, as a turn's notifications say (the receipt shows it). */
  onStep?: (taskId: string, step: AgentStep) => void;
}

export interface RunTurnOptions {
  kind: 'normal' | 'reply_retry';
  cwd: string;
  signal?: AbortSignal;
  replyRetryPrompt?: string;
  /**
   * Checked in the transactions that write the turn into its task (its intent, its turn id, its end
   * with its usage): the lease the caller runs the task under is still the current one
   * (src/leases/lease-fence.ts). Throwing keeps nothing: a worker that lost its lease starts no turn,
   * and records neither the end nor the usage of one it had started.
   */
  fence?: (tx: Tx) => Promise<void>;
}

export interface SessionManager {
  ensureThread(task: TaskRecord, cwd: string): Promise<{ threadId: string; resumed: boolean }>;
  runTurn(task: TaskRecord, opts: RunTurnOptions): Promise<TurnOutcome>;
  /** Interrupts the task's turn; `confirmed` once it completed, false after `abortTimeoutMs`. No turn → confirmed. */
  interrupt(taskId: string): Promise<{ confirmed: boolean }>;
  /** Tasks with a turn running now. */
  activeTaskIds(): string[];
  /** Writes the task's gate file again when it is the task the thread's gate serves now (its lease was renewed: a later `writesUntil`). */
  refreshGate(task: TaskRecord): Promise<void>;
}
