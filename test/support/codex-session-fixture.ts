// A whole session stack for integration tests, offline: the Gitea REST double on 127.0.0.1, the
// scripted model, CODEX_HOME pointing at it, the real `codex app-server` under the supervisor, the
// REAL official gitea-mcp (backed by the REST double; test/support/real-gitea-mcp.ts, no fallback)
// behind an executable wrapper script, a real store and runtime hosting the task, session and
// app_server kinds, and a log collector. The gitea-mcp stand-in is used only for the two start-up
// faults the real binary cannot show (exit at start, no answer to `initialize`: see
// gitea-mcp-standin/index.ts).
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CodexConnectionOptions } from '../../src/codex/jsonrpc-connection.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { appServerKind, createAppServerSupervisor, type AppServerSupervisor } from '../../src/sessions/app-server-supervisor.js';
import { sessionKind } from '../../src/sessions/session-actor.js';
import { createSessionManager, type SessionManager, type SessionManagerOptions } from '../../src/sessions/session-manager.js';
import type { SessionLogger } from '../../src/sessions/session-logger.js';
import { taskKind } from '../../src/tasks/task-actor.js';
import { createGiteaRestDouble, startGiteaRestServer, type GiteaRestDouble, type StartedGiteaRestServer } from '../../src/demo/gitea-double/rest-api.js';
import { writeStandinFaultCommands } from './gitea-mcp-standin/index.js';
import { writeRealGiteaMcpWrapper } from './real-gitea-mcp.js';
import { containmentLauncherForTests, testAgentSandbox } from './codex-harness.js';
import { AGENT_SHELL_CONFIG_ARGS, defaultAgentPath } from '../../src/codex/agent-environment.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel, type ScriptStep } from '../../src/demo/scripted-model.js';
import { createTestRuntime } from './test-runtime.js';
import { initialTaskMirror } from '../../src/intake/intake-records.js';

export const SESSION_TOKEN = 'tok_ccweb_session_3b9d7f21c4e8';
export const OWNER = 'acme';
export const REPO = 'widget';

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  obj: Record<string, unknown>;
  msg?: string;
}

export interface SessionFixture {
  root: string;
  codexHome: string;
  workspace: string;
  model: ScriptedModel;
  gitea: GiteaRestDouble;
  giteaServer: StartedGiteaRestServer;
  /**
   * Wrapper commands: `ok` the real gitea-mcp (talking to the REST double); `exit` and `hang` the
   * stand-in exiting at once / never answering initialize (faults the real binary cannot show).
   */
  mcp: { ok: string; exit: string; hang: string };
  store: Awaited<ReturnType<typeof createTestRuntime>>['store'];
  runtime: Awaited<ReturnType<typeof createTestRuntime>>['runtime'];
  storeDir: string;
  supervisor: AppServerSupervisor;
  logs: LogLine[];
  logger: SessionLogger;
  lostTurns: Array<{ taskIds: string[]; reason: string }>;
  manager(overrides?: Partial<SessionManagerOptions>): SessionManager;
  /** Inserts a task record (state running) for issue `number` and returns it. */
  task(id: string, number?: number, instruction?: string): Promise<TaskRecord>;
  cleanup(): Promise<void>;
}

/**
 * MCP servers outlive a SIGKILLed app-server (Codex starts them in their own process groups) when
 * they ignore stdin EOF: end the ones this fixture started, found by its unique Gitea URL.
 */
function killLeftovers(giteaUrl: string): void {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
    } catch {
      continue;
    }
    if (cmd.includes(`-host ${giteaUrl}`)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
}

