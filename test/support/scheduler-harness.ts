// Shared pieces for the scheduler tests: intake-like task submission, a hand-driven clock, a
// scripted executor, and readers that reconstruct lease-holding intervals from the audit log.
import type { EventObject } from 'xstate';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import { GLOBAL_CONTROL_KEY, type ControlRecord, type TaskRecord } from '../../src/domain/records.js';
import { repoLockKind } from '../../src/leases/repo-lock-actor.js';
import { initialTaskMirror } from '../../src/intake/intake-records.js';
import type { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import type { HeldLease, SchedulerClock, TaskExecutor } from '../../src/scheduler/types.js';
import type { AuditEvent, Store } from '../../src/store/types.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import { createTestRuntime } from './test-runtime.js';

export const schedulerKinds = () => [taskKind(), repoLockKind()];

/** `clock`: the store judges leases by it too (the database's clock, moved by hand with the scheduler's). */
export function createSchedulerRuntime(dir?: string, clock?: Pick<SchedulerClock, 'now'>) {
  return createTestRuntime(schedulerKinds(), dir, clock ? { clockMs: () => clock.now() } : {});
}

export const ev = (event: TaskEvent): EventObject => event;

/**
 * What intake does: insert the task record (stateVersion 0, `queueSeq` = the store's audit
 * sequence, so arrival order is the store's order) and create its actor with ACCEPT, in one tx.
 */
export async function submitTask(store: Store, runtime: ActorRuntime, taskId: string, repoKey: string, fields: Partial<TaskRecord> = {}): Promise<number> {
  const created = await store.transact(async (tx) => {
    const { seq } = await tx.appendAudit({ action: 'task.submitted', actor: 'test', taskId, metadata: { repoKey } });
    const now = new Date().toISOString();
    const [owner, repo] = repoKey.replace(/^default:/, '').split('/');
    const record: TaskRecord = {
      taskId,
      deliveryKey: `default:${taskId}`,
      deliveryId: taskId,
      repoKey,
      resourceKey: `${repoKey}:issue:1`,
      sessionKey: `${repoKey}:issue:1`,
      resource: { kind: 'issue', number: 1 },
      owner: owner ?? 'o',
      repo: repo ?? 'r',
      commentId: seq,
      commentUrl: `http://127.0.0.1/${repoKey}`,
      author: 'alice',
      instruction: 'do it',
      refs: null,
      ...initialTaskMirror(),
      queueSeq: seq,
      createdAt: now,
      updatedAt: now,
      stateVersion: 0,
      ...fields,
    };
    await tx.insert('tasks', taskId, record);
    const actor = await runtime.createInTx(tx, 'task', taskActorId(taskId), { taskId }, { events: [{ type: 'ACCEPT' }], taskId, by: 'test' });
    return { actor, seq };
  });
  created.actor.start();
  return created.seq;
}

export async function setPaused(store: Store, paused: boolean): Promise<void> {
  await store.transact(async (tx) => {
    const prev = await tx.get<ControlRecord>('control', GLOBAL_CONTROL_KEY);
    const next: ControlRecord = {
      globalPaused: paused,
      pauseReason: paused ? 'test' : null,
      updatedBy: 'admin:test',
      updatedAt: new Date().toISOString(),
      version: (prev?.version ?? 0) + 1,
    };
    await tx.put('control', GLOBAL_CONTROL_KEY, next);
  });
}

/** A clock moved by hand: timers fire inside `advance`, in deadline order. */
export class FakeClock implements SchedulerClock {
  private t: number;
  private timers: Array<{ at: number; fn: () => void; id: number }> = [];
  private nextId = 0;
  constructor(start = 1_800_000_000_000) {
    this.t = start;
  }
  now = (): number => this.t;
  setTimer = (fn: () => void, ms: number): (() => void) => {
    const id = this.nextId++;
    this.timers.push({ at: this.t + Math.max(0, ms), fn, id });
    return () => {
      this.timers = this.timers.filter((x) => x.id !== id);
    };
  };
  advance(ms: number): void {
    const target = this.t + ms;
    for (;;) {
      const due = this.timers.filter((x) => x.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.timers = this.timers.filter((x) => x.id !== due.id);
      this.t = Math.max(this.t, due.at);
      due.fn();
    }
    this.t = target;
  }
}

export interface ExecutorCall {
  taskId: string;
  lease: HeldLease;
  signal: AbortSignal;
  /** Sends a task event; throws when the runtime rejects it. */
  send: (event: TaskEvent) => Promise<void>;
  /** How many times this task was run before (0 on the first run). */
  run: number;
  /** The task's current state. */
  state: () => Promise<string | undefined>;
}

/** An executor whose behaviour per call is a script; records every call. */
export function scriptedExecutor(runtime: ActorRuntime, script: (call: ExecutorCall) => Promise<void>) {
  const calls: ExecutorCall[] = [];
  const runs = new Map<string, number>();
  const executor: TaskExecutor = {
    async run(taskId, lease, signal) {
      const n = runs.get(taskId) ?? 0;
      runs.set(taskId, n + 1);
      const call: ExecutorCall = {
        taskId,
        lease,
        signal,
        run: n,
        state: async () => (await runtime.stateOf(taskActorId(taskId)))?.state,
        send: async (event) => {
          const res = await runtime.send(taskActorId(taskId), event, { by: 'executor' });
          if (!res.ok) throw new Error(`${event.type} rejected for ${taskId} in ${String(res.state)}`);
        },
      };
      calls.push(call);
      await script(call);
    },
  };
  return { executor, calls };
}

/** Walks a claimed task to `succeeded`, with small random awaits between steps. */
export async function walkToSuccess(call: ExecutorCall, jitterMs = 3): Promise<void> {
  const pause = () => new Promise((r) => setTimeout(r, Math.floor(Math.random() * jitterMs)));
  await pause();
  // A verification resumed after a restart only has its last step left.
  if ((await call.state()) !== 'verifying_reply') {
    await call.send({ type: 'WORKSPACE_READY' });
    await pause();
    await call.send({ type: 'TURN_REPLIED' });
  }
  await pause();
  await call.send({ type: 'REPLY_CONFIRMED' });
}

export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves when the task reaches one of `states` (checked now and on every transition). */
export function waitForTaskState(store: Store, runtime: ActorRuntime, taskId: string, states: string[], timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      off();
      settle();
    };
    const check = () =>
      store.get<TaskRecord>('tasks', taskId).then(
        (task) => {
          const s = task?.state;
          if (s && states.includes(s)) finish(() => resolve(s));
        },
        (error: unknown) => finish(() => reject(error)),
      );
    const timer = setTimeout(() => {
      void store.get<TaskRecord>('tasks', taskId).then(
        (task) => finish(() => reject(new Error(`task ${taskId} did not reach ${states.join('|')} (is ${String(task?.state)})`))),
        (error: unknown) => finish(() => reject(error)),
      );
    }, timeoutMs);
    // Listening before the first read: a transition committed while it is under way is read again.
    const off = runtime.onTransition(() => void check());
    void check();
  });
}

