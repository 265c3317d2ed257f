// What the agent may do through Gitea: the pure half of the gate between Codex and the
// real gitea-mcp. The agent may have been talked into anything by a comment or a file, and gitea-mcp
// holds a token that can merge, rewrite the default branch, change Actions secrets and read every
// repository the bot sees. So the gate passes only what the task needs:
//
// - reading this repository: files, tree, commits, branches, issues/PRs, comments, reviews, diff;
// - writing: `add_comment` on this task's issue or PR, `edit_comment` on a comment the gate itself
//   created in this task; nothing else unless an operator enabled a group for the repository
//   (`labels`), and then only on this task's issue or PR.
//
// Default deny: a tool or method not in RULES is hidden from the list and refused when called; so is
// an argument a rule does not name (a later gitea-mcp that adds `other_repo` to a tool gains nothing).
// Every argument that names a place is checked against the task: owner and repo (Gitea compares
// them without case), the issue/PR number where writing, the comment id, and repository paths/refs
// (no `..` segment or URL syntax that could walk the SDK's request path to another endpoint).

export interface GateScope {
  owner: string;
  repo: string;
  /** The task's issue or pull request number. */
  number: number;
}

/** Extra groups an operator can allow per repository (control API), beyond reading and answering. */
export const EXTRA_GROUPS = ['labels'] as const;
export type ExtraGroup = (typeof EXTRA_GROUPS)[number];
type Group = 'read' | 'answer' | ExtraGroup;

/** What the gate knows of the current task when a call arrives (from the service's task file). */
export interface GateTaskView {
  taskId: string | null;
  extra: readonly ExtraGroup[];
  /** Comment ids the gate created through `add_comment` while this task ran. */
  ownComments: ReadonlySet<number>;
  /** The task file's `writesUntil` (gate-files.ts) and the time of the call: a write after it is refused. */
  writesUntil?: number;
  now?: number;
}

interface MethodRule {
  group: Group;
  /** Argument names allowed besides `owner`, `repo` and `method`. */
  args: readonly string[];
  /** `index` (or `issue_number`): any issue of this repository, or only the task's own. */
  index?: 'any' | 'task';
  /** `commentID` must be a comment the gate created in this task. */
  ownComment?: true;
  /** Needs no owner/repo (the server's own version). */
  placeless?: true;
}

type ToolRule = MethodRule | { methods: Readonly<Record<string, MethodRule>> };

const PAGE = ['page', 'perPage'] as const;
const read = (args: readonly string[], extra: Partial<MethodRule> = {}): MethodRule => ({ group: 'read', args, ...extra });

/** Tools (and their methods) the gate passes; everything else gitea-mcp offers is hidden. */
export const RULES: Readonly<Record<string, ToolRule>> = {
  get_file_contents: read(['filePath', 'ref', 'withLines']),
  get_dir_contents: read(['filePath', 'ref']),
  get_repository_tree: read(['tree_sha', 'recursive', ...PAGE]),
  get_commit: read(['sha']),
  list_commits: read(['sha', 'path', ...PAGE]),
  list_branches: read([...PAGE]),
  list_issues: read(['state', 'labels', 'since', 'before', ...PAGE]),
  list_pull_requests: read(['state', 'sort', 'milestone', ...PAGE]),
  get_gitea_mcp_server_version: read([], { placeless: true }),
  issue_read: {
    methods: {
      get: read(['index', 'issue_number'], { index: 'any' }),
      get_comments: read(['index', 'issue_number', ...PAGE], { index: 'any' }),
      get_labels: read(['index', 'issue_number'], { index: 'any' }),
    },
  },
  pull_request_read: {
    methods: {
      get: read(['index'], { index: 'any' }),
      get_diff: read(['index', 'binary'], { index: 'any' }),
      get_reviews: read(['index', ...PAGE], { index: 'any' }),
      get_review: read(['index', 'review_id'], { index: 'any' }),
      get_review_comments: read(['index', 'review_id', ...PAGE], { index: 'any' }),
    },
  },
  // gitea-mcp up to 2026-03-05 named its comment tools apart (src/sessions/turn-outcome.ts reads both).
  get_issue_comments_by_index: read(['index'], { index: 'any' }),
  create_issue_comment: { group: 'answer', args: ['index', 'body'], index: 'task' },
  edit_issue_comment: { group: 'answer', args: ['commentID', 'body'], ownComment: true },
  issue_write: {
    methods: {
      add_comment: { group: 'answer', args: ['index', 'issue_number', 'body'], index: 'task' },
      edit_comment: { group: 'answer', args: ['commentID', 'body'], ownComment: true },
      add_labels: { group: 'labels', args: ['index', 'issue_number', 'labels'], index: 'task' },
      remove_label: { group: 'labels', args: ['index', 'issue_number', 'label_id'], index: 'task' },
      replace_labels: { group: 'labels', args: ['index', 'issue_number', 'labels'], index: 'task' },
      clear_labels: { group: 'labels', args: ['index', 'issue_number'], index: 'task' },
    },
  },
  label_read: {
    methods: {
      list_repo_labels: { group: 'labels', args: [...PAGE] },
      get_repo_label: { group: 'labels', args: ['id'] },
    },
  },
};

