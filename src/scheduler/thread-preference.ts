import type { ClaimCandidate } from './pick-claims.js';

/**
 * Several nodes: a new task of a conversation whose Codex thread lives in another node's CODEX_HOME is
 * left to that node for a moment (a soft preference): there the thread resumes with everything the agent
 * did before, elsewhere a new thread starts from the conversation read back from Gitea. The window starts
 * at the first scan of this node that could have claimed the task (a free slot, no pause, the task its
 * repository's head), on this node's monotonic clock, so a node whose wall clock is wrong waits no longer;
 * after it any node takes the task (the thread's node may be busy, stopped or gone).
 */
export const THREAD_PREFERENCE_MS = 5_000;

export interface ThreadPreference {
  /**
   * Which heads this node leaves alone now (by repository), and in how many ms to look again (null:
   * none left). `threadNodeOf`: the node holding each head's thread, as read from its session.
   */
  defer(heads: readonly ClaimCandidate[], threadNodeOf: ReadonlyMap<string, string | undefined>): { repos: Set<string>; waitMs: number | null };
}

export function threadPreference(input: { nodeId: string; windowMs?: number; now?: () => number }): ThreadPreference & { nodeId: string } {
  const windowMs = input.windowMs ?? THREAD_PREFERENCE_MS;
  const now = input.now ?? (() => performance.now());
  /** When this node first could have claimed each task it defers: the window's start. */
  const firstSeen = new Map<string, number>();
  return {
    nodeId: input.nodeId,
    defer(heads, threadNodeOf) {
      const at = now();
      const repos = new Set<string>();
      let due: number | null = null;
      const seen = new Set<string>();
      for (const head of heads) {
        const threadNode = threadNodeOf.get(head.taskId);
        if (head.event !== 'CLAIM' || threadNode === undefined || threadNode === input.nodeId) continue;
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
