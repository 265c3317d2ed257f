// The executor's wiring (src/executor/task-executor.ts), tested directly: every workspace result,
// every thread-start error code, every TurnOutcome and every verification result → the task event
// the spec requires (§5.2.4, §5.3.5, §5.4, §8), and the state the real task machine then reaches.
//
// Real: the executor, the task machine, the actor runtime and a durable store in a temp directory.
// Test doubles: the three ports (workspace, Codex sessions, verification), scripted per case — they
// stand for git, the Codex app-server and Gitea, which have their own integration tests; here they
// only inject each result and each failure.
import { afterEach, describe, expect, it } from 'vitest';
import { TASK_EFFECTS, type TaskEvent } from '../../machines/task-lifecycle.js';
import type { RepositoryRecord, TaskRecord, TurnRecord } from '../../src/domain/records.js';
import { LeaseLostError, type Tx } from '../../src/store/types.js';
import {
  createTaskExecutor,
  type SessionPort,
  type TurnOutcome,
  type VerificationPort,
  type VerificationResult,
  type WorkspacePort,
} from '../../src/executor/task-effects.js';
import { initialTaskMirror } from '../../src/intake/intake-records.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import { createTestRuntime } from '../support/test-runtime.js';
import { grantTestLease, grantTestLeaseIn } from '../support/test-lease.js';

const NOW = 1_800_000_000_000;
const RETRY_DELAY = 45_000; // not the executor's default (30 s): a lost option would show
const REPO_KEY = 'default:acme/widget';
const LEASE = { repoKey: REPO_KEY, leaseId: 'lease-1', owner: 'worker-1', expiresAt: NOW + 60_000 };

type WsResult = Awaited<ReturnType<WorkspacePort['prepare']>>;
/** The executor reads an outcome's kind and its step's fields, never the comment call: the fakes leave it out. */
type FakeOutcome = { [K in TurnOutcome['kind']]: Omit<Extract<TurnOutcome, { kind: K }>, 'commentCall'> }[TurnOutcome['kind']];

