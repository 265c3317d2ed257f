// The words the service itself writes on Gitea (receipts, failure results, limit and block notices), one catalogue per
// language. `CCWEB_LOCALE` picks one: `zh` by default (the spec's receipt is `giteabot: 已收到`),
// `en` for English-speaking users. Every entry takes only data the service produced (task ids,
// checked logins, fixed sentences): nothing from a comment's text is ever echoed back.
//
// To add a text: add it to `Messages`, then to every catalogue below; the compiler refuses a
// catalogue that lacks it. To add a language: add its code to LOCALES (src/domain/locale.ts, where
// config/ reads it too) and write its catalogue.
import { DEFAULT_LOCALE, type Locale } from '../domain/locale.js';
import type { ProgressStage } from '../domain/record-fields.js';

export { DEFAULT_LOCALE, LOCALES, isLocale, type Locale } from '../domain/locale.js';

/** Error codes with a sentence of their own; any other code gets `unexpectedError`. */
export const EXPLAINED_ERROR_CODES = [
  'mcp_command_missing',
  'mcp_start_failed',
  'mcp_initialize_failed',
  'app_server_unavailable',
  'app_server_exited',
  'app_server_timeout',
  'auth_failed',
  'git_failed',
  'workspace_dirty',
  'path_invalid',
  'timeout',
  'turn_timeout',
  'turn_failed',
  'turn_interrupted',
  'interrupted_by_restart',
  'retry_limit_exceeded',
  'abort_timeout',
  'executor_error',
  'turn_record_missing',
  'mcp_reply_missing',
  'reply_query_failed',
  'rest_fallback_failed',
  'rest_fallback_unconfirmed',
  'reply_unconfirmed',
  // Change delivery.
  'push_rejected',
  'push_conflict',
  'push_failed',
  'pull_request_refused',
  'publish_unverified',
  'publish_target_default',
  'publish_target_missing',
  'publish_target_invalid',
  'publish_secret_in_change',
  'publish_git_failed',
  'publish_gitea_failed',
  'publish_failed',
  // What the publisher refuses.
  'fork_edits_not_allowed',
  'fork_unreachable',
  'publish_protected_paths',
  'publish_paths_all_withheld',
  'input_too_large',
  // A per-task budget stopped the task (the receipt's notice gives the figures).
  'budget_task_tokens',
  'budget_task_turns',
  'budget_task_wall_time',
] as const;
export type ExplainedErrorCode = (typeof EXPLAINED_ERROR_CODES)[number];

/** Daily quotas and per-task budgets that have a notice of their own. */
export type QuotaCode = 'quota_user_tasks_per_day' | 'quota_repo_tokens_per_day';
export type BudgetCode = 'budget_task_tokens' | 'budget_task_turns' | 'budget_task_wall_time';

/**
 * The words about limits and blocks. Numbers arrive already formatted (`1,200`), times as
 * `2026-12-02 00:00 UTC`, so every language shows them the same way.
 */
export interface LimitMessages {
  /** The one comment a mention over a daily quota gets. Must start with `giteabot: `. */
  refused(p: { taskId: string; mention: string | null; code: QuotaCode; used: string; limit: string; retryAt: string }): string;
  /**
   * The one comment a mention longer than the agent can take gets. `chars` and `limit`
   * are characters (Unicode code points). Must start with `giteabot: `.
   */
  tooLong(p: { taskId: string; mention: string | null; chars: string; limit: string }): string;
  /** The one answer to a `stop` that found nothing to stop on the thread. Must start with `giteabot: `. */
  nothingToStop(p: { mention: string | null }): string;
  /**
   * The one notice per thread and day that a mention in a repository an operator disabled gets
   * (not silence: the writer learns why nothing runs). Must start with `giteabot: `.
   */
  repositoryDisabled(p: { mention: string | null }): string;
  /**
   * The one notice per thread and day that a mention by someone without write access gets: who may
   * ask the bot, never anything of the task. Must start with `giteabot: `.
   */
  readerNotice(p: { mention: string | null }): string;
  /**
   * Added to the receipt when a per-task budget stopped the task; null figures are left out. Figures
   * arrive formatted: counts as `1,200`, agent time as a duration (`42 s`, `3 min 05 s`).
   */
  budget(p: { code: BudgetCode; used: string | null; limit: string | null; key: string }): string;
  /** Added to the receipt when the task parks in `blocked_workspace`. */
  blocked(p: { taskId: string }): string;
  /** Replaces `blocked` once an operator unblocked the task and it is queued again. */
  resumed(p: { taskId: string }): string;
  /** A notice posted on its own because there was no receipt to edit. Must start with `giteabot: `. */
  standalone(p: { taskId: string; text: string }): string;
}

