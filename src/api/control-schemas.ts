import { z } from 'zod';
import { EXTRA_GROUPS } from '../mcp-gate/gate-policy.js';
import { MAX_PROTECTED_PATHS, normaliseProtectedPath } from '../publish/protected-paths.js';
import { TASK_STATES } from '../../machines/task-lifecycle.js';
import { SECURITY_EVENT_CATEGORIES } from './security-event-queries.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SAFE_ID = /^[A-Za-z0-9._:-]{8,128}$/;
// Control characters (except none) are refused so a reason cannot forge lines in logs or NDJSON.
const NO_CONTROL_CHARS = /^[^\u0000-\u001f\u007f]*$/;

/**
 * Every control POST body. Strict: an unknown key is a 400, so no endpoint can be made to carry a
 * model, MCP, or git parameter. `operator` names who acted (audited as `admin:<operator>`); the
 * admin token, not this field, is what authenticates.
 */
export const ControlBody = z.strictObject({
  requestId: z.string().refine((v) => UUID.test(v) || SAFE_ID.test(v), 'a UUID or 8–128 characters of [A-Za-z0-9._:-]'),
  operator: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a login: letters, digits, ., _, - (max 64)'),
  reason: z
    .string()
    .trim()
    .min(1, 'a reason is required')
    .max(500)
    .regex(NO_CONTROL_CHARS, 'no control characters'),
});
export type ControlBody = z.infer<typeof ControlBody>;

/** POST /repos/:repoKey/agent-tools: the groups the agent may use there beyond reading and answering. */
export const AgentToolsBody = ControlBody.extend({
  groups: z.array(z.enum(EXTRA_GROUPS)).max(EXTRA_GROUPS.length).refine((g) => new Set(g).size === g.length, 'each group once'),
});
export type AgentToolsBody = z.infer<typeof AgentToolsBody>;

/** POST /repos/:repoKey/review-triggers: whether a "request changes" review on the bot's own pull request starts a task without a mention. */
export const ReviewTriggersBody = ControlBody.extend({ requestChanges: z.boolean() });
export type ReviewTriggersBody = z.infer<typeof ReviewTriggersBody>;

/** POST /repos/:repoKey/reader-notices: whether a mention by someone without write access gets the thread's one notice of the day. */
export const ReaderNoticesBody = ControlBody.extend({ enabled: z.boolean() });
export type ReaderNoticesBody = z.infer<typeof ReaderNoticesBody>;

/**
 * POST /repos/:repoKey/publish-paths: whether the publisher may commit CI definitions there
 * (`.gitea/workflows/`, `.github/workflows/`, `.forgejo/workflows/`), and more paths it never commits
 * (a file, or a folder and everything below it; relative, no `..`).
 */
export const PublishPathsBody = ControlBody.extend({
  allowCiChanges: z.boolean(),
  protectedPaths: z
    .array(
      z.string().transform((v, ctx) => {
        const p = normaliseProtectedPath(v);
        if (p === null) {
          ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v.slice(0, 80))} is not a repository path: relative, "/"-separated, no ".." or control characters, at most 300 characters` });
          return z.NEVER;
        }
        return p;
      }),
    )
    .max(MAX_PROTECTED_PATHS, `at most ${MAX_PROTECTED_PATHS} paths`)
    .default([]),
});
export type PublishPathsBody = z.infer<typeof PublishPathsBody>;

const Key = z.string().min(1).max(300);
const IsoTime = z.iso.datetime({ offset: true });

export const TaskListQuery = z.strictObject({
  repoKey: Key.optional(),
  resourceKey: Key.optional(),
  state: z.enum(TASK_STATES).optional(),
  page: z.coerce.number().int().min(1).max(100_000).default(1),
  pageSize: z.coerce.number().int().min(1).max(100).default(25),
});

export const AuditQuery = z.strictObject({
  taskId: Key.optional(),
  deliveryId: Key.optional(),
  actorId: Key.optional(),
  /** Correlation ids beside the indexed three: Codex's turn id, a Gitea comment id, the delivery key (`<instance>:<delivery id>`). */
  turnId: Key.optional(),
  commentId: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  deliveryKey: Key.optional(),
  from: IsoTime.optional(),
  to: IsoTime.optional(),
  afterSeq: z.coerce.number().int().min(0).optional(),
  /** Newest first with `desc` (continue with `beforeSeq`); oldest first (`afterSeq`) by default. */
  beforeSeq: z.coerce.number().int().min(1).optional(),
  order: z.enum(['asc', 'desc']).default('asc'),
  /** `security`: refused agent tool calls, control actions, foreign origins; an event without a level is `info`. */
  level: z.enum(['info', 'alert', 'security']).optional(),
  limit: z.coerce.number().int().min(1).max(5000).default(1000),
  format: z.enum(['json', 'ndjson']).default('json'),
});

export const ActorListQuery = z.strictObject({
  kind: z.string().regex(/^[A-Za-z0-9_-]{1,40}$/).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

/**
 * GET /security-events: aggregated failed authentications (src/intake/security-events.ts) and refused
 * mentions (src/intake/rejected-mentions.ts), newest window first; `category` keeps one of the two.
 */
export const SecurityEventsQuery = z.strictObject({
  from: IsoTime.optional(),
  to: IsoTime.optional(),
  category: z.enum(SECURITY_EVENT_CATEGORIES).optional(),
  kind: z.string().regex(/^[a-z_]{1,40}$/, 'a kind: lower-case letters and _, e.g. invalid_signature, admin_unauthorized').optional(),
  source: z.string().regex(/^[\x21-\x7e]{1,128}$/, 'a source as listed (printable, max 128)').optional(),
  page: z.coerce.number().int().min(1).max(100_000).default(1),
  pageSize: z.coerce.number().int().min(1).max(100).default(50),
});
export type SecurityEventsQuery = z.infer<typeof SecurityEventsQuery>;