interface Script {
  workspace?: WsResult;
  /** ensureThread throws an error with this errorCode (null: an error without a code). */
  threadError?: string | null;
  /** ensureThread fails only from this call on (1-based); earlier calls succeed. */
  threadErrorFromCall?: number;
  outcome?: FakeOutcome | ((kind: 'normal' | 'reply_retry') => FakeOutcome);
  verification?: VerificationResult | ((runReplyRetryTurn: () => Promise<{ ok: boolean }>) => Promise<VerificationResult>);
  interruptConfirmed?: boolean;
  /** Runs during the normal turn (e.g. an operator's ABORT). */
  duringTurn?: () => Promise<void>;
  repository?: boolean;
  /** Events the task actor is created with after ACCEPT (default: CLAIM → preparing). */
  startEvents?: TaskEvent[];
  /** Records to insert with the task (prior turns, actor records). */
  seed?: Array<{ collection: 'turns' | 'actors'; key: string; value: object }>;
  replyExists?: (task: TaskRecord, turn: TurnRecord) => Promise<boolean>;
  interruptThrows?: boolean;
  workspaceThrows?: boolean;
  /** ensureThread never settles (to test abort()). */
  hangThread?: boolean;
  /** Runs inside the workspace step, the publish step or verification (e.g. a user's stop). */
  duringPrepare?: (signal: AbortSignal) => Promise<void>;
  duringPublish?: (signal: AbortSignal) => Promise<void>;
  /** Verification settles only when this resolves (never: it waits for its deadlines). */
  verifyUntil?: () => Promise<void>;
  /** Change delivery on, answering this (or throwing 'throw'); absent: no publisher. */
  publish?: { ok: true } | { ok: false; errorCode: string; message: string } | 'throw';
  /** The repository's owner/name on Gitea now (it follows renames and transfers). */
  currentRepository?: () => Promise<{ owner: string; name: string } | null>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function world(script: Script, taskPatch: Partial<TaskRecord> = {}) {
  // The database's clock (SQLite's, which judges leases) can be moved ahead of the real one.
  const db = { aheadMs: 0 };
  const t = await createTestRuntime([taskKind()], undefined, { clockMs: () => Date.now() + db.aheadMs });
  cleanups.push(() => t.close());
  const { store, runtime } = t;
  const taskId = 'task-1';
  const at = new Date(NOW).toISOString();
  const repo: RepositoryRecord = {
    repoKey: REPO_KEY,
    instanceId: 'default',
    owner: 'acme',
    name: 'widget',
    cloneUrl: 'http://127.0.0.1:1/acme/widget.git',
    workspacePath: '/nonexistent/workspace/acme/widget',
    defaultBranch: 'main',
    status: 'active',
    registeredAt: at,
    lastFetchAt: null,
    version: 1,
  };
  const task: TaskRecord = {
    taskId,
    deliveryKey: 'default:d-1',
    deliveryId: 'd-1',
    repoKey: REPO_KEY,
    resourceKey: `${REPO_KEY}:issue:1`,
    sessionKey: `${REPO_KEY}:issue:1`,
    resource: { kind: 'issue', number: 1 },
    owner: 'acme',
    repo: 'widget',
    commentId: 11,
    commentUrl: 'http://127.0.0.1:1/acme/widget/issues/1#issuecomment-11',
    author: 'alice',
    instruction: '@ccweb-bot fix it',
    refs: null,
    ...initialTaskMirror(),
    queueSeq: 1,
    createdAt: at,
    updatedAt: at,
    stateVersion: 0,
    ...taskPatch,
  };
  const created = await store.transact(async (tx) => {
    if (script.repository !== false) await tx.insert('repositories', REPO_KEY, repo);
    await tx.insert('tasks', taskId, task);
    for (const r of script.seed ?? []) await tx.insert(r.collection, r.key, r.value);
    // The lease the executor runs under, as the repo-lock actor records it: the database's row and its mirror.
    await grantTestLease(tx as Tx, { repoKey: REPO_KEY, leaseId: LEASE.leaseId, owner: LEASE.owner, taskId });
    const events = script.startEvents ?? [{ type: 'CLAIM', leaseId: LEASE.leaseId } as TaskEvent];
    return runtime.createInTx(tx, 'task', taskActorId(taskId), { taskId }, { taskId, events: [{ type: 'ACCEPT' }, ...events] });
  });
  created.start();

  // Every event the executor sends, in order (the real runtime still decides and persists).
  const sent: TaskEvent[] = [];
  const send = runtime.send.bind(runtime);
  runtime.send = (actorId, event, options) => {
    sent.push(event as TaskEvent);
    return send(actorId, event, options);
  };
  // … and those it sends together in one runtime transaction.
  const transact = runtime.transact.bind(runtime);
  runtime.transact = (fn) =>
    transact((atx) =>
      fn({
        ...atx,
        send: (actorId, event, options) => {
          sent.push(event as TaskEvent);
          return atx.send(actorId, event, options);
        },
      }),
    );

  const calls = {
    ensureThread: 0,
    runTurn: [] as Array<{ kind: string; replyRetryPrompt?: string }>,
    cwds: [] as string[],
    interrupt: 0,
    prepare: 0,
    prepareCurrent: [] as Array<{ owner: string; name: string } | undefined>,
    publish: [] as Array<{ taskId: string; signal: AbortSignal | undefined }>,
    verify: 0,
    /** The fence each turn and publish was given (the executor's lease check). */
    fences: [] as Array<((tx: Tx) => Promise<void>) | undefined>,
  };
  const workspace: WorkspacePort = {
    async prepare(_task, _repo, signal, current) {
      calls.prepare += 1;
      calls.prepareCurrent.push(current);
      if (script.workspaceThrows) throw new Error('disk full');
      await script.duringPrepare?.(signal);
      // As git does: a cancelled clone or fetch fails.
      if (signal.aborted) return { ok: false, code: 'timeout', retryable: true, message: 'git killed' };
      return script.workspace ?? { ok: true, path: '/nonexistent/ws', head: 'abc123', lastFetchAt: at };
    },
  };
  let turnSeq = 0;
  const sessions: SessionPort = {
    async ensureThread(_task, _cwd) {
      calls.ensureThread += 1;
      if (script.hangThread) return new Promise(() => undefined);
      if (script.threadError !== undefined && calls.ensureThread >= (script.threadErrorFromCall ?? 1)) {
        const err = new Error(`thread start failed: ${script.threadError ?? 'no code'}`);
        if (script.threadError !== null) Object.assign(err, { errorCode: script.threadError });
        throw err;
      }
      return { threadId: 'thread-1', resumed: false };
    },
    async runTurn(tk, options) {
      calls.runTurn.push({ kind: options.kind, replyRetryPrompt: options.replyRetryPrompt });
      calls.fences.push(options.fence);
      calls.cwds.push(options.cwd);
      turnSeq += 1;
      const turnKey = `${tk.taskId}:${turnSeq}`;
      const turn: TurnRecord = {
        turnKey,
        turnId: `codex-turn-${turnSeq}`,
        taskId: tk.taskId,
        threadId: 'thread-1',
        kind: options.kind,
        status: 'completed',
        eventSeq: 1,
        marker: `<!-- ccweb taskId=${tk.taskId} turnKey=${turnKey} -->`,
        finalMessage: `final ${turnSeq}`,
        commentCall: null,
        startedAt: new Date(NOW).toISOString(),
        completedAt: new Date(NOW).toISOString(),
      };
      await store.transact((tx) => tx.insert('turns', turnKey, turn));
      if (options.kind === 'normal') await script.duringTurn?.();
      const o = script.outcome ?? { kind: 'replied', turnKey, turnId: turn.turnId!, finalMessage: 'done' };
      return (typeof o === 'function' ? o(options.kind) : o) as TurnOutcome;
    },
    async interrupt() {
      calls.interrupt += 1;
      if (script.interruptThrows) throw new Error('connection closed');
      return { confirmed: script.interruptConfirmed ?? true };
    },
  };
  // As the real one (reply-verification.ts): one verifier per verified turn (the last normal turn; a
  // reply_retry turn is verified as the turn it re-posts), asked for again after the retry turn it
  // asked for, and giving its verdict to whoever asks, before or after it is reached.
  const verifiers = new Map<string, Promise<VerificationResult>>();
  const verification: VerificationPort = {
    async verify({ turn, runReplyRetryTurn, fence }) {
      calls.fences.push(fence);
      const normal = (await store.byIndex<TurnRecord>('turns', 'taskId', turn.taskId)).filter((t) => t.kind === 'normal');
      const verified = turn.kind === 'reply_retry' ? (normal.at(-1)?.turnKey ?? '') : turn.turnKey;
      const known = verifiers.get(verified);
      if (known) return known;
      calls.verify += 1;
      const started = (async () => {
        await script.verifyUntil?.();
        const v = script.verification ?? { result: 'confirmed', commentId: 5 };
        return typeof v === 'function' ? v(runReplyRetryTurn) : v;
      })();
      verifiers.set(verified, started);
      return started;
    },
    replyRetryPrompt: (previous, marker) => `re-post only: ${previous} ${marker}`,
    questionRetryPrompt: (question, marker) => `ask again: ${question} ${marker}`,
  };
  const logs: Array<{ msg: string; fields: Record<string, unknown> }> = [];
  const executor = createTaskExecutor({
    store,
    runtime,
    workspace,
    sessions,
    verification,
    retryDelayMs: RETRY_DELAY,
    now: () => NOW,
    replyExists: script.replyExists,
    currentRepository: script.currentRepository,
    publisher:
      script.publish === undefined
        ? undefined
        : {
            async publish(taskId, opts) {
              calls.publish.push({ taskId, signal: opts?.signal });
              calls.fences.push(opts?.fence);
              if (script.publish === 'throw') throw new Error('git push hung up');
              await script.duringPublish?.(opts!.signal!);
              // As the publisher does: a stopped task's push is never started.
              if (opts?.signal?.aborted) return { ok: false, errorCode: 'publish_git_failed', message: 'not started: the task was stopped' };
              return script.publish!;
            },
          },
    log: (msg, fields) => logs.push({ msg, fields }),
  });
  const run = (signal = new AbortController().signal) => executor.run(taskId, LEASE, signal);
  const record = async () => (await store.get<TaskRecord>('tasks', taskId))!;
  const types = () => sent.map((e) => e.type);
  return { store, runtime, run, record, sent, types, calls, taskId, executor, logs, db };
}


describe('executor: workspace results → task events (§5.2.4, §8)', () => {
  // Every code the workspace manager returns (src/workspace WorkspaceErrorCode), with its retryable flag.
  const cases: Array<{ code: string; retryable: boolean; event: TaskEvent['type']; state: string }> = [
    { code: 'workspace_dirty', retryable: false, event: 'WORKSPACE_BLOCKED', state: 'blocked_workspace' }, // §8: dirty/conflict → blocked, no reset
    { code: 'auth_failed', retryable: true, event: 'PREPARE_FAILED', state: 'retry_wait' }, // §8: auth failure → retry_wait, at most once
    { code: 'timeout', retryable: true, event: 'PREPARE_FAILED', state: 'retry_wait' },
    { code: 'git_failed', retryable: true, event: 'PREPARE_FAILED', state: 'retry_wait' },
    { code: 'git_failed', retryable: false, event: 'PREPARE_FAILED', state: 'failed' },
    { code: 'path_invalid', retryable: false, event: 'PREPARE_FAILED', state: 'failed' },
  ];
  it.each(cases)('$code (retryable $retryable) → $event → $state', async (c) => {
    const w = await world({ workspace: { ok: false, code: c.code, retryable: c.retryable, message: 'scripted' } });
    await w.run();
    expect(w.types()).toEqual([c.event]);
    const event = w.sent[0] as TaskEvent & { errorCode?: string; retryable?: boolean; retryAt?: number; resumeAt?: string };
    expect(event.errorCode).toBe(c.code);
    if (c.event === 'PREPARE_FAILED') expect(event).toMatchObject({ retryable: c.retryable, retryAt: NOW + RETRY_DELAY, resumeAt: 'preparing' });
    const r = await w.record();
    expect(r.state).toBe(c.state);
    expect(r.errorCode).toBe(c.code);
    if (c.state === 'retry_wait') expect(r).toMatchObject({ attempt: 1, nextRetryAt: new Date(NOW + RETRY_DELAY).toISOString() });
    if (c.state === 'blocked_workspace') expect(r.leaseId).toBeNull();
    expect(w.calls.ensureThread).toBe(0);
  });

  it('a workspace that is ready → WORKSPACE_READY, after the thread is ensured, and the repository remembers the fetch', async () => {
    const w = await world({});
    await w.run();
    expect(w.types().slice(0, 1)).toEqual(['WORKSPACE_READY']);
    expect(w.calls.ensureThread).toBeGreaterThanOrEqual(1);
    expect((await w.store.get<RepositoryRecord>('repositories', REPO_KEY))!.lastFetchAt).toBe(new Date(NOW).toISOString());
  });

  it('a repository the store does not know → FAIL repository_unknown, no workspace touched', async () => {
    const w = await world({ repository: false });
    await w.run();
    expect(w.sent).toEqual([{ type: 'FAIL', errorCode: 'repository_unknown' }]);
    expect(await w.record()).toMatchObject({ state: 'failed', errorCode: 'repository_unknown' });
    expect(w.calls.prepare).toBe(0);
  });

  it('the second retryable failure fails the task (§8: at most one retry)', async () => {
    const w = await world({ workspace: { ok: false, code: 'auth_failed', retryable: true, message: 'scripted' } });
    await w.run();
    expect((await w.record()).state).toBe('retry_wait');
    await w.runtime.send(taskActorId(w.taskId), { type: 'RETRY_DUE', leaseId: 'lease-2' } as TaskEvent);
    await w.run();
    expect(w.types()).toEqual(['PREPARE_FAILED', 'RETRY_DUE', 'PREPARE_FAILED']);
    expect(await w.record()).toMatchObject({ state: 'failed', errorCode: 'auth_failed', attempt: 1 });
  });
});

describe('executor: thread start (MCP) errors → task events (§8 MCP rows)', () => {
  // §8: gitea-mcp missing, failing to start, failing initialize → failed at once, never retried.
  it.each(['mcp_command_missing', 'mcp_start_failed', 'mcp_initialize_failed'])('%s → FAIL, failed without a retry', async (code) => {
    const w = await world({ threadError: code });
    await w.run();
    expect(w.sent).toEqual([{ type: 'FAIL', errorCode: code }]);
    expect(await w.record()).toMatchObject({ state: 'failed', errorCode: code, attempt: 0 });
  });

  // Anything else (app-server unreachable, thread/start refused, no code at all) → retry_wait (§8 "Codex App 不可达").
  it.each([
    ['app_server_timeout', 'app_server_timeout'],
    ['thread_start_failed', 'thread_start_failed'],
    [null, 'app_server_unavailable'],
  ])('%s → PREPARE_FAILED retryable → retry_wait', async (code, expected) => {
    const w = await world({ threadError: code });
    await w.run();
    expect(w.sent).toEqual([{ type: 'PREPARE_FAILED', errorCode: expected, retryable: true, retryAt: NOW + RETRY_DELAY, resumeAt: 'preparing' }]);
    expect(await w.record()).toMatchObject({ state: 'retry_wait', errorCode: expected, attempt: 1 });
  });

  it('a thread that cannot be ensured once the turn should start → STEP_FAILED executor_error (retry)', async () => {
    const w = await world({ threadError: 'app_server_timeout', threadErrorFromCall: 2 });
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'STEP_FAILED']);
    expect(w.sent[1]).toMatchObject({ errorCode: 'executor_error', retryable: true });
    expect(await w.record()).toMatchObject({ state: 'retry_wait', errorCode: 'executor_error' });
  });
});