// A stage of a task as its receipt shows it; stored in the receipt row, so declared there.
export type { ProgressStage };

/**
 * The lines the receipt gains while its task runs and when it ends. Durations arrive
 * formatted (`3 min 05 s`), steps as service-made names; links as URLs Gitea gave.
 */
export interface ProgressMessages {
  stage: Record<ProgressStage, string>;
  /** What the receipt's first line says of the request at each stage (`is queued`, `is done`, `failed`). */
  headline: Record<ProgressStage, string>;
  /** `**Stage:** working · 3 min 05 s` */
  stageLine(p: { stage: string; elapsed: string | null }): string;
  step: {
    command(program: string | null): string;
    tool(name: string | null): string;
    fileChange(files: number): string;
    plan(done: number, total: number): string;
    webSearch: string;
    thinking: string;
  };
  /** `Current step: running \`npm\`` */
  stepLine(step: string): string;
  answer(url: string): string;
  branch(p: { name: string; url: string | null }): string;
  pullRequest(p: { number: number; url: string }): string;
  /** Duration and tokens of a finished task; null tokens are left out. */
  totals(p: { duration: string; tokens: string | null }): string;
  /** The error code of a failed task with its one-line meaning. */
  error(p: { code: string; reason: string }): string;
  /** CCWEB_DELIVERY=off: the change was not published. */
  notPublished: string;
  /** Where an unpublished change is kept. */
  kept(p: { branch: string; patch: string }): string;
  /**
   * Paths left out of the commit (CI definitions) and where they are kept. Paths arrive already
   * reduced to a plain alphabet (receipts/path-text.ts).
   */
  withheld(p: { paths: string[]; more: number; branch: string; patch: string }): string;
  /** `1 h 05 min`, `3 min 05 s`, `42 s` */
  duration(p: { h: number; min: number; s: number }): string;
}

const pad = (n: number) => String(n).padStart(2, '0');

const zhProgress: ProgressMessages = {
  stage: {
    queued: '排队中',
    preparing: '正在准备工作区',
    working: '智能体工作中',
    waiting_user: '等待你的回答',
    retry_wait: '稍后重试',
    blocked: '已暂停',
    publishing: '正在发布改动',
    verifying: '正在核对回答',
    stopping: '正在停止',
    done: '已完成',
    failed: '失败',
    cancelled: '已停止',
  },
  headline: {
    queued: '已排队',
    preparing: '正在处理',
    working: '正在处理',
    waiting_user: '正在等待你的回答',
    retry_wait: '将稍后重试',
    blocked: '已暂停',
    publishing: '正在处理',
    verifying: '正在处理',
    stopping: '正在停止',
    done: '已完成',
    failed: '失败了',
    cancelled: '已停止',
  },
  stageLine: ({ stage, elapsed }) => `**阶段：** ${stage}${elapsed ? ` · 已用时 ${elapsed}` : ''}`,
  step: {
    command: (program) => (program ? `运行命令 \`${program}\`` : '运行命令'),
    tool: (name) => (name ? `调用工具 \`${name}\`` : '调用工具'),
    fileChange: (files) => `修改 ${files} 个文件`,
    plan: (done, total) => `计划第 ${Math.min(done + 1, total)}/${total} 步`,
    webSearch: '搜索网页',
    thinking: '思考',
  },
  stepLine: (step) => `当前步骤：${step}`,
  answer: (url) => `回答：${url}`,
  branch: ({ name, url }) => `分支：${url ? `[\`${name}\`](${url})` : `\`${name}\``}`,
  pullRequest: ({ number, url }) => `合并请求：[#${number}](${url})`,
  totals: ({ duration, tokens }) => `用时 ${duration}${tokens ? `，${tokens} 个 token` : ''}`,
  error: ({ code, reason }) => `错误码 \`${code}\`：${reason}`,
  notPublished: '改动没有发布：本服务关闭了改动交付。',
  kept: ({ branch, patch }) => `改动已保留：服务工作区中的分支 \`${branch}\`，以及数据目录中的补丁 \`${patch}\`。`,
  withheld: ({ paths, more, branch, patch }) =>
    `未提交：${paths.map((p) => `\`${p}\``).join('、')}${more > 0 ? ` 等另外 ${more} 个` : ''}，因为本仓库不允许机器人修改 CI 定义；这些文件已保留在服务工作区中的分支 \`${branch}\`，以及数据目录中的补丁 \`${patch}\`。`,
  duration: ({ h, min, s }) => (h > 0 ? `${h} 小时 ${pad(min)} 分` : min > 0 ? `${min} 分 ${pad(s)} 秒` : `${s} 秒`),
};

