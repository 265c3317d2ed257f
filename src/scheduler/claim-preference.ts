import type { ClaimCandidate } from './pick-claims.js';

/**
 * Several nodes: a new task is left for a moment to the node it suits best (a soft preference), then any
 * node takes it (that node may be busy, stopped or gone):
 * - a task of a conversation whose Codex thread lives in another node's CODEX_HOME, to that node, for
 *   THREAD_PREFERENCE_MS: there the thread resumes with everything the agent did before, elsewhere a new
 *   thread starts from the conversation read back from Gitea;
 * - any other task, to the node whose intake accepted it, for ACCEPTED_PREFERENCE_MS: that node claims it
 *   at once unless it has no free slot, so which node runs a mention follows where the load balancer sent
 *   it, and an idle node steps in only for a node that is full.
 * The window starts at this node's first scan that could have claimed the task (a free slot, no pause, the
 * task its repository's head), on this node's monotonic clock, so a node whose wall clock is wrong waits
 * no longer.
 */
export const THREAD_PREFERENCE_MS = 5_000;
export const ACCEPTED_PREFERENCE_MS = 2_000;

/** Where a head's task would rather run: the node holding its thread, else the node that accepted it. */
export interface PreferredNodes {
  threadNode?: string | undefined;
  acceptedBy?: string | undefined;
}

export interface ClaimPreference {
  nodeId: string;
  /** Which heads this node leaves alone now (by repository), and in how many ms to look again (null: none left). */
  defer(heads: readonly ClaimCandidate[], preferredOf: ReadonlyMap<string, PreferredNodes>): { repos: Set<string>; waitMs: number | null };
}

export function claimPreference(input: { nodeId: string; now?: () => number; threadWindowMs?: number; acceptedWindowMs?: number }): ClaimPreference {
  const now = input.now ?? (() => performance.now());
  const threadWindowMs = input.threadWindowMs ?? THREAD_PREFERENCE_MS;
  const acceptedWindowMs = input.acceptedWindowMs ?? ACCEPTED_PREFERENCE_MS;
  /** When this node first could have claimed each task it defers: the window's start. */
  const firstSeen = new Map<string, number>();
  /** The node a head's task waits for, and how long; null: none but this one. */
  const waitingFor = (p: PreferredNodes | undefined): number | null => {
    if (p?.threadNode !== undefined) return p.threadNode === input.nodeId ? null : threadWindowMs;
    if (p?.acceptedBy !== undefined) return p.acceptedBy === input.nodeId ? null : acceptedWindowMs;
    return null;
  };
  return {
    nodeId: input.nodeId,
    defer(heads, preferredOf) {
      const at = now();
      const repos = new Set<string>();
      let due: number | null = null;
      const seen = new Set<string>();
      for (const head of heads) {
        const windowMs = head.event === 'CLAIM' ? waitingFor(preferredOf.get(head.taskId)) : null;
        if (windowMs === null) continue;
        const since = firstSeen.get(head.taskId) ?? at;
        firstSeen.set(head.taskId, since);
        seen.add(head.taskId);
        if (at - since >= windowMs) continue;
        repos.add(head.repoKey);
        due = Math.min(due ?? Infinity, since + windowMs);
      }
      for (const taskId of firstSeen.keys()) if (!seen.has(taskId)) firstSeen.delete(taskId);
      return { repos, waitMs: due === null ? null : due - at };
    },
  };
}