describe('executor: TurnOutcome → task events (§5.3.5)', () => {
  const turn = { turnKey: 'task-1:1', turnId: 'codex-turn-1' };
  it('replied → TURN_REPLIED → verifying_reply → (confirmed) REPLY_CONFIRMED → succeeded', async () => {
    const w = await world({ outcome: { kind: 'replied', ...turn, finalMessage: 'ok' } });
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED', 'REPLY_CONFIRMED']);
    expect((await w.record()).state).toBe('succeeded');
    expect(w.calls.runTurn).toEqual([{ kind: 'normal', replyRetryPrompt: undefined }]);
    // The turn runs in the repository's workspace; every transition is audited as the executor's.
    expect(w.calls.cwds).toEqual(['/nonexistent/workspace/acme/widget']);
    const transitions = (await w.store.audit({ actorId: taskActorId('task-1') })).filter((e) => e.action === 'task.transition');
    expect(transitions.slice(-3).map((e) => e.actor)).toEqual(['system:executor', 'system:executor', 'system:executor']);
  });

  it('no_comment (the agent never called the comment tool) → TURN_REPLIED: verification decides (§5.4.3)', async () => {
    const w = await world({ outcome: { kind: 'no_comment', ...turn, finalMessage: 'ok' }, verification: { result: 'failed', errorCode: 'rest_fallback_failed' } });
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED', 'REPLY_FAILED']);
  });

  it('waiting_user → TURN_WAITING_USER → verifying_reply (asking): the question is verified on Gitea first → REPLY_CONFIRMED → waiting_user (lease released)', async () => {
    const states: string[] = [];
    const w = await world({
      outcome: { kind: 'waiting_user', ...turn, question: 'which branch?' },
      verification: async () => {
        states.push((await w.record()).state);
        return { result: 'confirmed', commentId: 5 };
      },
    });
    await w.run();
    expect(w.calls.verify).toBe(1);
    // The task shows that it is verifying its question, not running.
    expect(states).toEqual(['verifying_reply']);
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_WAITING_USER', 'REPLY_CONFIRMED']);
    expect(await w.record()).toMatchObject({ state: 'waiting_user', leaseId: null, attempt: 0 });
  });

  it('a question not on Gitea: one retry turn (through retry_wait → running, as for an answer) re-posts it with the question\'s prompt, then the fallback lands and the task waits', async () => {
    const states: string[] = [];
    const w = await world({
      // The retry turn ends asking again, as the question's prompt tells it to: that is a completed retry turn.
      outcome: (kind) => ({ kind: 'waiting_user', ...turn, question: 'which branch?', finalMessage: 'posted', commentCall: null }) as TurnOutcome,
      verification: async (retry) => {
        states.push((await w.record()).state);
        expect(await retry()).toEqual({ ok: true });
        states.push((await w.record()).state);
        return { result: 'confirmed_via_fallback', commentId: 9, mcpFailureReason: 'mcp_reply_missing' };
      },
    });
    await w.run();
    expect(w.calls.runTurn.map((c) => c.kind)).toEqual(['normal', 'reply_retry']);
    expect(w.calls.runTurn[1]!.replyRetryPrompt).toBe('ask again: final 1 <!-- ccweb taskId=task-1 turnKey=task-1:1 -->');
    expect(states).toEqual(['verifying_reply', 'verifying_reply']);
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_WAITING_USER', 'REPLY_MISSING', 'RETRY_DUE', 'TURN_REPLIED', 'REPLY_CONFIRMED_VIA_FALLBACK']);
    // Waiting: no lease, the fallback's reason kept, the task's one reply retry used, its execution retry not.
    expect(await w.record()).toMatchObject({ state: 'waiting_user', leaseId: null, mcpFailureReason: 'mcp_reply_missing', replyAttempt: 1, attempt: 0 });
  });

  it('a question that cannot be confirmed on Gitea → REPLY_FAILED → failed_reply with the verifier\'s code: the task never waits on a question nobody sees', async () => {
    const w = await world({ outcome: { kind: 'waiting_user', ...turn, question: 'which branch?' }, verification: { result: 'failed', errorCode: 'reply_query_failed' } });
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_WAITING_USER', 'REPLY_FAILED']);
    expect(await w.record()).toMatchObject({ state: 'failed_reply', errorCode: 'reply_query_failed' });
  });

  const asked = { turnKey: 'task-1:0', turnId: 'codex-turn-0', taskId: 'task-1', threadId: 'thread-1', kind: 'normal', status: 'completed', eventSeq: 1, marker: '<!-- m0 -->', finalMessage: 'which branch?\nCCWEB_WAITING_USER', question: 'which branch?', commentCall: null, startedAt: new Date(NOW - 1000).toISOString(), completedAt: new Date(NOW - 500).toISOString() };

  it('a restart during the question\'s retry turn (the task re-prepared): the question is verified again, not asked again', async () => {
    const w = await world({ seed: [{ collection: 'turns', key: 'task-1:0', value: asked }], replyExists: async () => true });
    await w.run();
    expect(w.calls.runTurn).toEqual([]);
    expect(w.calls.verify).toBe(1);
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_WAITING_USER', 'REPLY_CONFIRMED']);
    expect((await w.record()).state).toBe('waiting_user');
  });

  it('a restart during the question\'s verification: verifying_reply (asking) is resumed as it is — no turn, no execution retry — and its retry turn still re-posts the question', async () => {
    const w = await world({
      seed: [{ collection: 'turns', key: 'task-1:0', value: asked }],
      startEvents: [{ type: 'CLAIM', leaseId: LEASE.leaseId }, { type: 'WORKSPACE_READY' }, { type: 'TURN_WAITING_USER' }],
      verification: async (retry) => {
        expect(await retry()).toEqual({ ok: true });
        return { result: 'confirmed', commentId: 5 };
      },
      outcome: () => ({ kind: 'waiting_user', turnKey: 'task-1:1', turnId: 'codex-turn-1', question: 'which branch?' }),
    });
    expect((await w.record()).state).toBe('verifying_reply');
    await w.run();
    expect(w.calls.runTurn.map((c) => c.kind)).toEqual(['reply_retry']);
    expect(w.calls.runTurn[0]!.replyRetryPrompt).toBe('ask again: which branch? <!-- m0 -->');
    expect(w.types()).toEqual(['REPLY_MISSING', 'RETRY_DUE', 'TURN_REPLIED', 'REPLY_CONFIRMED']);
    expect(await w.record()).toMatchObject({ state: 'waiting_user', attempt: 0, leaseId: null });
  });

  it.each([
    ['app_server_exited', true, 'retry_wait'],
    ['app_server_timeout', true, 'retry_wait'],
    ['turn_failed', true, 'retry_wait'],
    ['turn_timeout', false, 'failed'],
    ['abort_timeout', false, 'failed'],
  ] as const)('failed %s (retryable %s) → TURN_FAILED → %s', async (code, retryable, state) => {
    const w = await world({ outcome: { kind: 'failed', ...turn, errorCode: code, retryable } });
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_FAILED']);
    expect(w.sent[1]).toEqual({ type: 'TURN_FAILED', errorCode: code, retryable, retryAt: NOW + RETRY_DELAY, resumeAt: 'preparing' });
    expect(await w.record()).toMatchObject({ state, errorCode: code });
  });

  it('interrupted (not by an abort) → TURN_FAILED turn_interrupted, retryable → retry_wait', async () => {
    const w = await world({ outcome: { kind: 'interrupted', ...turn } });
    await w.run();
    expect(w.sent[1]).toEqual({ type: 'TURN_FAILED', errorCode: 'turn_interrupted', retryable: true, retryAt: NOW + RETRY_DELAY, resumeAt: 'preparing' });
    expect((await w.record()).state).toBe('retry_wait');
  });

  it('an operator abort during the turn, turn interrupted → ABORT_CONFIRMED → aborted, without asking Codex again', async () => {
    const holder: { w?: Awaited<ReturnType<typeof world>> } = {};
    const w = await world({
      outcome: { kind: 'interrupted', ...turn },
      duringTurn: async () => {
        await holder.w!.runtime.send(taskActorId('task-1'), { type: 'ABORT', by: 'admin:alice' } as TaskEvent);
      },
    });
    holder.w = w;
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'ABORT', 'ABORT_CONFIRMED']);
    expect(await w.record()).toMatchObject({ state: 'aborted', stoppedBy: 'admin:alice' });
    expect(w.calls.interrupt).toBe(0);
  });

  it.each([
    [true, 'ABORT_CONFIRMED', 'aborted'],
    [false, 'ABORT_TIMEOUT', 'failed'],
  ] as const)('an abort while the turn still answered: interrupt confirmed %s → %s → %s', async (confirmed, event, state) => {
    const holder: { w?: Awaited<ReturnType<typeof world>> } = {};
    const w = await world({
      outcome: { kind: 'replied', ...turn, finalMessage: 'ok' },
      interruptConfirmed: confirmed,
      duringTurn: async () => {
        await holder.w!.runtime.send(taskActorId('task-1'), { type: 'ABORT', by: 'admin:alice' } as TaskEvent);
      },
    });
    holder.w = w;
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'ABORT', event]);
    expect(w.calls.interrupt).toBe(1);
    expect((await w.record()).state).toBe(state);
  });
});

