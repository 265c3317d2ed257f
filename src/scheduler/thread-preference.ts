import type { SessionRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';
import type { ClaimCandidate } from './pick-claims.js';

/**
 * Several nodes: a new task of a conversation whose Codex thread lives in another node's CODEX_HOME is
 * left to that node for a moment (a soft preference): there the thread resumes with everything the agent
 * did before, elsewhere a new thread starts from the conversation read back from Gitea. The window is
 * counted from when this node first saw the task claimable, on its own monotonic clock, so a node whose
 * wall clock is wrong waits no longer; after it any node takes the task (the thread's node may be busy,
 * stopped or gone).
 */
export const THREAD_PREFERENCE_MS = 5_000;

export interface ThreadPreference {
  /** Repositories whose head this node leaves alone for now, and when to look again (null: none). */
  deferred(heads: readonly ClaimCandidate[], sessionKeyOf: (taskId: string) => string | undefined): Promise<{ repos: Set<string>; until: number | null }>;
}

export function threadPreference(input: { store: Pick<Store, 'get'>; nodeId: string; windowMs?: number; now?: () => number }): ThreadPreference {
  const windowMs = input.windowMs ?? THREAD_PREFERENCE_MS;
  const now = input.now ?? (() => performance.now());
  /** When this node first saw each task it deferred: the window's start. */
  const firstSeen = new Map<string, number>();
  return {
    async deferred(heads, sessionKeyOf) {
      const repos = new Set<string>();
      let until: number | null = null;
      const seen = new Set<string>();
      const at = now();
      for (const head of heads) {
        // Only new work moves: a retry or a resumed verification goes on wherever its lease is taken.
        if (head.event !== 'CLAIM') continue;
        const sessionKey = sessionKeyOf(head.taskId);
        if (sessionKey === undefined) continue;
        const threadNode = (await input.store.get<SessionRecord>('sessions', sessionKey))?.threadNode;
        if (threadNode === undefined || threadNode === input.nodeId) continue;
        const since = firstSeen.get(head.taskId) ?? at;
        seen.add(head.taskId);
        firstSeen.set(head.taskId, since);
        if (at - since >= windowMs) continue;
        repos.add(head.repoKey);
        until = until === null ? since + windowMs : Math.min(until, since + windowMs);
      }
      for (const taskId of firstSeen.keys()) if (!seen.has(taskId)) firstSeen.delete(taskId);
      return { repos, until: until === null ? null : until - at };
    },
  };
}