const enProgress: ProgressMessages = {
  stage: {
    queued: 'queued',
    preparing: 'preparing the workspace',
    working: 'working',
    waiting_user: 'waiting for your answer',
    retry_wait: 'waiting to retry',
    blocked: 'paused',
    publishing: 'publishing the change',
    verifying: 'verifying the answer',
    stopping: 'stopping',
    done: 'done',
    failed: 'failed',
    cancelled: 'stopped',
  },
  headline: {
    queued: 'is queued',
    preparing: 'is being worked on',
    working: 'is being worked on',
    waiting_user: 'is waiting for your answer',
    retry_wait: 'will be tried again shortly',
    blocked: 'is paused',
    publishing: 'is being worked on',
    verifying: 'is being worked on',
    stopping: 'is being stopped',
    done: 'is done',
    failed: 'failed',
    cancelled: 'was stopped',
  },
  stageLine: ({ stage, elapsed }) => `**Stage:** ${stage}${elapsed ? ` · ${elapsed} so far` : ''}`,
  step: {
    command: (program) => (program ? `running \`${program}\`` : 'running a command'),
    tool: (name) => (name ? `calling \`${name}\`` : 'calling a tool'),
    fileChange: (files) => `editing ${files} file${files === 1 ? '' : 's'}`,
    plan: (done, total) => `plan step ${Math.min(done + 1, total)} of ${total}`,
    webSearch: 'searching the web',
    thinking: 'thinking',
  },
  stepLine: (step) => `Current step: ${step}`,
  answer: (url) => `Answer: ${url}`,
  branch: ({ name, url }) => `Branch: ${url ? `[\`${name}\`](${url})` : `\`${name}\``}`,
  pullRequest: ({ number, url }) => `Pull request: [#${number}](${url})`,
  totals: ({ duration, tokens }) => `Took ${duration}${tokens ? `, ${tokens} tokens` : ''}`,
  error: ({ code, reason }) => `Error code \`${code}\`: ${reason}`,
  notPublished: 'Not published: change delivery is off on this service.',
  kept: ({ branch, patch }) => `The change is kept: branch \`${branch}\` in the service's workspace and the patch \`${patch}\` in its data directory.`,
  withheld: ({ paths, more, branch, patch }) =>
    `Not committed: ${paths.map((p) => `\`${p}\``).join(', ')}${more > 0 ? ` and ${more} more` : ''}, because the bot may not change CI definitions in this repository; they are kept as branch \`${branch}\` in the service's workspace and the patch \`${patch}\` in its data directory.`,
  duration: ({ h, min, s }) => (h > 0 ? `${h} h ${pad(min)} min` : min > 0 ? `${min} min ${pad(s)} s` : `${s} s`),
};

export interface Messages {
  /**
   * The first line of the one receipt per accepted task; `status` is `progress.headline` of the
   * task's stage, so the line follows the stage. Must start with `giteabot: `.
   */
  received(p: { taskId: string; mention: string | null; status: string }): string;
  cancelled(p: { taskId: string; stopper: string }): string;
  aborted(p: { taskId: string; stopper: string }): string;
  failed(p: { taskId: string; reason: string; code: string | null }): string;
  failedReply(p: { taskId: string; reason: string; code: string | null }): string;
  errors: Record<ExplainedErrorCode, string>;
  unexpectedError: string;
  /** CCWEB_DELIVERY=off: one notice that the task's changes were not published. */
  notPublished(p: { taskId: string }): string;
  /**
   * One notice that some paths (CI definitions) were left out of the published change. Paths arrive
   * already reduced to a plain alphabet (receipts/path-text.ts pathForText). Must start with `giteabot: `.
   */
  withheldPaths(p: { taskId: string; paths: string[]; more: number; branch: string; patch: string }): string;
  /** Who stopped a task, when it was not a plain Gitea login (that one is written `@login`). */
  stoppers: { operator(name: string): string; anOperator: string; service: string; someone: string };
  limits: LimitMessages;
  progress: ProgressMessages;
}