describe('executor: a worker that lost its lease commits nothing more for the task', () => {
  it.each([
    ['another worker took the lease over', 'taken'],
    ['the lease expired on the database clock (nobody took it yet)', 'expired'],
  ] as const)('%s: the turn\'s outcome is refused (lease_lost), the task stays where it was', async (_name, how) => {
    let w!: Awaited<ReturnType<typeof world>>;
    w = await world({
      duringTurn: async () => {
        if (how === 'expired') w.db.aheadMs = 61_000;
        else {
          w.db.aheadMs = 61_000; // past the first lease's expiry, so the takeover is granted
          await grantTestLeaseIn(w.store, { repoKey: REPO_KEY, leaseId: 'lease-2', owner: 'worker-2', taskId: w.taskId });
        }
      },
    });
    await expect(w.run()).rejects.toMatchObject({ code: 'lease_lost' });
    expect((await w.record()).state).toBe('running');
    // It tried once, and recorded no failure of the step either: that is not its to record.
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED']);
  });

  it('lost and taken over while publishing (the worker told to stop): the aborted publish records nothing; once this node holds the lease again, the publish runs again and the task goes on', async () => {
    const lost = new AbortController();
    let publishes = 0;
    let w!: Awaited<ReturnType<typeof world>>;
    w = await world({
      startEvents: [...RUNNING, { type: 'TURN_REPLIED', publish: true }],
      seed: [priorTurn({ status: 'completed' })],
      publish: { ok: true },
      duringPublish: async () => {
        if ((publishes += 1) > 1) return;
        w.db.aheadMs = 61_000; // past the first lease's expiry, so the takeover is granted
        await grantTestLeaseIn(w.store, { repoKey: REPO_KEY, leaseId: 'lease-2', owner: 'worker-2', taskId: w.taskId });
        lost.abort(new Error('lease_lost'));
      },
    });
    await w.run(lost.signal).catch(() => undefined);
    // The publish saw the stop and failed; that failure is not this worker's to record any more.
    expect((await w.record()).state).toBe('publishing');
    expect(w.types()).toEqual(['PUBLISH_FAILED']);
    w.db.aheadMs = 122_000; // past the takeover's expiry too: this node is granted the lease again
    await grantTestLeaseIn(w.store, { repoKey: REPO_KEY, leaseId: 'lease-3', owner: LEASE.owner, taskId: w.taskId });
    await w.executor.run(w.taskId, { ...LEASE, leaseId: 'lease-3' }, new AbortController().signal);
    expect(w.calls.publish).toHaveLength(2);
    expect(w.types()).toEqual(['PUBLISH_FAILED', 'PUBLISHED', 'REPLY_CONFIRMED']);
    expect((await w.record()).state).toBe('succeeded');
  }, 15_000);

  it('lost and taken over while verifying (which keeps its state): no verdict here; once this node holds the lease again, the same verification goes on to its verdict', async () => {
    const lost = new AbortController();
    let w!: Awaited<ReturnType<typeof world>>;
    w = await world({
      startEvents: [...RUNNING, { type: 'TURN_REPLIED' }],
      seed: [priorTurn({ status: 'completed' })],
      verifyUntil: async () => {
        w.db.aheadMs = 61_000;
        await grantTestLeaseIn(w.store, { repoKey: REPO_KEY, leaseId: 'lease-2', owner: 'worker-2', taskId: w.taskId });
        lost.abort(new Error('lease_lost'));
      },
    });
    await w.run(lost.signal);
    expect((await w.record()).state).toBe('verifying_reply');
    expect(w.types()).toEqual([]);
    w.db.aheadMs = 122_000;
    await grantTestLeaseIn(w.store, { repoKey: REPO_KEY, leaseId: 'lease-3', owner: LEASE.owner, taskId: w.taskId });
    await w.executor.run(w.taskId, { ...LEASE, leaseId: 'lease-3' }, new AbortController().signal);
    expect(w.calls.verify).toBe(1);
    expect(w.types()).toEqual(['REPLY_CONFIRMED']);
    expect((await w.record()).state).toBe('succeeded');
  }, 15_000);

  it('the verification refused its fallback post (lease_lost): the run ends with it, recording no verdict', async () => {
    const w = await world({
      // As reply-verification.ts rejects once the fallback's fenced intent is refused.
      verification: async () => {
        throw new LeaseLostError(REPO_KEY, 1);
      },
    });
    await expect(w.run()).rejects.toMatchObject({ code: 'lease_lost' });
    expect((await w.record()).state).toBe('verifying_reply');
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED']);
  });
});