export async function sessionFixture(
  steps: ScriptStep[] = [],
  opts: {
    connection?: Partial<CodexConnectionOptions> | ((root: string) => Partial<CodexConnectionOptions>);
    issues?: number[];
    /** The supervisor's wall clock (default Date.now). */
    now?: () => number;
    /** The clock the store judges leases by (default: SQLite's own). */
    storeClockMs?: () => number;
  } = {},
): Promise<SessionFixture> {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-session-'));
  // First: a missing binary is a set-up error, said with the command to run.
  const realMcp = writeRealGiteaMcpWrapper(join(root, 'bin', 'gitea-mcp'));
  const codexHome = join(root, 'codex-home');
  const workspace = join(root, 'workspace');
  const bin = join(root, 'bin');
  mkdirSync(workspace, { recursive: true });
  mkdirSync(bin, { recursive: true });

  const gitea = createGiteaRestDouble({ token: SESSION_TOKEN, botLogin: 'giteabot', users: ['alice'] });
  const giteaServer = await startGiteaRestServer(gitea);
  gitea.addRepo(OWNER, REPO);
  for (const n of opts.issues ?? [42]) gitea.addIssue(OWNER, REPO, { number: n, title: `issue ${n}`, user: 'alice' });

  const model = await startScriptedModel(steps);
  writeCodexHome(codexHome, { port: model.port, model: 'fake-model' });

  const mcp = { ok: realMcp, ...writeStandinFaultCommands(bin) };

  const rt = await createTestRuntime([taskKind(), sessionKind(), appServerKind()], join(root, 'store'), opts.storeClockMs ? { clockMs: opts.storeClockMs } : {});
  const logs: LogLine[] = [];
  const logger: SessionLogger = {
    info: (obj, msg) => void logs.push({ level: 'info', obj, msg }),
    warn: (obj, msg) => void logs.push({ level: 'warn', obj, msg }),
    error: (obj, msg) => void logs.push({ level: 'error', obj, msg }),
  };
  const lostTurns: SessionFixture['lostTurns'] = [];
  const connection = typeof opts.connection === 'function' ? opts.connection(root) : opts.connection;
  const agentSandbox = testAgentSandbox(root, codexHome);
  const supervisor = createAppServerSupervisor({
    runtime: rt.runtime,
    connection: {
      cwd: workspace,
      requestTimeoutMs: 30_000,
      launcher: containmentLauncherForTests(),
      // The agent's commands run in the isolation sandbox, as in production.
      args: ['app-server', ...AGENT_SHELL_CONFIG_ARGS, ...agentSandbox.appServerArgs()],
      agentPath: agentSandbox.pathWithHelpers(defaultAgentPath()),
      // The service's own env holds the token; the supervisor must strip it from the app-server's.
      env: { ...process.env, CCWEB_GITEA_TOKEN: SESSION_TOKEN },
      ...connection,
      extraEnv: { CODEX_HOME: codexHome, ...(connection?.extraEnv ?? {}) },
    },
    backoff: { baseMs: 50, maxMs: 500 },
    ...(opts.now ? { now: opts.now } : {}),
    logger,
    onTurnsLost: (taskIds, reason) => void lostTurns.push({ taskIds, reason }),
  });

  return {
    root,
    codexHome,
    workspace,
    model,
    gitea,
    giteaServer,
    mcp,
    store: rt.store,
    runtime: rt.runtime,
    storeDir: rt.dir,
    supervisor,
    logs,
    logger,
    lostTurns,
    manager: (overrides = {}) =>
      createSessionManager({
        store: rt.store,
        runtime: rt.runtime,
        supervisor,
        giteaUrl: giteaServer.url,
        giteaToken: SESSION_TOKEN,
        mcpCommand: mcp.ok,
        mcpStartupTimeoutSec: 20,
        mcpGate: { dataDir: join(root, 'data') },
        turnTimeoutMs: 60_000,
        abortTimeoutMs: 5_000,
        botLogin: 'giteabot',
        agentSandbox,
        logger,
        ...overrides,
      }),
    async task(id, number = 42, instruction = 'please summarise this issue') {
      const at = new Date().toISOString();
      const resourceKey = `default:${OWNER}/${REPO}:issue:${number}`;
      const rec: TaskRecord = {
        taskId: id,
        deliveryKey: `default:d-${id}`,
        deliveryId: `d-${id}`,
        repoKey: `default:${OWNER}/${REPO}`,
        resourceKey,
        sessionKey: resourceKey,
        resource: { kind: 'issue', number },
        owner: OWNER,
        repo: REPO,
        commentId: 9000,
        commentUrl: `${giteaServer.url}/${OWNER}/${REPO}/issues/${number}#issuecomment-9000`,
        author: 'alice',
        instruction,
        refs: null,
        ...initialTaskMirror(),
        state: 'running',
        leaseId: 'lease-1',
        queueSeq: 1,
        createdAt: at,
        updatedAt: at,
        stateVersion: 0,
      };
      await rt.store.transact((tx) => tx.insert('tasks', id, rec));
      return rec;
    },
    async cleanup() {
      await supervisor.stop().catch(() => undefined);
      killLeftovers(giteaServer.url);
      await rt.close(false).catch(() => undefined);
      await model.close();
      await giteaServer.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