const ZH_BUDGET: Record<BudgetCode, { used: (n: string) => string; limit: (n: string | null) => string }> = {
  budget_task_tokens: { used: (n) => `已使用 ${n} 个 token，`, limit: (n) => (n ? `每个任务 ${n} 个 token 的上限` : '每个任务的 token 上限') },
  budget_task_turns: { used: (n) => `已运行 ${n} 轮智能体，`, limit: (n) => (n ? `每个任务 ${n} 轮的上限` : '每个任务的轮次上限') },
  budget_task_wall_time: { used: (n) => `已耗用 ${n}智能体时间，`, limit: (n) => (n ? `每个任务 ${n}智能体时间的上限` : '每个任务的时间上限') },
};

const zhLimits: LimitMessages = {
  refused: ({ taskId, mention, code, used, limit, retryAt }) =>
    `giteabot: 未开始 — ${
      code === 'quota_user_tasks_per_day'
        ? `已达每日任务上限：${mention ? `${mention} ` : '该用户'}今天已启动 ${used} 个任务（上限：每位用户每天 ${limit} 个任务）`
        : `已达仓库每日 token 上限：本仓库的任务今天已使用 ${used} 个 token（上限：每个仓库每天 ${limit} 个 token）`
    }。${retryAt} 之后可以再次运行，届时请重新提及机器人（任务 ${taskId}，代码 \`${code}\`）。`,
  tooLong: ({ taskId, mention, chars, limit }) =>
    `giteabot: 未开始 — ${mention ? `${mention} 的` : '这条'}评论有 ${chars} 个字符，超过了智能体一次能接收的上限 ${limit} 个字符，因此没有运行任务，也不会重试。请把请求缩短（例如把长内容放进仓库文件或附件，在评论里引用它）后再次提及机器人（任务 ${taskId}，代码 \`input_too_large\`）。`,
  nothingToStop: ({ mention }) =>
    `giteabot: ${mention ? `${mention}，` : ''}这里没有可以停止的任务：本话题没有排队、等待或正在运行的任务。`,
  repositoryDisabled: ({ mention }) =>
    `giteabot: ${mention ? `${mention}，` : ''}管理员已在本仓库停用了机器人，因此不会运行任务（代码 \`repository_disabled\`）。重新启用后请再次提及机器人。今天本话题不会再收到这条通知。`,
  readerNotice: ({ mention }) =>
    `giteabot: ${mention ? `${mention}，` : ''}只有对本仓库有写权限的人才能让机器人工作，因此没有运行任何任务。今天本话题不会再收到这条通知。`,
  budget: ({ code, used, limit, key }) =>
    `**因达到上限而停止：** 本任务${used === null ? '' : ZH_BUDGET[code].used(used)}达到了${ZH_BUDGET[code].limit(limit)}（\`${code}\`），智能体已被中断。管理员可以提高 ${key} 或该仓库的上限，之后请再次提及机器人以继续。`,
  blocked: ({ taskId }) =>
    `**已暂停：** 机器人所在主机上该仓库的工作区有本地改动，因此没有运行任何操作（\`workspace_dirty\`）。需由管理员清理工作区并解除任务 ${taskId} 的阻塞，之后任务会继续运行。`,
  resumed: ({ taskId }) => `**已恢复：** 管理员已解除任务 ${taskId} 的阻塞，任务已重新排队。`,
  standalone: ({ taskId, text }) => `giteabot: 任务 ${taskId} — ${text}`,
};

/** `used 1,200 tokens`, `limit of 1,000 tokens per task`; `perTask` when the limit is not known. */
const EN_BUDGET: Record<BudgetCode, { what: string; unit: string; perTask: string }> = {
  budget_task_tokens: { what: 'tokens', unit: 'tokens per task', perTask: 'tokens per task' },
  budget_task_turns: { what: 'agent turns', unit: 'turns per task', perTask: 'turns per task' },
  budget_task_wall_time: { what: 'of agent time', unit: 'of agent time per task', perTask: 'agent time per task' },
};

