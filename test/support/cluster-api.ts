// What the several-nodes end-to-end tests (test/cluster/) ask a node over its operators' API: any
// node answers, a standby by forwarding to the writer.
import type { PublishEnvironment } from './publish-environment.js';
import { eventually } from './real-gitea/index.js';

export interface TaskDetail {
  task: { taskId: string; state: string; errorCode: string | null };
  audit: Array<{ action: string; toState: string | null; metadata?: Record<string, unknown> }>;
}

export const FINAL_STATES = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'cancelled', 'aborted', 'rejected', 'ignored'];

/** A value `f` finds, or (null/undefined) "not yet" for real-gitea's `eventually`, which retries a throw. */
export const present = <T>(f: () => Promise<T | null | undefined>) => async (): Promise<T> => {
  const v = await f();
  if (v === null || v === undefined) throw new Error('not yet');
  return v;
};

export interface ClusterApi {
  /** GET (or POST with a JSON body) under /api/gitea-workflow on the node at `base`, as the admin. */
  api<T>(base: string, path: string, init?: { method?: string; body?: unknown }): Promise<T>;
  /** The id of the task whose instruction carries `nonce`, once the node at `base` lists it. */
  taskFor(base: string, nonce: string): Promise<string>;
  /** The bot's comments on issue or pull request `index` of the environment's repository. */
  botComments(index: number): Promise<string[]>;
}

export function clusterApi(env: () => PublishEnvironment): ClusterApi {
  async function api<T>(base: string, path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
    const res = await fetch(`${base}/api/gitea-workflow${path}`, {
      method: init.method ?? 'GET',
      headers: { Authorization: `Bearer ${env().adminToken}`, ...(init.body ? { 'content-type': 'application/json' } : {}) },
      ...(init.body ? { body: JSON.stringify(init.body) } : {}),
    });
    if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }
  return {
    api,
    taskFor: (base, nonce) =>
      eventually(`a task for [${nonce}]`, present(async () => {
        const list = await api<{ items: Array<{ taskId: string; instruction: string }> }>(base, '/tasks?pageSize=100');
        return list.items.find((x) => x.instruction.includes(nonce))?.taskId ?? null;
      }), 30_000),
    botComments: async (index) => (await env().gitea.comments(index)).filter((c) => c.user.login === 'ccweb-bot').map((c) => c.body),
  };
}
