// Gitea IssueCommentPayload (modules/structs/hook.go) → spec §6.1's normalised comment. Pure.
//
// Trust: the body is covered by the HMAC, the headers are not. So the resource kind comes from the
// signed `is_pull`, and the unsigned `X-Gitea-Event-Type` header must agree with it.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ReviewContext } from '../domain/review-input.js';
import { getHeader, type WebhookHeaders } from './headers.js';
import { payloadJson } from './payload-json.js';

export const INSTANCE_ID = 'default';

export type CommentEventType = 'issue_comment' | 'pull_request_comment';
export type ResourceKind = 'issue' | 'pull_request';

export interface NormalizedComment {
  instanceId: typeof INSTANCE_ID;
  deliveryId: string;
  /** `default:<X-Gitea-Delivery>` — the delivery dedup key (spec §3). */
  deliveryKey: string;
  eventType: CommentEventType;
  /** `created` | `edited` | `deleted` as Gitea sent it; `classifyComment` decides what to do with it. */
  action: string;
  repo: { id: number; owner: string; name: string; fullName: string; cloneUrl: string; htmlUrl: string; sshUrl: string; defaultBranch: string };
  /** `default:<owner>/<repo>` */
  repoKey: string;
  resource: { kind: ResourceKind; number: number; title: string; htmlUrl: string };
  /** `<repoKey>:<kind>:<number>` (also the sessionKey) */
  resourceKey: string;
  /** `body` is exactly what Gitea sent (untrusted; never trimmed or re-encoded). Times are ISO-8601 UTC. */
  comment: { id: number; body: string; createdAt: string; updatedAt: string; htmlUrl: string };
  /** Gitea users have no `type` field: `isBot` is true only when `login` equals the configured bot login. */
  actor: { login: string; isBot: boolean; id?: number };
  /** The commenter's permissions on the repository, from the signed payload (absent on some versions). */
  permissions?: { admin: boolean; push: boolean; pull: boolean };
  /** Only when the payload has a `pull_request` object (Gitea >= 1.23); otherwise fetch refs from the API. */
  refs?: { base: string; head: string; headSha: string };
  /** Set when this "comment" is a line comment or a review read back from Gitea's review API (src/intake/review-tasks.ts). */
  review?: ReviewContext;
}

export type NormalizeResult =
  | { ok: true; value: NormalizedComment }
  | { ok: false; code: 'invalid_payload'; issues: string };

export interface NormalizeOptions {
  /** When given, `actor.isBot` is `sender.login === botLogin` (case-insensitive). */
  botLogin?: string;
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Owner and repository names become path segments (workspaces) and key parts. Gitea's own rules
 * allow only ASCII letters, digits, `-`, `_`, `.`; on top of that we refuse `.`/`..` and any `..`,
 * a leading `-` (git would read it as an option) — the same rules as `src/domain/workspace-path.ts`,
 * so nothing that intake accepts can fail there later.
 */
export function isSafeName(value: string): boolean {
  return (
    value.length > 0 &&
    value.length <= 255 &&
    /^[A-Za-z0-9_.-]+$/.test(value) &&
    !value.includes('..') &&
    value !== '.' &&
    !value.startsWith('-')
  );
}

/** A Gitea login: non-empty, no whitespace or control characters, no path separators. */
function isPlausibleLogin(value: string): boolean {
  return value.length > 0 && value.length <= 255 && !CONTROL.test(value) && !/[\s/\\]/.test(value);
}

/** Delivery ids become key parts; Gitea sends a UUID. Accept only a conservative token. */
const DELIVERY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** True when `value` is usable as the `X-Gitea-Delivery` part of a deliveryKey. */
export function isValidDeliveryId(value: string): boolean {
  return DELIVERY_ID.test(value);
}

const timestamp = z.iso.datetime({ offset: true });
const positiveInt = z.number().int().positive();

export const UserSchema = z.object({ id: z.number().int().nullish(), login: z.string().refine(isPlausibleLogin, 'invalid login') });

const PermissionsSchema = z.object({ admin: z.boolean(), push: z.boolean(), pull: z.boolean() });

export const RepositorySchema = z.object({
  id: z.number().int(),
  owner: z.object({ login: z.string().refine(isSafeName, 'unsafe owner name') }),
  name: z.string().refine(isSafeName, 'unsafe repository name'),
  full_name: z.string(),
  clone_url: z.string().min(1),
  // Only checked against the configured Gitea host (repository-origin.ts), never used.
  html_url: z.string().nullish(),
  ssh_url: z.string().nullish(),
  default_branch: z.string(),
  permissions: PermissionsSchema.nullish(),
});

/** The normalised repository of a comment or review delivery. */
export function repositoryOf(r: z.infer<typeof RepositorySchema>): NormalizedComment['repo'] {
  return {
    id: r.id,
    owner: r.owner.login,
    name: r.name,
    fullName: r.full_name,
    cloneUrl: r.clone_url,
    htmlUrl: r.html_url ?? '',
    sshUrl: r.ssh_url ?? '',
    defaultBranch: r.default_branch,
  };
}

const IssueSchema = z.object({
  number: positiveInt,
  title: z.string().optional(),
  html_url: z.string().optional(),
});

const CommentSchema = z.object({
  id: positiveInt,
  body: z.string(),
  html_url: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
});

const GIT_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i;

export const PullRequestSchema = z.object({
  number: positiveInt,
  head: z.object({ ref: z.string().min(1), sha: z.string().regex(GIT_SHA, 'not a git object id') }),
  base: z.object({ ref: z.string().min(1) }),
});

/** The subset of Gitea's IssueCommentPayload intake relies on; other fields are ignored. */
export const IssueCommentPayloadSchema = z.object({
  action: z.string().regex(/^[a-z_]{1,32}$/, 'invalid action'),
  issue: IssueSchema,
  pull_request: PullRequestSchema.nullish(),
  comment: CommentSchema,
  repository: RepositorySchema,
  sender: UserSchema,
  is_pull: z.boolean(),
});

export type IssueCommentPayload = z.infer<typeof IssueCommentPayloadSchema>;

/** `gitea-task-` + the first 24 hex digits of SHA-256(deliveryKey): stable across replays of one delivery. */
export function taskIdFor(deliveryKey: string): string {
  return 'gitea-task-' + createHash('sha256').update(deliveryKey, 'utf8').digest('hex').slice(0, 24);
}

/**
 * The second dedup key (FACTS: a manual Replay re-sends the same body under a new delivery UUID):
 * `<repoKey>:comment:<id>:<action>:<updatedAt>`.
 */
export function commentTriggerKey(c: Pick<NormalizedComment, 'repoKey' | 'comment' | 'action'>): string {
  return `${c.repoKey}:comment:${c.comment.id}:${c.action}:${c.comment.updatedAt}`;
}

/** ISO-8601 UTC; second-precision inputs keep Gitea's form (`2026-07-20T09:15:42Z`). */
function toUtcIso(value: string): string {
  const iso = new Date(value).toISOString();
  return iso.endsWith('.000Z') ? iso.slice(0, -5) + 'Z' : iso;
}

function invalid(issues: string): NormalizeResult {
  return { ok: false, code: 'invalid_payload', issues };
}

export function formatIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 10)
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}