describe('executor: the turn, the publish and the verification are given the lease fence', () => {
  it('each passes while the lease is current and refuses (lease_lost) once another worker took it over', async () => {
    let w!: Awaited<ReturnType<typeof world>>;
    // What the receipt's progress edits ask for (fenceOf): the running worker's fence, none once it is done.
    const duringRun: Array<unknown> = [];
    w = await world({ publish: { ok: true }, duringTurn: async () => void duringRun.push(w.executor.fenceOf(w.taskId)) });
    await w.run();
    expect(w.executor.fenceOf(w.taskId)).toBeUndefined();
    w.calls.fences.push(duringRun[0] as never);
    expect(w.calls.fences).toHaveLength(4); // the normal turn, the publish, the verification, then fenceOf during the run
    const store = w.store as unknown as { transact: (fn: (tx: Tx) => Promise<void>) => Promise<void> };
    const check = (fence: ((tx: Tx) => Promise<void>) | undefined) => store.transact((t) => fence!(t));
    for (const fence of w.calls.fences) await expect(check(fence)).resolves.toBeUndefined();
    w.db.aheadMs = 61_000;
    await grantTestLeaseIn(w.store, { repoKey: REPO_KEY, leaseId: 'lease-2', owner: 'worker-2', taskId: w.taskId });
    for (const fence of w.calls.fences) await expect(check(fence)).rejects.toMatchObject({ code: 'lease_lost' });
  });
});

describe('executor: verification results → task events (§5.4)', () => {
  it('confirmed_via_fallback → REPLY_CONFIRMED_VIA_FALLBACK keeping the MCP failure reason → succeeded_with_rest_fallback', async () => {
    const w = await world({ verification: { result: 'confirmed_via_fallback', commentId: 9, mcpFailureReason: 'mcp_call_rejected' } });
    await w.run();
    expect(w.sent.at(-1)).toEqual({ type: 'REPLY_CONFIRMED_VIA_FALLBACK', mcpFailureReason: 'mcp_call_rejected' });
    expect(await w.record()).toMatchObject({ state: 'succeeded_with_rest_fallback', mcpFailureReason: 'mcp_call_rejected' });
  });

  it('confirmed_via_fallback without a reason → mcp_reply_missing is recorded', async () => {
    const w = await world({ verification: { result: 'confirmed_via_fallback' } });
    await w.run();
    expect(w.sent.at(-1)).toEqual({ type: 'REPLY_CONFIRMED_VIA_FALLBACK', mcpFailureReason: 'mcp_reply_missing' });
  });

  it.each([
    [{ result: 'failed', errorCode: 'reply_query_failed' } as VerificationResult, 'reply_query_failed'],
    [{ result: 'failed' } as VerificationResult, 'reply_unconfirmed'],
  ])('%j → REPLY_FAILED %s → failed_reply', async (v, code) => {
    const w = await world({ verification: v });
    await w.run();
    expect(w.sent.at(-1)).toEqual({ type: 'REPLY_FAILED', errorCode: code });
    expect(await w.record()).toMatchObject({ state: 'failed_reply', errorCode: code });
  });

  it('the one reply_retry turn: REPLY_MISSING → RETRY_DUE (same lease) → a reply_retry turn with the re-post prompt → TURN_REPLIED, then the verifier decides', async () => {
    let retry: { ok: boolean } | undefined;
    const w = await world({
      verification: async (runReplyRetryTurn) => {
        retry = await runReplyRetryTurn();
        return { result: 'confirmed', commentId: 6 };
      },
    });
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED', 'REPLY_MISSING', 'RETRY_DUE', 'TURN_REPLIED', 'REPLY_CONFIRMED']);
    expect(w.sent[2]).toEqual({ type: 'REPLY_MISSING', retryAt: NOW });
    expect(w.sent[3]).toEqual({ type: 'RETRY_DUE', leaseId: LEASE.leaseId });
    expect(w.calls.runTurn.map((c) => c.kind)).toEqual(['normal', 'reply_retry']);
    expect(w.calls.runTurn[1]!.replyRetryPrompt).toBe('re-post only: final 1 <!-- ccweb taskId=task-1 turnKey=task-1:1 -->');
    expect(retry).toEqual({ ok: true });
    expect(await w.record()).toMatchObject({ state: 'succeeded', replyAttempt: 1, leaseId: LEASE.leaseId });
  });

  it('a reply_retry turn that throws reports ok: false and the task still goes back to verification', async () => {
    let retry: { ok: boolean } | undefined;
    const w = await world({
      outcome: (kind) => {
        if (kind === 'reply_retry') throw new Error('app-server gone');
        return { kind: 'replied', turnKey: 'k', turnId: 't', finalMessage: 'x' };
      },
      verification: async (runReplyRetryTurn) => {
        retry = await runReplyRetryTurn();
        return { result: 'confirmed_via_fallback' };
      },
    });
    await w.run();
    expect(retry).toEqual({ ok: false });
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED', 'REPLY_MISSING', 'RETRY_DUE', 'TURN_REPLIED', 'REPLY_CONFIRMED_VIA_FALLBACK']);
  });

  it('abort() of a task the executor is not running is harmless', async () => {
    const w = await world({});
    expect(() => w.executor.abort('task-unknown')).not.toThrow();
    expect(w.calls.interrupt).toBe(1);
  });

  it('a reply_retry turn that does not reply reports ok: false; a second retry is refused by the machine', async () => {
    const results: Array<{ ok: boolean }> = [];
    const w = await world({
      outcome: (kind) => (kind === 'normal' ? { kind: 'replied', turnKey: 'k', turnId: 't', finalMessage: 'x' } : { kind: 'no_comment', turnKey: 'k2', turnId: 't2', finalMessage: 'x' }),
      verification: async (runReplyRetryTurn) => {
        results.push(await runReplyRetryTurn());
        results.push(await runReplyRetryTurn());
        return { result: 'failed', errorCode: 'rest_fallback_failed' };
      },
    });
    await w.run();
    expect(results).toEqual([{ ok: false }, { ok: false }]);
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED', 'REPLY_MISSING', 'RETRY_DUE', 'TURN_REPLIED', 'REPLY_MISSING', 'REPLY_FAILED']);
    expect(await w.record()).toMatchObject({ state: 'failed_reply', replyAttempt: 1 });
  });
});