/** Arguments that name a path or ref inside the repository. */
const PATH_ARGS = new Set(['filePath', 'path', 'ref', 'sha', 'tree_sha']);
const PLACE_ARGS = ['owner', 'repo', 'method'];

export interface McpTool {
  name: string;
  description?: string;
  inputSchema: { type: 'object'; properties?: Record<string, unknown>; required?: string[]; [k: string]: unknown };
  [k: string]: unknown;
}

/**
 * The arguments forwarded for an allowed call: owner and repo are the task's own spelling, whatever
 * letter case the agent used (the audit and Gitea then see one name).
 */
export function forwardedArguments(rawArgs: unknown, scope: GateScope, rule: MethodRule): Record<string, unknown> {
  const args = rawArgs && typeof rawArgs === 'object' && !Array.isArray(rawArgs) ? { ...(rawArgs as Record<string, unknown>) } : {};
  if (!rule.placeless) {
    args.owner = scope.owner;
    args.repo = scope.repo;
  }
  return args;
}

function groupsOf(view: Pick<GateTaskView, 'extra'>): Set<Group> {
  return new Set<Group>(['read', 'answer', ...view.extra]);
}

function allowedMethods(rule: ToolRule, groups: Set<Group>): Record<string, MethodRule> | null {
  if (!('methods' in rule)) return groups.has(rule.group) ? { '': rule } : null;
  const out: Record<string, MethodRule> = {};
  for (const [m, r] of Object.entries(rule.methods)) if (groups.has(r.group)) out[m] = r;
  return Object.keys(out).length > 0 ? out : null;
}

/** One line the agent reads when a call is refused: what it may do here instead. */
export function allowedSummary(scope: GateScope, view: Pick<GateTaskView, 'extra'>): string {
  const labels = view.extra.includes('labels') ? `; labels on #${scope.number}` : '';
  return (
    `Allowed here: reading ${scope.owner}/${scope.repo} (files, tree, commits, branches, issues, pull requests, comments, reviews, diff), ` +
    `issue_write add_comment on #${scope.number}, and edit_comment on comments you posted in this task${labels}. ` +
    'Nothing else (no files, branches, merges, reviews, Actions, other repositories).'
  );
}

/**
 * The tools the agent is offered: gitea-mcp's own definitions, cut to the allowed ones; a tool
 * whose methods mix reads and writes shows only its allowed methods and their arguments.
 */
export function narrowTools(tools: readonly McpTool[], scope: GateScope, view: Pick<GateTaskView, 'extra'>): McpTool[] {
  const groups = groupsOf(view);
  const out: McpTool[] = [];
  for (const tool of tools) {
    const rule = RULES[tool.name];
    const methods = rule ? allowedMethods(rule, groups) : null;
    if (!methods) continue;
    const names = Object.keys(methods);
    const keep = new Set([...PLACE_ARGS, ...names.flatMap((m) => methods[m]!.args)]);
    const props = tool.inputSchema.properties ?? {};
    const properties: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(props)) {
      if (!keep.has(k)) continue;
      properties[k] = k === 'method' && names[0] !== '' ? { ...(v as object), enum: (((v as { enum?: string[] }).enum ?? names).filter((m) => names.includes(m))) } : v;
    }
    const required = (tool.inputSchema.required ?? []).filter((k) => k in properties);
    const where = rule && 'placeless' in rule ? '' : ` Only on ${scope.owner}/${scope.repo}${names.some((m) => methods[m]!.index === 'task') ? `; writes only on #${scope.number}` : ''}.`;
    out.push({
      ...tool,
      description: `${tool.description ?? ''}${where}${names[0] !== '' ? ` Methods allowed: ${names.join(', ')}.` : ''}`.trim(),
      inputSchema: { ...tool.inputSchema, properties, required },
    });
  }
  return out;
}

export interface CallPlace {
  owner?: string;
  repo?: string;
  index?: number;
  commentId?: number;
  path?: string;
}

export type CallDecision =
  | { allow: true; method: string | null; place: CallPlace; rule: MethodRule }
  | { allow: false; method: string | null; place: CallPlace; reason: string };

function asInt(v: unknown): number | null {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0) return v;
  // At most 15 digits: every such string is a safe integer, read by Go's ParseInt as the same number.
  if (typeof v === 'string' && /^[1-9]\d{0,14}$/.test(v)) return Number(v);
  return null;
}

/** Gitea's owner and repository names are ASCII; anything else is refused rather than case-folded. */
const NAME = /^[A-Za-z0-9._-]{1,100}$/;

function bounded(v: unknown): string | undefined {
  return typeof v === 'string' ? v.slice(0, 200) : undefined;
}

/** A repository path or ref the SDK puts into a request path: no walking out of it. */
export function badPathReason(name: string, v: unknown): string | null {
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string') return `${name} must be a string`;
  if (v.length > 4096) return `${name} is too long`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\?#%]/.test(v)) return `${name} may not hold control characters, \\, ?, # or %`;
  if (v.split('/').some((seg) => seg === '..' || seg === '.')) return `${name} may not hold . or .. segments`;
  return null;
}