/**
 * Parse and validate one comment webhook. `json` is the signed JSON as bytes (or a string, or an
 * already parsed value). Requires `X-Gitea-Delivery` and `X-Gitea-Event-Type`
 * (`issue_comment` | `pull_request_comment`, matching the signed `is_pull`). Anything unparseable,
 * missing or unsafe → `{ok:false, code:'invalid_payload', issues}` (issues name fields, not values).
 */
export function normalizeComment(
  headers: WebhookHeaders,
  json: Buffer | string | unknown,
  options: NormalizeOptions = {},
): NormalizeResult {
  const deliveryId = getHeader(headers, 'x-gitea-delivery')?.trim();
  if (deliveryId === undefined || deliveryId === '') return invalid('missing X-Gitea-Delivery header');
  if (!DELIVERY_ID.test(deliveryId)) return invalid('malformed X-Gitea-Delivery header');

  const eventType = getHeader(headers, 'x-gitea-event-type')?.trim();
  if (eventType === undefined || eventType === '') return invalid('missing X-Gitea-Event-Type header');
  if (eventType !== 'issue_comment' && eventType !== 'pull_request_comment') {
    return invalid('X-Gitea-Event-Type is not a comment event');
  }

  const body = payloadJson(json);
  if (!body.ok) return invalid('body is not valid UTF-8 JSON');

  const parsed = IssueCommentPayloadSchema.safeParse(body.data);
  if (!parsed.success) return invalid(formatIssues(parsed.error));
  const p = parsed.data;

  const owner = p.repository.owner.login;
  const name = p.repository.name;
  if (p.repository.full_name !== `${owner}/${name}`) return invalid('repository.full_name does not match owner/name');

  const kind: ResourceKind = p.is_pull ? 'pull_request' : 'issue';
  if ((eventType === 'pull_request_comment') !== p.is_pull) {
    return invalid('X-Gitea-Event-Type does not match is_pull');
  }
  if (p.pull_request != null) {
    if (!p.is_pull) return invalid('pull_request present on an issue comment');
    if (p.pull_request.number !== p.issue.number) return invalid('pull_request.number does not match issue.number');
  }

  const repoKey = `${INSTANCE_ID}:${owner}/${name}`;
  const deliveryKey = `${INSTANCE_ID}:${deliveryId}`;
  const login = p.sender.login;
  const botLogin = options.botLogin;

  const value: NormalizedComment = {
    instanceId: INSTANCE_ID,
    deliveryId,
    deliveryKey,
    eventType,
    action: p.action,
    repo: repositoryOf(p.repository),
    repoKey,
    resource: { kind, number: p.issue.number, title: p.issue.title ?? '', htmlUrl: p.issue.html_url ?? '' },
    resourceKey: `${repoKey}:${kind}:${p.issue.number}`,
    comment: {
      id: p.comment.id,
      body: p.comment.body,
      createdAt: toUtcIso(p.comment.created_at),
      updatedAt: toUtcIso(p.comment.updated_at),
      htmlUrl: p.comment.html_url,
    },
    actor: {
      login,
      isBot: botLogin !== undefined && botLogin !== '' && login.toLowerCase() === botLogin.toLowerCase(),
    },
  };
  // Gitea's user id of the sender, compared with the comment's author on Gitea (src/intake/confirm-comment.ts).
  if (typeof p.sender.id === 'number' && p.sender.id > 0) value.actor.id = p.sender.id;
  if (p.repository.permissions != null) value.permissions = { ...p.repository.permissions };
  if (p.pull_request != null) {
    value.refs = { base: p.pull_request.base.ref, head: p.pull_request.head.ref, headSha: p.pull_request.head.sha };
  }
  return { ok: true, value };
}