const RUNNING = [{ type: 'CLAIM', leaseId: LEASE.leaseId }, { type: 'WORKSPACE_READY' }] as TaskEvent[];
function priorTurn(patch: Partial<TurnRecord> = {}): { collection: 'turns'; key: string; value: TurnRecord } {
  const value: TurnRecord = {
    turnKey: 'task-1:0',
    turnId: 'codex-turn-0',
    taskId: 'task-1',
    threadId: 'thread-1',
    kind: 'normal',
    status: 'started',
    eventSeq: 1,
    marker: '<!-- ccweb taskId=task-1 turnKey=task-1:0 -->',
    finalMessage: null,
    commentCall: null,
    startedAt: new Date(NOW - 5_000).toISOString(),
    completedAt: null,
    ...patch,
  };
  return { collection: 'turns', key: value.turnKey, value };
}

describe('executor: resuming a task that was interrupted (restart recovery, §5.5)', () => {
  it('running with a live reply verifier → TURN_REPLIED at once: the answer is verified, not produced twice', async () => {
    const w = await world({
      startEvents: RUNNING,
      seed: [priorTurn(), { collection: 'actors', key: 'verifier:task-1', value: { actorId: 'verifier:task-1', kind: 'verifier', status: 'active', taskId: 'task-1' } }],
    });
    await w.run();
    expect(w.types()).toEqual(['TURN_REPLIED', 'REPLY_CONFIRMED']);
    expect(w.calls.runTurn).toEqual([]);
  });

  it('a finished verifier does not count: the turn runs', async () => {
    const w = await world({
      startEvents: RUNNING,
      seed: [{ collection: 'actors', key: 'verifier:task-1', value: { actorId: 'verifier:task-1', kind: 'verifier', status: 'done', taskId: 'task-1' } }],
    });
    await w.run();
    expect(w.calls.runTurn.map((c) => c.kind)).toEqual(['normal']);
  });

  it.each([
    ['the reply is on Gitea', async (): Promise<boolean> => true, ['TURN_REPLIED', 'REPLY_CONFIRMED'], 0],
    ['Gitea does not answer (unknown counts as maybe answered: never a second answer)', async (): Promise<boolean> => Promise.reject(new Error('503')), ['TURN_REPLIED', 'REPLY_CONFIRMED'], 0],
    ['the reply is not there', async (): Promise<boolean> => false, ['TURN_REPLIED', 'REPLY_CONFIRMED'], 1],
  ] as const)('a prior turn for this input, %s', async (_what, replyExists, events, turns) => {
    const asked: string[] = [];
    const w = await world({
      startEvents: RUNNING,
      seed: [priorTurn()],
      replyExists: async (_t, turn) => {
        asked.push(turn.turnKey);
        return replyExists();
      },
    });
    await w.run();
    expect(asked).toEqual(['task-1:0']);
    expect(w.types()).toEqual(events);
    expect(w.calls.runTurn.length).toBe(turns);
  });

  it('a follow-up after the prior turn (the user replied): the turn runs without asking Gitea', async () => {
    const asked: string[] = [];
    const w = await world(
      { startEvents: RUNNING, seed: [priorTurn()], replyExists: async (_t, turn): Promise<boolean> => (asked.push(turn.turnKey), true) },
      { followUps: [{ commentId: 12, author: 'alice', body: 'yes', commentUrl: 'u', deliveryKey: 'default:d-2', at: new Date(NOW - 1_000).toISOString() }] },
    );
    await w.run();
    expect(asked).toEqual([]);
    expect(w.calls.runTurn.map((c) => c.kind)).toEqual(['normal']);
  });

  it('a follow-up older than the prior turn: the prior turn answered it, Gitea is asked', async () => {
    const asked: string[] = [];
    const w = await world(
      { startEvents: RUNNING, seed: [priorTurn()], replyExists: async (_t, turn): Promise<boolean> => (asked.push(turn.turnKey), true) },
      { followUps: [{ commentId: 12, author: 'alice', body: 'yes', commentUrl: 'u', deliveryKey: 'default:d-2', at: new Date(NOW - 60_000).toISOString() }] },
    );
    await w.run();
    expect(asked).toEqual(['task-1:0']);
    expect(w.calls.runTurn).toEqual([]);
  });

  it('only normal turns count as the prior turn (a reply_retry turn does not)', async () => {
    const asked: string[] = [];
    const w = await world({ startEvents: RUNNING, seed: [priorTurn({ kind: 'reply_retry' })], replyExists: async (_t, turn): Promise<boolean> => (asked.push(turn.turnKey), true) });
    await w.run();
    expect(asked).toEqual([]);
    expect(w.calls.runTurn.length).toBe(1);
  });

  it('verifying_reply without a turn record → REPLY_FAILED turn_record_missing', async () => {
    const w = await world({ startEvents: [...RUNNING, { type: 'TURN_REPLIED' }] as TaskEvent[] });
    await w.run();
    expect(w.sent).toEqual([{ type: 'REPLY_FAILED', errorCode: 'turn_record_missing' }]);
    expect(await w.record()).toMatchObject({ state: 'failed_reply', errorCode: 'turn_record_missing' });
  });

  it('aborting when the executor picks it up → interrupt; confirmed → ABORT_CONFIRMED', async () => {
    const w = await world({ startEvents: [...RUNNING, { type: 'ABORT', by: 'admin:bob' }] as TaskEvent[] });
    await w.run();
    expect(w.calls.interrupt).toBe(1);
    expect(w.types()).toEqual(['ABORT_CONFIRMED']);
    expect((await w.record()).state).toBe('aborted');
  });

  it('an interrupt that throws counts as unconfirmed → ABORT_TIMEOUT → failed', async () => {
    const w = await world({ startEvents: [...RUNNING, { type: 'ABORT', by: 'admin:bob' }] as TaskEvent[], interruptThrows: true });
    await w.run();
    expect(w.types()).toEqual(['ABORT_TIMEOUT']);
    expect(await w.record()).toMatchObject({ state: 'failed', errorCode: 'abort_timeout' });
  });

  it('a verifier that throws → STEP_FAILED executor_error → failed_reply (verifying_reply never retries by itself)', async () => {
    const w = await world({
      verification: async () => {
        throw new Error('boom');
      },
    });
    await w.run();
    expect(w.sent.at(-1)).toEqual({ type: 'STEP_FAILED', errorCode: 'executor_error', retryable: true, retryAt: NOW + RETRY_DELAY });
    expect((await w.record()).state).toBe('failed_reply');
    expect(w.logs.some((l) => l.msg === 'executor error' && l.fields.error === 'boom')).toBe(true);
  });

  it('a workspace step that throws while preparing → STEP_FAILED executor_error (retry)', async () => {
    const w = await world({ workspaceThrows: true });
    await w.run();
    expect(w.sent).toEqual([{ type: 'STEP_FAILED', errorCode: 'executor_error', retryable: true, retryAt: NOW + RETRY_DELAY }]);
    expect((await w.record()).state).toBe('retry_wait');
  });

  it('a task that is not in an active state is left alone', async () => {
    const w = await world({ startEvents: [{ type: 'CANCEL', by: 'admin:bob' }] as TaskEvent[] });
    await w.run();
    expect(w.sent).toEqual([]);
    expect(w.calls.prepare).toBe(0);
  });

  it('a run whose signal is already aborted (lease lost or scheduler stopping before it began) does nothing', async () => {
    const w = await world({});
    const aborted = new AbortController();
    aborted.abort(new Error('lease_lost'));
    await w.run(aborted.signal);
    expect(w.calls.prepare).toBe(0);
    expect(w.calls.ensureThread).toBe(0);
    expect(w.sent).toEqual([]);
    expect((await w.record()).state).toBe('preparing');
  });

  it('a signal aborted during a step stops the run before the next step', async () => {
    const lease = new AbortController();
    const w = await world({ duringTurn: async () => lease.abort(new Error('lease_lost')) }, {});
    await w.run(lease.signal);
    // The turn that was running when the lease was lost still reports its outcome; nothing runs after it.
    expect(w.calls.runTurn).toHaveLength(1);
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED']);
    expect((await w.record()).state).toBe('verifying_reply');
  });

  it('abort(taskId) asks Codex to interrupt the task\'s turn (the stop itself is the stored ABORT)', async () => {
    const w = await world({ hangThread: true });
    const running = w.run();
    await new Promise((r) => setTimeout(r, 50));
    w.executor.abort('task-1');
    expect(w.calls.interrupt).toBe(1);
    // The hung step never returns; the run is abandoned with it (the scheduler's lease expires).
    void running;
  });
});

