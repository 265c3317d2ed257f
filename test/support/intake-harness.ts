// The real intake over real HTTP: a durable store, the actor runtime with the task kind, the Koa app
// from createApp, bound to 127.0.0.1 on an ephemeral port. Requests go out as raw node:http calls so
// tests control every header and byte.
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../../src/http/create-app.js';
import { createIntake, type Intake, type IntakeOptions } from '../../src/intake/intake.js';
import { createWebhookRouter } from '../../src/intake/webhook-route.js';
import { DEFAULT_HTTP_LIMITS, listen, type HttpLimits } from '../../src/service/listen.js';
import type { RepoPermission } from '../../src/webhook/authorize-actor.js';
import { COLLECTIONS, type CollectionName, type Store } from '../../src/store/types.js';
import { createStore, type SqliteStoreOptions } from '../../src/store/index.js';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import { taskKind } from '../../src/tasks/task-actor.js';
import { FIXTURE_SECRET } from './webhook-fixtures.js';
import { createCommentRegistry, learningIntake, type CommentRegistry } from './comment-registry.js';

export const BOT_LOGIN = 'ccweb-bot';

export interface HarnessOptions {
  secrets?: string[];
  allowUsers?: string[];
  denyUsers?: string[];
  fetchPermission?: (owner: string, repo: string, login: string) => Promise<RepoPermission>;
  maxBytes?: number;
  /**
   * Whether the harness's Gitea holds each comment a test posts (default true: comment-registry.ts).
   * false: only what a test `put`s in `comments` exists — a forged payload finds nothing.
   */
  learnComments?: boolean;
  /** Extra store options (e.g. `beforeCommit` to make a commit fail). */
  store?: Partial<SqliteStoreOptions>;
  intake?: Partial<IntakeOptions>;
  /** The store as the intake sees it (a test placing another node's write at a chosen moment). */
  intakeStore?: (store: Store) => Store;
  /** The HTTP server's limits (the service's `listen`); unset → the production defaults. */
  http?: Partial<HttpLimits>;
}

export interface PostResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: any;
}

export interface IntakeHarness {
  dir: string;
  store: Store;
  runtime: ActorRuntime;
  workspaceRoot: string;
  url: string;
  permissionCalls: Array<[string, string, string]>;
  /** The harness's Gitea comments (intake confirms each acting comment with them). */
  comments: CommentRegistry;
  /** The intake itself (e.g. `retryDue()` for comments waiting for Gitea). */
  intake: Intake;
  accepted: string[];
  stops: string[][];
  post(body: Buffer, headers: Record<string, string>, options?: { path?: string; method?: string; chunked?: boolean }): Promise<PostResult>;
  /** Records per collection (every collection, zeros included). */
  counts(): Promise<Record<CollectionName, number>>;
  /** Audit actions in order. */
  auditActions(): Promise<string[]>;
  close(remove?: boolean): Promise<void>;
}

export async function startIntakeHarness(options: HarnessOptions = {}): Promise<IntakeHarness> {
  const dir = mkdtempSync(join(tmpdir(), 'ccweb-intake-'));
  const store = createStore({ dir: join(dir, 'store'), indexes: STORE_INDEXES, ...options.store });
  await store.open();
  const runtime = new ActorRuntime({ store, kinds: [taskKind()] });
  const workspaceRoot = join(dir, 'workspaces');
  const permissionCalls: Array<[string, string, string]> = [];
  const accepted: string[] = [];
  const stops: string[][] = [];
  // Gitea's collaborator-permission API (a double: intake always confirms write access with it):
  // `write` for everyone unless a test says otherwise.
  const fetchPermission = options.fetchPermission ?? (async (): Promise<RepoPermission> => 'write');
  const comments = createCommentRegistry();
  const intake = createIntake({
    commentOnGitea: (owner, repo, id) => comments.lookup(owner, repo, id),
    store: options.intakeStore ? options.intakeStore(store) : store,
    runtime,
    botLogin: BOT_LOGIN,
    secrets: options.secrets ?? [FIXTURE_SECRET],
    allowUsers: options.allowUsers,
    denyUsers: options.denyUsers,
    fetchPermission: (owner, repo, login) => {
      permissionCalls.push([owner, repo, login]);
      return fetchPermission(owner, repo, login);
    },
    workspaceRoot,
    onAccepted: (taskId) => accepted.push(taskId),
    onStop: (taskIds) => stops.push(taskIds),
    ...options.intake,
  });
  const http = { ...DEFAULT_HTTP_LIMITS, ...options.http };
  const app = createApp({ routers: [createWebhookRouter({ intake: options.learnComments === false ? intake : learningIntake(intake, comments), maxBytes: options.maxBytes, bodyTimeoutMs: http.bodyTimeoutMs })] });
  // The server the service itself listens with (src/service/listen.ts), limits included.
  const server: Server = await listen(app.callback(), '127.0.0.1', 0, http);
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  const post: IntakeHarness['post'] = (body, headers, opts = {}) =>
    new Promise((resolve, reject) => {
      const sendHeaders: Record<string, string> = {};
      for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() !== 'content-length') sendHeaders[k] = v;
      if (!opts.chunked) sendHeaders['Content-Length'] = String(body.length);
      const req = httpRequest(
        { host: '127.0.0.1', port, path: opts.path ?? '/api/gitea/webhook', method: opts.method ?? 'POST', headers: sendHeaders, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: parsed });
          });
          res.on('error', reject);
        },
      );
      // The server may answer (413) and close before the upload ends: that answer is what counts.
      req.on('error', reject);
      if (opts.chunked) {
        const step = 64 * 1024;
        let i = 0;
        const pump = () => {
          while (i < body.length) {
            const ok = req.write(body.subarray(i, i + step));
            i += step;
            if (!ok) {
              req.once('drain', pump);
              return;
            }
          }
          req.end();
        };
        pump();
      } else {
        req.end(body);
      }
    });

  return {
    dir,
    store,
    runtime,
    workspaceRoot,
    url,
    permissionCalls,
    comments,
    intake,
    accepted,
    stops,
    post,
    // Live and archived records alike: intake archives delivery and trigger records as it writes them.
    counts: async () =>
      Object.fromEntries(await Promise.all(COLLECTIONS.map(async (c) => [c, (await store.count(c)) + (await store.archivedCount(c))] as const))) as Record<CollectionName, number>,
    auditActions: async () => (await store.audit()).map((e) => e.action),
    close: async (remove = true) => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await intake.close();
      await runtime.settled().catch(() => undefined);
      runtime.stopAll();
      await store.close();
      if (remove) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Every collection zero except the given counts. */
export function expectedCounts(nonZero: Partial<Record<CollectionName, number>>): Record<CollectionName, number> {
  return Object.fromEntries(COLLECTIONS.map((c) => [c, nonZero[c] ?? 0])) as Record<CollectionName, number>;
}

/** What one accepted task stores, on a repository and resource seen for the first time. */
export const ONE_ACCEPTED_TASK = {
  webhook_deliveries: 1,
  comment_triggers: 1,
  repositories: 1,
  sessions: 1,
  tasks: 1,
  actors: 1,
  comments: 1,
} as const;

/** Audit actions of one accepted task on a new repository. */
export const ACCEPT_AUDIT = ['webhook.accept', 'repository.register', 'task.transition', 'task.transition'];