export const HOLDING = new Set(['preparing', 'running', 'verifying_reply', 'aborting']);

export interface HoldInterval {
  taskId: string;
  repoKey: string;
  /** Audit seq of the transition into preparing (CLAIM or RETRY_DUE). */
  enter: number;
  /** Audit seq of the transition out of the lease-holding states (Infinity if still inside). */
  leave: number;
  leaseId: string;
}

/** Lease-holding intervals of every task, rebuilt from `task.transition` audit events alone. */
export function holdIntervals(audit: AuditEvent[], repoOf: (taskId: string) => string): HoldInterval[] {
  const out: HoldInterval[] = [];
  const open = new Map<string, HoldInterval>();
  for (const e of audit) {
    if (e.action !== 'task.transition' || !e.taskId) continue;
    const from = e.fromState ?? '';
    const to = e.toState ?? '';
    if (!HOLDING.has(from) && HOLDING.has(to)) {
      const event = (e.metadata?.['event'] ?? {}) as { leaseId?: string };
      const interval = { taskId: e.taskId, repoKey: repoOf(e.taskId), enter: e.seq, leave: Infinity, leaseId: event.leaseId ?? '' };
      open.set(e.taskId, interval);
      out.push(interval);
    } else if (HOLDING.has(from) && !HOLDING.has(to)) {
      const interval = open.get(e.taskId);
      if (interval) interval.leave = e.seq;
      open.delete(e.taskId);
    }
  }
  return out;
}

/** Lease intervals per lock (ACQUIRE → RELEASE/EXPIRE), from `lock.transition` audit events. */
export function leaseIntervals(audit: AuditEvent[]): Array<{ repoKey: string; leaseId: string; start: number; end: number }> {
  const out: Array<{ repoKey: string; leaseId: string; start: number; end: number }> = [];
  const open = new Map<string, { repoKey: string; leaseId: string; start: number; end: number }>();
  for (const e of audit) {
    if (e.action !== 'lock.transition' || !e.actorId) continue;
    const repoKey = e.actorId.slice('lock:'.length);
    const event = (e.metadata?.['event'] ?? {}) as { type?: string; leaseId?: string };
    if (event.type === 'ACQUIRE') {
      const prev = open.get(repoKey);
      if (prev) prev.end = e.seq; // takeover
      const lease = { repoKey, leaseId: event.leaseId ?? '', start: e.seq, end: Infinity };
      open.set(repoKey, lease);
      out.push(lease);
    } else if (event.type === 'RELEASE' || event.type === 'EXPIRE') {
      const prev = open.get(repoKey);
      if (prev) prev.end = e.seq;
      open.delete(repoKey);
    }
  }
  return out;
}

/** Polls `fn` until it returns true (a guard against hanging, not a timing assertion). */
export async function waitUntil(fn: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Audit events whose `event` metadata has this type (task or lock transitions, rejections). */
export function auditWithEvent(audit: AuditEvent[], action: string, type: string): AuditEvent[] {
  return audit.filter((e) => e.action === action && (e.metadata?.['event'] as { type?: string } | undefined)?.type === type);
}