const enLimits: LimitMessages = {
  refused: ({ taskId, mention, code, used, limit, retryAt }) =>
    `giteabot: not started — ${
      code === 'quota_user_tasks_per_day'
        ? `${mention ?? 'this user'} has already started ${used} tasks today (limit: ${limit} tasks per user per day)`
        : `the tasks of this repository have used ${used} tokens today (limit: ${limit} tokens per repository per day)`
    }. It can run again after ${retryAt}: mention the bot again then (task ${taskId}, code \`${code}\`).`,
  tooLong: ({ taskId, mention, chars, limit }) =>
    `giteabot: not started — ${mention ? `${mention}'s` : 'this'} comment is ${chars} characters long, more than the ${limit} characters the agent can take at once, so no task was run and none will be retried. Shorten the request (for example, put long content in a file in the repository or an attachment and refer to it) and mention the bot again (task ${taskId}, code \`input_too_large\`).`,
  nothingToStop: ({ mention }) =>
    `giteabot: ${mention ? `${mention}, ` : ''}there is nothing to stop here: no task of this thread is queued, waiting or running.`,
  repositoryDisabled: ({ mention }) =>
    `giteabot: ${mention ? `${mention}, ` : ''}an operator has disabled the bot in this repository, so no task runs (code \`repository_disabled\`). Mention the bot again once it is enabled. This thread gets this notice at most once a day.`,
  readerNotice: ({ mention }) =>
    `giteabot: ${mention ? `${mention}, ` : ''}only people with write access to this repository can ask the bot, so nothing was run. This thread gets this notice at most once a day.`,
  budget: ({ code, used, limit, key }) =>
    `**Stopped by a limit:** this task${used === null ? '' : ` used ${used} ${EN_BUDGET[code].what} and`} reached its limit of ${limit === null ? EN_BUDGET[code].perTask : `${limit} ${EN_BUDGET[code].unit}`} (\`${code}\`), so the agent was interrupted. An operator can raise ${key} or the repository's limit; then mention the bot again to continue.`,
  blocked: ({ taskId }) =>
    `**Paused:** the repository's workspace on the bot's host has local changes, so nothing was run (\`workspace_dirty\`). An operator must clean the workspace and unblock task ${taskId}; it then runs.`,
  resumed: ({ taskId }) => `**Resumed:** an operator unblocked task ${taskId}; it is queued again.`,
  standalone: ({ taskId, text }) => `giteabot: task ${taskId} — ${text}`,
};