// A stop in preparing, publishing or verifying reaches the task, and an abort whose turn Codex never
// confirmed does not release the lease as if confirmed.
describe('executor: a stop in every step with work in flight', () => {
  /** A user's stop as intake delivers it: the event (durable) first, then the host asked to stop the work. */
  const stopNow = (holder: { w?: Awaited<ReturnType<typeof world>> }) => async () => {
    expect((await holder.w!.runtime.send(taskActorId('task-1'), { type: 'ABORT', by: 'gitea:user:alice' } as TaskEvent)).ok).toBe(true);
    holder.w!.executor.abort('task-1');
  };

  it('during preparing: the workspace step is cancelled, no thread, no turn, nothing published → aborted', async () => {
    const holder: { w?: Awaited<ReturnType<typeof world>> } = {};
    const w = await world({ publish: { ok: true }, duringPrepare: stopNow(holder) });
    holder.w = w;
    await w.run();
    // The cancelled step reports nothing (its state was left): the stop's effect ends the task once it has ended.
    expect(w.types()).toEqual(['ABORT', 'ABORT_CONFIRMED']);
    expect(await w.record()).toMatchObject({ state: 'aborted', stoppedBy: 'gitea:user:alice' });
    expect([w.calls.ensureThread, w.calls.runTurn.length, w.calls.publish.length, w.calls.verify]).toEqual([0, 0, 0, 0]);
  });

  it('during publishing: the publisher sees the stop before it pushes; no verification → aborted', async () => {
    const holder: { w?: Awaited<ReturnType<typeof world>> } = {};
    const w = await world({ publish: { ok: true }, duringPublish: stopNow(holder) });
    holder.w = w;
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED', 'ABORT', 'PUBLISH_FAILED', 'ABORT_CONFIRMED']);
    expect(w.calls.publish[0]!.signal!.aborted).toBe(true);
    expect(w.calls.verify).toBe(0);
    expect((await w.record()).state).toBe('aborted');
  });

  it('during verification: the task stops now, without waiting for the verifier → aborted', async () => {
    const holder: { w?: Awaited<ReturnType<typeof world>> } = {};
    let started!: () => void;
    const verifying = new Promise<void>((r) => (started = r));
    const w = await world({ verifyUntil: () => (started(), new Promise<void>(() => undefined)) });
    holder.w = w;
    const run = w.run();
    await verifying;
    await stopNow(holder)();
    await run;
    expect(w.types()).toEqual(['WORKSPACE_READY', 'TURN_REPLIED', 'ABORT', 'ABORT_CONFIRMED']);
    expect((await w.record()).state).toBe('aborted');
  });

  it('a turn whose stop Codex never confirmed (abort_timeout) → ABORT_TIMEOUT → failed, not "confirmed"', async () => {
    const holder: { w?: Awaited<ReturnType<typeof world>> } = {};
    // The session manager gave up waiting and ended the app-server's processes (session-manager.ts); a
    // later interrupt finds no turn and would answer "confirmed".
    const w = await world({ outcome: { kind: 'failed', turnKey: 'task-1:1', turnId: 'codex-turn-1', errorCode: 'abort_timeout', retryable: false }, interruptConfirmed: true, duringTurn: stopNow(holder) });
    holder.w = w;
    await w.run();
    expect(w.types()).toEqual(['WORKSPACE_READY', 'ABORT', 'ABORT_TIMEOUT']);
    expect(await w.record()).toMatchObject({ state: 'failed', errorCode: 'abort_timeout' });
  });
});

