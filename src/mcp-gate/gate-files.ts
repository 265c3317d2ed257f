// The files the gate and the service share, one folder per thread under `<dataDir>/mcp-gate/`
// (the data directory is denied to the agent's commands, src/isolation/agent-sandbox.ts, and the
// gate runs outside the sandbox):
//
//   task.json          written by the service before each turn: which task runs now, and the extra
//                      groups an operator allowed for the repository. Read by the gate at every call,
//                      so one gate process serves the thread's successive tasks.
//   calls.jsonl        appended by the gate, one line per tools/call (forwarded, failed or refused);
//                      the service moves it aside and turns it into audit events and metrics.
//   own-comments.jsonl appended by the gate: the comments it created, by task, so `edit_comment`
//                      stays limited to them across a restart of the gate.
import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXTRA_GROUPS, type CallPlace, type ExtraGroup } from './gate-policy.js';

export const GATE_DIR_NAME = 'mcp-gate';

/** The thread's folder: a hash of the session key (it holds `/` and `#`). */
export function gateStateDir(dataDir: string, sessionKey: string): string {
  return join(dataDir, GATE_DIR_NAME, createHash('sha256').update(sessionKey).digest('hex').slice(0, 24));
}

export interface GateTaskFile {
  taskId: string | null;
  extra: ExtraGroup[];
  /**
   * Until when (ms since 1970, this host's clock) the node running the task may still write for it:
   * a heartbeat before its lease's expiry on the database's clock, moved on at each renewal. Absent:
   * no limit (one node: nobody else can take the task over).
   */
  writesUntil?: number;
}

export interface GateCallLine {
  at: string;
  taskId: string | null;
  tool: string;
  method: string | null;
  place: CallPlace;
  /**
   * `started` is written before a call is forwarded (no write reaches Gitea unrecorded); the outcome
   * line with the same `callId` follows. A `started` line without one is a call whose end nobody saw.
   */
  outcome: 'started' | 'forwarded' | 'failed' | 'refused';
  callId?: string;
  reason?: string;
  /** The comment an `add_comment` created. */
  createdCommentId?: number;
  durationMs?: number;
}

export function writeGateTask(dir: string, task: GateTaskFile): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `task.json.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(task)}\n`, { mode: 0o600 });
  renameSync(tmp, join(dir, 'task.json'));
}

export function readGateTask(dir: string): GateTaskFile {
  try {
    const raw = JSON.parse(readFileSync(join(dir, 'task.json'), 'utf8')) as Partial<GateTaskFile>;
    const extra = Array.isArray(raw.extra) ? raw.extra.filter((g): g is ExtraGroup => (EXTRA_GROUPS as readonly string[]).includes(g as string)) : [];
    return { taskId: typeof raw.taskId === 'string' ? raw.taskId : null, extra, ...(typeof raw.writesUntil === 'number' ? { writesUntil: raw.writesUntil } : {}) };
  } catch {
    return { taskId: null, extra: [] };
  }
}

export function appendGateCall(dir: string, line: GateCallLine): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // One open-append-close per line: the service may have renamed the file since the last line.
  appendFileSync(join(dir, 'calls.jsonl'), `${JSON.stringify(line)}\n`, { mode: 0o600 });
}

export function appendOwnComment(dir: string, taskId: string, commentId: number): void {
  appendFileSync(join(dir, 'own-comments.jsonl'), `${JSON.stringify({ taskId, commentId })}\n`, { mode: 0o600 });
}

export function readOwnComments(dir: string, taskId: string | null): Set<number> {
  const out = new Set<number>();
  if (taskId === null) return out;
  let text = '';
  try {
    text = readFileSync(join(dir, 'own-comments.jsonl'), 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n')) {
    try {
      const r = JSON.parse(line) as { taskId?: unknown; commentId?: unknown };
      if (r.taskId === taskId && typeof r.commentId === 'number') out.add(r.commentId);
    } catch {
      // a torn last line
    }
  }
  return out;
}

/**
 * Parses the lines of a calls file moved aside by the service; a torn line is skipped. A `started`
 * line is dropped when its outcome line is there, and otherwise becomes a `failed` call "ended
 * unseen" (the gate died or was closed while Gitea was asked: the write may have happened).
 */
export function parseGateCalls(text: string): GateCallLine[] {
  const out: GateCallLine[] = [];
  const started = new Map<string, GateCallLine>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const r = JSON.parse(line) as GateCallLine;
      if (typeof r.tool !== 'string') continue;
      if (r.outcome === 'started') {
        if (typeof r.callId === 'string') started.set(r.callId, r);
      } else if (r.outcome === 'forwarded' || r.outcome === 'failed' || r.outcome === 'refused') {
        if (typeof r.callId === 'string') started.delete(r.callId);
        out.push(r);
      }
    } catch {
      // torn by a crash mid-write
    }
  }
  for (const r of started.values()) out.push({ ...r, outcome: 'failed', reason: 'the call ended unseen (the gate stopped while Gitea was asked); it may have taken effect' });
  return out;
}