const zh: Messages = {
  received: ({ taskId, mention, status }) => `giteabot: 已收到 — ${mention ? `${mention} 的` : ''}请求${status}（任务 ${taskId}）。`,
  cancelled: ({ taskId, stopper }) => `giteabot: 任务 ${taskId} 在完成前被 ${stopper} 取消。`,
  aborted: ({ taskId, stopper }) => `giteabot: 任务 ${taskId} 在运行中被 ${stopper} 中止。`,
  failed: ({ taskId, reason, code }) => `giteabot: 任务 ${taskId} 失败：${reason}${code ? `（错误码：\`${code}\`）` : ''}。`,
  failedReply: ({ taskId, reason, code }) => `giteabot: 任务 ${taskId} 已运行完毕，但回答没有出现在这里：${reason}${code ? `（错误码：\`${code}\`）` : ''}。`,
  errors: {
    mcp_command_missing: 'Gitea 工具服务无法启动（找不到命令）',
    mcp_start_failed: 'Gitea 工具服务启动后立即退出',
    mcp_initialize_failed: 'Gitea 工具服务没有完成启动握手',
    app_server_unavailable: '无法连接 Codex app-server',
    app_server_exited: 'Codex app-server 意外停止',
    app_server_timeout: 'Codex app-server 没有及时响应',
    auth_failed: '无法获取仓库（认证失败）',
    git_failed: '工作区上的 git 操作失败',
    workspace_dirty: '工作区有本地改动，因此没有运行任何操作',
    path_invalid: '工作区路径无效',
    timeout: '操作超时',
    turn_timeout: '智能体没有在限定时间内完成',
    turn_failed: '智能体运行失败',
    turn_interrupted: '智能体运行被中断',
    interrupted_by_restart: '任务运行时服务重启了',
    retry_limit_exceeded: '唯一一次重试后再次失败',
    abort_timeout: '正在运行的智能体没有及时确认停止',
    executor_error: '内部错误使其停止',
    turn_record_missing: '智能体运行的记录缺失',
    mcp_reply_missing: '智能体的回答没有以评论形式出现',
    reply_query_failed: '无法向 Gitea 确认回答是否已发布，因此没有重新发布',
    rest_fallback_failed: '回答无法以评论形式发布',
    rest_fallback_unconfirmed: '回答已发送，但之后在此处找不到',
    reply_unconfirmed: '无法在此处确认智能体的回答',
    push_rejected: 'Gitea 拒绝接收改动（受保护分支或缺少推送权限）',
    push_conflict: 'Gitea 上的分支已经变动，改动无法应用在其之上',
    push_failed: '改动无法推送到 Gitea',
    pull_request_refused: 'Gitea 拒绝创建合并请求',
    publish_unverified: '无法在 Gitea 上确认已推送的改动',
    publish_target_default: '改动将进入默认分支，而机器人从不向默认分支推送',
    publish_target_missing: '此合并请求的分支已不存在',
    publish_target_invalid: '改动的分支名不可接受',
    publish_secret_in_change: '改动中包含服务的密钥，因此没有推送',
    publish_git_failed: '发布改动时 git 操作失败',
    publish_gitea_failed: '无法向 Gitea 查询分支或合并请求',
    publish_failed: '改动无法发布',
    fork_edits_not_allowed:
      '此合并请求来自复刻仓库，且作者没有允许维护者编辑；机器人从不把复刻仓库的提交推送到本仓库，因此改动没有发布。作者可以在合并请求中勾选"允许维护者编辑"，然后再次提及机器人',
    fork_unreachable: '机器人无法访问此合并请求的复刻仓库（私有复刻需要把机器人添加为可读的协作者），因此改动没有发布',
    publish_protected_paths: '工作区中的提交修改了 CI 定义（例如 .gitea/workflows/），本仓库不允许机器人发布这些文件，因此改动没有发布',
    publish_paths_all_withheld: '改动涉及的文件全部是本仓库不允许机器人提交的路径（例如 .gitea/workflows/ 下的 CI 定义），因此没有发布任何内容；管理员可以为本仓库允许 CI 改动',
    input_too_large: '交给智能体的内容（几条回复加在一起）超过了它一次能接收的 1,048,576 个字符，请缩短后再次提及机器人',
    budget_task_tokens: '任务达到了每个任务的 token 上限',
    budget_task_turns: '任务达到了每个任务的智能体轮次上限',
    budget_task_wall_time: '任务达到了每个任务的智能体时间上限',
  },
  unexpectedError: '意外错误使其停止',
  notPublished: ({ taskId }) => `giteabot: 任务 ${taskId} 的改动没有发布（本服务关闭了改动交付）。`,
  withheldPaths: ({ taskId, paths, more, branch, patch }) =>
    `giteabot: 任务 ${taskId} 的以下文件没有提交，因为本仓库不允许机器人修改 CI 定义：${paths.map((p) => `\`${p}\``).join('、')}${more > 0 ? ` 等另外 ${more} 个` : ''}。其余改动已照常发布。这些文件已保留：服务工作区中的分支 \`${branch}\`，以及数据目录中的补丁 \`${patch}\`；管理员可以为本仓库允许 CI 改动。`,
  stoppers: { operator: (name) => `管理员 ${name}`, anOperator: '一位管理员', service: '服务', someone: '某人' },
  limits: zhLimits,
  progress: zhProgress,
};