describe('executor: change delivery (publish after the turn, then verify)', () => {
  it('with a publisher, a replied turn is published first: TURN_REPLIED (publish) → PUBLISHED → verification', async () => {
    const w = await world({ publish: { ok: true } });
    await w.run();
    expect(w.sent.slice(0, 3)).toEqual([{ type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED', publish: true }, { type: 'PUBLISHED' }]);
    expect(w.types().at(-1)).toBe('REPLY_CONFIRMED');
    expect((await w.record()).state).toBe('succeeded');
    // The publish step can be cancelled with the run (the lease lost, an abort).
    expect(w.calls.publish).toHaveLength(1);
    expect(w.calls.publish[0]!.taskId).toBe('task-1');
    expect(w.calls.publish[0]!.signal).toBeInstanceOf(AbortSignal);
  });

  it('without a publisher, nothing is published: TURN_REPLIED straight to verification', async () => {
    const w = await world({});
    await w.run();
    expect(w.sent.slice(0, 2)).toEqual([{ type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED', publish: false }]);
    expect(w.types()).not.toContain('PUBLISHED');
  });

  it('a publish that fails → PUBLISH_FAILED with its error code → failed, no verification', async () => {
    const w = await world({ publish: { ok: false, errorCode: 'push_rejected', message: 'rejected by hook' } });
    await w.run();
    expect(w.sent.at(-1)).toEqual({ type: 'PUBLISH_FAILED', errorCode: 'push_rejected' });
    expect(await w.record()).toMatchObject({ state: 'failed', errorCode: 'push_rejected' });
  });

  it('a publisher that throws → STEP_FAILED executor_error → failed', async () => {
    const w = await world({ publish: 'throw' });
    await w.run();
    expect(w.sent.at(-1)).toEqual({ type: 'STEP_FAILED', errorCode: 'executor_error', retryable: true, retryAt: NOW + RETRY_DELAY });
    expect(await w.record()).toMatchObject({ state: 'failed', errorCode: 'executor_error' });
  });

  it('a task found in publishing (a restart mid-publish) is published again without running the turn', async () => {
    const w = await world({ publish: { ok: true }, startEvents: [{ type: 'CLAIM', leaseId: LEASE.leaseId }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED', publish: true }] as TaskEvent[] });
    expect((await w.record()).state).toBe('publishing');
    await w.run();
    expect(w.calls.runTurn).toEqual([]);
    expect(w.calls.publish).toHaveLength(1);
    // Then verification, as after any publish (this world has no turn record, so it fails for that).
    expect(w.types()).toEqual(['PUBLISHED', 'REPLY_FAILED']);
  });

  it('a task found in publishing after change delivery was switched off: PUBLISHED, nothing to publish', async () => {
    const w = await world({ startEvents: [{ type: 'CLAIM', leaseId: LEASE.leaseId }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED', publish: true }] as TaskEvent[] });
    expect((await w.record()).state).toBe('publishing');
    await w.run();
    expect(w.calls.runTurn).toEqual([]);
    expect(w.types()[0]).toBe('PUBLISHED');
  });
});

describe('executor: a repository renamed or transferred on Gitea', () => {
  it('the new owner/name is used for the workspace, remembered on the repository and audited once', async () => {
    const w = await world({ currentRepository: async () => ({ owner: 'acme-org', name: 'gadget' }) });
    await w.run();
    expect(w.calls.prepareCurrent).toEqual([{ owner: 'acme-org', name: 'gadget' }]);
    const repo = (await w.store.get<RepositoryRecord>('repositories', REPO_KEY))!;
    expect(repo.currentFullName).toBe('acme-org/gadget');
    // The record keeps its key and name: only where it lives on Gitea moves.
    expect(repo).toMatchObject({ repoKey: REPO_KEY, owner: 'acme', name: 'widget' });
    const moved = (await w.store.audit({})).filter((e) => e.action === 'repository.moved');
    expect(moved).toHaveLength(1);
    expect(moved[0]).toMatchObject({ actor: 'service:executor', metadata: { repoKey: REPO_KEY, from: 'acme/widget', to: 'acme-org/gadget' } });
    expect((await w.record()).state).toBe('succeeded');
  });

  it('a repository already known under its current name is not moved again', async () => {
    const w = await world({ currentRepository: async () => ({ owner: 'acme', name: 'widget' }) });
    await w.run();
    expect(w.calls.prepareCurrent).toEqual([{ owner: 'acme', name: 'widget' }]);
    expect((await w.store.get<RepositoryRecord>('repositories', REPO_KEY))!.currentFullName).toBeUndefined();
    expect((await w.store.audit({})).filter((e) => e.action === 'repository.moved')).toEqual([]);
  });

  it("Gitea naming it in another letter case is the same place: Gitea's form is used, no move recorded", async () => {
    const w = await world({ currentRepository: async () => ({ owner: 'Acme', name: 'Widget' }) });
    await w.run();
    expect(w.calls.prepareCurrent).toEqual([{ owner: 'Acme', name: 'Widget' }]);
    expect((await w.store.get<RepositoryRecord>('repositories', REPO_KEY))!.currentFullName).toBeUndefined();
    expect((await w.store.audit({})).filter((e) => e.action === 'repository.moved')).toEqual([]);
  });

  it('Gitea not knowing it (null) or not answering: the stored owner/name are used, nothing recorded', async () => {
    for (const currentRepository of [async () => null, async () => Promise.reject(new Error('ECONNREFUSED'))]) {
      const w = await world({ currentRepository });
      await w.run();
      expect(w.calls.prepareCurrent).toEqual([undefined]);
      expect((await w.store.get<RepositoryRecord>('repositories', REPO_KEY))!.currentFullName).toBeUndefined();
      expect((await w.store.audit({})).filter((e) => e.action === 'repository.moved')).toEqual([]);
      expect((await w.record()).state).toBe('succeeded');
      await cleanups.pop()!();
    }
  });
});

describe('executor: a failed workspace step is visible on the task (last git error)', () => {
  it('the redacted message is kept on the task, whitespace collapsed and bounded, and audited', async () => {
    const message = `  fatal: could not read\n\tfrom remote   ${'x'.repeat(600)}  `;
    const w = await world({ workspace: { ok: false, code: 'git_failed', retryable: true, message } });
    await w.run();
    const summary = `fatal: could not read from remote ${'x'.repeat(600)}`.slice(0, 500);
    expect((await w.record()).lastGitError).toEqual({ code: 'git_failed', message: summary, at: new Date(NOW).toISOString() });
    const failed = (await w.store.audit({})).filter((e) => e.action === 'workspace.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ actor: 'service:executor', taskId: 'task-1', errorCode: 'git_failed', metadata: { message: summary } });
  });
});

// After a restart a task is restored from its stored snapshot, which holds its state's effect as an
// invoked child: restoring it starts that work again, once. A snapshot stored before its state invoked
// anything (no child) gets one on restore (runtime/machine-facts.ts withStateInvokes), or it would never move.
describe('executor: a task restored in a state with work in flight runs that work once', () => {
  type World = Awaited<ReturnType<typeof world>>;
  const cases: Array<{ state: keyof typeof TASK_EFFECTS; startEvents: TaskEvent[]; script?: Partial<Script>; runs: (w: World) => number }> = [
    { state: 'preparing', startEvents: [{ type: 'CLAIM', leaseId: LEASE.leaseId }], runs: (w) => w.calls.prepare },
    { state: 'running', startEvents: RUNNING, runs: (w) => w.calls.runTurn.length },
    { state: 'publishing', startEvents: [...RUNNING, { type: 'TURN_REPLIED', publish: true }], script: { publish: { ok: true } }, runs: (w) => w.calls.publish.length },
    { state: 'verifying_reply', startEvents: [...RUNNING, { type: 'TURN_REPLIED' }], script: { seed: [priorTurn({ status: 'completed' })] }, runs: (w) => w.calls.verify },
    { state: 'aborting', startEvents: [{ type: 'CLAIM', leaseId: LEASE.leaseId }, { type: 'ABORT', by: 'admin:alice' }], runs: (w) => w.calls.interrupt },
  ];
  it.each(cases.flatMap((c) => [{ ...c, stored: 'with its effect' }, { ...c, stored: 'written without it' }]))('$state, stored $stored → its effect runs once', async (c) => {
    const w = await world({ startEvents: c.startEvents, ...c.script });
    const actorId = taskActorId('task-1');
    const rec = (await w.store.get<{ state: string; snapshot: { children?: Record<string, { src: string }> } }>('actors', actorId))!;
    expect(rec.state).toBe(c.state);
    expect(rec.snapshot.children?.[TASK_EFFECTS[c.state]]?.src).toBe(TASK_EFFECTS[c.state]);
    if (c.stored === 'written without it') await w.store.transact((tx) => tx.put('actors', actorId, { ...rec, snapshot: { ...rec.snapshot, children: {} } }));
    await w.run();
    expect(c.runs(w)).toBe(1);
  }, 10_000);
});