/** Whether one tools/call goes through, and the place it names (for the audit). */
export function decideCall(tool: string, rawArgs: unknown, scope: GateScope, view: GateTaskView): CallDecision {
  const args = rawArgs && typeof rawArgs === 'object' && !Array.isArray(rawArgs) ? (rawArgs as Record<string, unknown>) : {};
  const method = typeof args.method === 'string' ? args.method.slice(0, 60) : null;
  const place: CallPlace = {};
  const ownerArg = bounded(args.owner);
  const repoArg = bounded(args.repo);
  if (ownerArg !== undefined) place.owner = ownerArg;
  if (repoArg !== undefined) place.repo = repoArg;
  const index = asInt(args.index ?? args.issue_number);
  if (index !== null) place.index = index;
  const commentId = asInt(args.commentID);
  if (commentId !== null) place.commentId = commentId;
  const path = bounded(args.filePath ?? args.path);
  if (path !== undefined) place.path = path;
  const refuse = (reason: string): CallDecision => ({ allow: false, method, place, reason });

  // Own properties only: `constructor` or `__proto__` must never find a rule.
  const toolRule = Object.hasOwn(RULES, tool) ? RULES[tool] : undefined;
  if (!toolRule) return refuse(`the tool ${tool} is not available to the agent`);
  let rule: MethodRule;
  if ('methods' in toolRule) {
    const r = method !== null && Object.hasOwn(toolRule.methods, method) ? toolRule.methods[method] : undefined;
    if (!r) return refuse(`${tool} method ${method ?? '(none)'} is not allowed`);
    rule = r;
  } else {
    rule = toolRule;
  }
  if (!groupsOf(view).has(rule.group)) return refuse(`${tool}${method ? ` ${method}` : ''} is not enabled for ${scope.owner}/${scope.repo}`);
  // Another node may run the task once this node's lease has expired: from a heartbeat before that,
  // nothing more is written for it from here (a paused or cut-off node's agent cannot answer).
  if (rule.group !== 'read' && view.writesUntil !== undefined && (view.now ?? Date.now()) >= view.writesUntil) {
    return refuse('the task is no longer held by this node (its lease was not renewed in time), so nothing more is written for it');
  }
  const allowedArgs = new Set([...(rule.placeless ? [] : ['owner', 'repo']), ...('methods' in toolRule ? ['method'] : []), ...rule.args]);
  for (const k of Object.keys(args)) if (!allowedArgs.has(k)) return refuse(`the argument ${k.slice(0, 60)} is not allowed with ${tool}${method ? ` ${method}` : ''}`);
  if (!rule.placeless) {
    if (typeof args.owner !== 'string' || typeof args.repo !== 'string') return refuse('owner and repo are required');
    if (!NAME.test(args.owner) || !NAME.test(args.repo)) return refuse('owner and repo must be Gitea names (letters, digits, ., _, -)');
    if (args.owner.toLowerCase() !== scope.owner.toLowerCase() || args.repo.toLowerCase() !== scope.repo.toLowerCase()) {
      return refuse(`only the repository ${scope.owner}/${scope.repo} is reachable, not ${ownerArg}/${repoArg}`);
    }
  }
  for (const k of Object.keys(args)) {
    if (!PATH_ARGS.has(k)) continue;
    const bad = badPathReason(k, args[k]);
    if (bad) return refuse(bad);
  }
  if (rule.index !== undefined) {
    const given = args.index ?? args.issue_number;
    // Two names for one number (gitea-mcp renamed index to issue_number): both must agree.
    if (args.index !== undefined && args.issue_number !== undefined && asInt(args.index) !== asInt(args.issue_number)) return refuse('index and issue_number differ');
    if (given !== undefined && index === null) return refuse('index must be a positive issue or pull request number');
    if (rule.index === 'task' && index !== scope.number) return refuse(`writes go only to #${scope.number} (this task's issue or pull request), not #${index ?? '(none)'}`);
  }
  if (rule.ownComment) {
    if (commentId === null) return refuse('commentID must be a comment id');
    if (!view.ownComments.has(commentId)) return refuse(`comment ${commentId} was not posted by you in this task; only those can be edited`);
  }
  return { allow: true, method, place, rule };
}

/** The id of the comment an allowed `add_comment` created, from gitea-mcp's result text. */
export function createdCommentId(result: unknown): number | null {
  const content = (result as { content?: unknown } | null)?.content;
  if (!Array.isArray(content)) return null;
  for (const c of content) {
    const text = (c as { type?: unknown; text?: unknown }).type === 'text' ? (c as { text?: unknown }).text : undefined;
    if (typeof text !== 'string') continue;
    try {
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const obj = (parsed.Result && typeof parsed.Result === 'object' ? parsed.Result : parsed) as Record<string, unknown>;
      const id = asInt(obj.id);
      if (id !== null) return id;
    } catch {
      // not JSON: no id to learn
    }
  }
  return null;
}