const en: Messages = {
  received: ({ taskId, mention, status }) => `giteabot: received — the request${mention ? ` from ${mention}` : ''} ${status} (task ${taskId}).`,
  cancelled: ({ taskId, stopper }) => `giteabot: task ${taskId} was cancelled by ${stopper} before it ran to the end.`,
  aborted: ({ taskId, stopper }) => `giteabot: task ${taskId} was stopped by ${stopper} while it was running.`,
  failed: ({ taskId, reason, code }) => `giteabot: task ${taskId} failed: ${reason}${code ? ` (error code: \`${code}\`)` : ''}.`,
  failedReply: ({ taskId, reason, code }) => `giteabot: task ${taskId} finished, but its answer is not on this issue: ${reason}${code ? ` (error code: \`${code}\`)` : ''}.`,
  errors: {
    mcp_command_missing: 'the Gitea tool server could not be started (command not found)',
    mcp_start_failed: 'the Gitea tool server exited right after it was started',
    mcp_initialize_failed: 'the Gitea tool server did not complete its start-up handshake',
    app_server_unavailable: 'the Codex app-server could not be reached',
    app_server_exited: 'the Codex app-server stopped unexpectedly',
    app_server_timeout: 'the Codex app-server did not answer in time',
    auth_failed: 'the repository could not be fetched (authentication failed)',
    git_failed: 'a git operation on the workspace failed',
    workspace_dirty: 'the workspace has local changes, so nothing was run',
    path_invalid: 'the workspace path is not valid',
    timeout: 'an operation timed out',
    turn_timeout: 'the agent did not finish in time',
    turn_failed: 'the agent run failed',
    turn_interrupted: 'the agent run was interrupted',
    interrupted_by_restart: 'the service restarted while the task was running',
    retry_limit_exceeded: 'it failed again after its one retry',
    abort_timeout: 'the running agent did not confirm the stop in time',
    executor_error: 'an internal error stopped it',
    turn_record_missing: 'the record of the agent run was missing',
    mcp_reply_missing: "the agent's answer never appeared as a comment",
    reply_query_failed: 'Gitea could not be asked whether the answer was posted, so nothing was re-posted',
    rest_fallback_failed: 'the answer could not be posted as a comment',
    rest_fallback_unconfirmed: 'the answer was sent but could not be found on this issue afterwards',
    reply_unconfirmed: "the agent's answer could not be confirmed on this issue",
    push_rejected: 'Gitea refused to accept the change (a protected branch or missing push permission)',
    push_conflict: 'the branch moved on Gitea and the change does not apply on top of it',
    push_failed: 'the change could not be pushed to Gitea',
    pull_request_refused: 'Gitea refused to open the pull request',
    publish_unverified: 'the pushed change could not be confirmed on Gitea',
    publish_target_default: 'the change would have gone to the default branch, which the bot never pushes to',
    publish_target_missing: 'the branch of this pull request no longer exists',
    publish_target_invalid: 'the branch name for the change is not acceptable',
    publish_secret_in_change: 'the change contained a secret of the service, so it was not pushed',
    publish_git_failed: 'a git operation while publishing the change failed',
    publish_gitea_failed: 'Gitea could not be asked about the branch or pull request',
    publish_failed: 'the change could not be published',
    fork_edits_not_allowed:
      "this pull request comes from a fork whose author does not allow edits by maintainers, and the bot never pushes a fork's commits into this repository, so the change was not published; the author can tick \"Allow edits from maintainers\" on the pull request and mention the bot again",
    fork_unreachable: "the bot cannot reach this pull request's fork (a private fork needs the bot added as a reader), so the change was not published",
    publish_protected_paths: 'commits in the workspace change CI definitions (such as .gitea/workflows/), which the bot may not publish in this repository, so the change was not published',
    publish_paths_all_withheld:
      'every file the change touched is one the bot may not commit in this repository (CI definitions such as .gitea/workflows/), so nothing was published; an operator can allow CI changes for this repository',
    input_too_large: 'what the agent was given (several replies together) is more than the 1,048,576 characters it can take at once; shorten it and mention the bot again',
    budget_task_tokens: 'it reached its limit of tokens per task',
    budget_task_turns: 'it reached its limit of agent turns per task',
    budget_task_wall_time: 'it reached its limit of agent time per task',
  },
  unexpectedError: 'an unexpected error stopped it',
  notPublished: ({ taskId }) => `giteabot: the changes of task ${taskId} were not published (change delivery is off on this service).`,
  withheldPaths: ({ taskId, paths, more, branch, patch }) =>
    `giteabot: task ${taskId} did not commit ${paths.map((p) => `\`${p}\``).join(', ')}${more > 0 ? ` and ${more} more` : ''}: the bot may not change CI definitions in this repository. The rest of the change was published as usual. These files are kept: branch \`${branch}\` in the service's workspace and the patch \`${patch}\` in its data directory; an operator can allow CI changes for this repository.`,
  stoppers: { operator: (name) => `operator ${name}`, anOperator: 'an operator', service: 'the service', someone: 'someone' },
  limits: enLimits,
  progress: enProgress,
};

const CATALOGUES: Record<Locale, Messages> = { zh, en };

export function messages(locale: Locale = DEFAULT_LOCALE): Messages {
  return CATALOGUES[locale];
}
