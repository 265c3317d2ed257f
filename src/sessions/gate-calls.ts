// What the agent did through Gitea, made durable: the gate (src/mcp-gate/) writes one line per
// tools/call to its thread's calls file; this turns the lines into audit events and metrics, after
// each turn and, for what a crash left behind, at start-up. The file is moved aside first, so the
// gate's next line starts a new file and nothing is read twice; a crash after the audit commit and
// before the unlink audits those lines again on the next pass (counted twice, never lost).
//
// Bounded like the security events: at most MAX_EVENTS_PER_PASS events per pass, then one event
// counting what was left out by outcome (an agent that loops on refused calls cannot flood the log).
import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { RepositoryRecord } from '../domain/records.js';
import { GATE_DIR_NAME, parseGateCalls, type GateCallLine } from '../mcp-gate/gate-files.js';
import { EXTRA_GROUPS, type ExtraGroup } from '../mcp-gate/gate-policy.js';
import type { Store } from '../store/types.js';

export const MAX_EVENTS_PER_PASS = 200;

export interface GateCallSink {
  /** One count per call, by tool and outcome (`/metrics`). */
  onCall?: (line: GateCallLine) => void;
}

/** The groups an operator allowed the agent on this repository (POST /repos/:repoKey/agent-tools). */
export async function agentToolGroupsOf(store: Pick<Store, 'get'>, repoKey: string): Promise<ExtraGroup[]> {
  const groups = (await store.get<RepositoryRecord>('repositories', repoKey))?.agentToolGroups;
  return Array.isArray(groups) ? groups.filter((g): g is ExtraGroup => (EXTRA_GROUPS as readonly unknown[]).includes(g)) : [];
}

function auditInput(line: GateCallLine) {
  const refused = line.outcome === 'refused';
  return {
    action: refused ? 'agent.gitea_refused' : 'agent.gitea_call',
    actor: 'agent:gitea-mcp',
    taskId: line.taskId,
    level: refused ? ('security' as const) : ('info' as const),
    ...(line.place.commentId !== undefined ? { commentId: line.place.commentId } : line.createdCommentId !== undefined ? { commentId: line.createdCommentId } : {}),
    metadata: {
      tool: line.tool,
      method: line.method,
      ...line.place,
      outcome: line.outcome,
      ...(line.reason !== undefined ? { reason: line.reason } : {}),
      ...(line.createdCommentId !== undefined ? { createdCommentId: line.createdCommentId } : {}),
      ...(line.durationMs !== undefined ? { durationMs: line.durationMs } : {}),
      at: line.at,
    },
  };
}

/** Ingests one thread folder's calls; resolves with the number of calls read. */
export async function ingestGateCalls(store: Store, dir: string, sink: GateCallSink = {}): Promise<number> {
  const live = join(dir, 'calls.jsonl');
  const aside = join(dir, 'calls.ingesting.jsonl');
  // An aside file left by a crash is read first; only then is the live file moved onto it.
  if (!existsSync(aside)) {
    try {
      renameSync(live, aside);
    } catch {
      return 0; // no calls since the last pass
    }
  }
  const lines = parseGateCalls(readFileSync(aside, 'utf8'));
  if (lines.length > 0) {
    await store.transact(async (tx) => {
      const left: Record<string, number> = {};
      for (const [i, line] of lines.entries()) {
        if (i < MAX_EVENTS_PER_PASS) await tx.appendAudit(auditInput(line));
        else left[line.outcome] = (left[line.outcome] ?? 0) + 1;
      }
      if (lines.length > MAX_EVENTS_PER_PASS) {
        await tx.appendAudit({ action: 'agent.gitea_calls_left_out', actor: 'system:session_manager', taskId: lines.at(-1)!.taskId, level: 'alert', metadata: { leftOut: left, kept: MAX_EVENTS_PER_PASS } });
      }
    });
    for (const line of lines) sink.onCall?.(line);
  }
  rmSync(aside, { force: true });
  return lines.length;
}

/** At start-up: every thread folder's leftovers (a crash mid-turn). */
export async function ingestAllGateCalls(store: Store, dataDir: string, sink: GateCallSink = {}): Promise<number> {
  const root = join(dataDir, GATE_DIR_NAME);
  let n = 0;
  let dirs: string[] = [];
  try {
    dirs = readdirSync(root);
  } catch {
    return 0;
  }
  for (const d of dirs) n += await ingestGateCalls(store, join(root, d), sink);
  return n;
}
