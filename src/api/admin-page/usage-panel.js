// The admin page's usage views: the usage section of the task list (the provider
// rate-limit hold, tokens per repository and per user over the last 7 days, the limits in force)
// and a task's own usage in its detail view. Their own file so the page's layout can change around
// them; they only need a container or the task detail's data.
import { api, el, time } from './operator-client.js';

const fmt = (n) => Number(n || 0).toLocaleString('en-US');
const minutes = (ms) => `${(Number(ms || 0) / 60000).toFixed(1)} min`;

function usageTable(id, firstColumn, rows) {
  const head = [firstColumn, 'tasks', 'refused', 'turns', 'input tokens', 'cached', 'output tokens', 'total tokens', 'agent time', 'diff bytes', 'budget stops'];
  return el('table', { id, className: 'usage' },
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...(rows.length
      ? rows.map((r) => el('tr', { dataset: { subject: r.subject, totalTokens: String(r.totalTokens) } },
        el('td', {}, r.subject),
        el('td', {}, fmt(r.tasks)),
        el('td', {}, fmt(r.refused)),
        el('td', {}, fmt(r.turns)),
        el('td', {}, fmt(r.inputTokens)),
        el('td', {}, fmt(r.cachedInputTokens)),
        el('td', {}, fmt(r.outputTokens)),
        el('td', {}, fmt(r.totalTokens)),
        el('td', {}, minutes(r.wallMs)),
        el('td', {}, fmt(r.diffBytes)),
        el('td', {}, fmt(r.budgetStops))))
      : [el('tr', {}, el('td', { colspan: head.length, className: 'muted' }, 'No usage in these days.'))])),
  );
}

function holdLine(hold) {
  if (!hold) return el('p', { className: 'muted' }, 'Provider rate limits: not reported.');
  const windows = [hold.rateLimits?.primary && `primary ${hold.rateLimits.primary.usedPercent}%`, hold.rateLimits?.secondary && `secondary ${hold.rateLimits.secondary.usedPercent}%`].filter(Boolean).join(' · ');
  return el('p', { id: 'provider-hold', dataset: { held: String(hold.held) } },
    hold.held
      ? el('span', { className: 'pill bad' }, `provider rate limit: new work held until ${time(hold.heldUntil)} (${hold.reason})`)
      : el('span', { className: 'pill good' }, 'provider rate limit: not held'),
    windows ? el('span', { className: 'muted' }, ` last reported: ${windows}`) : '');
}

function limitsLine(limits) {
  const c = limits.configured || {};
  const parts = [
    c.taskTokens && `${fmt(c.taskTokens)} tokens/task`,
    c.taskTurns && `${fmt(c.taskTurns)} turns/task`,
    c.taskWallMs && `${minutes(c.taskWallMs)}/task`,
    c.userTasksPerDay && `${fmt(c.userTasksPerDay)} tasks/user/day`,
    c.repoTokensPerDay && `${fmt(c.repoTokensPerDay)} tokens/repository/day`,
  ].filter(Boolean);
  const overrides = (limits.repositories || []).map((r) => `${r.repoKey}: ${Object.entries(r.limits).map(([k, v]) => `${k}=${v === null ? 'none' : fmt(v)}`).join(', ')}`);
  return el('p', { id: 'usage-limits', className: 'muted' },
    `Limits: ${parts.length ? parts.join(' · ') : 'none configured'}`,
    overrides.length ? ` · overrides: ${overrides.join('; ')}` : '');
}

/** Fills `container` with the usage section; errors are shown in it, never thrown. */
export async function renderUsagePanel(container) {
  try {
    const u = await api('/usage?days=7');
    container.replaceChildren(
      el('h2', {}, `Usage · last 7 days (${u.from} – ${u.to}, UTC)`),
      holdLine(u.providerHold),
      limitsLine(u.limits),
      el('h3', {}, 'Per repository'),
      usageTable('usage-repos', 'repository', u.byRepository),
      el('h3', {}, 'Per user'),
      usageTable('usage-users', 'user', u.byUser),
    );
  } catch (err) {
    container.replaceChildren(el('p', { className: 'error' }, `Usage could not be loaded: ${err.message}`));
  }
}

/** `42 s`, `3.5 min`: agent wall time at the scale a person reads it. */
const duration = (ms) => (Number(ms || 0) < 60_000 ? `${(Number(ms || 0) / 1000).toFixed(1)} s` : minutes(ms));

function diffText(diff) {
  if (!diff) return '—';
  return `${fmt(diff.bytes)} B · ${fmt(diff.files)} file${diff.files === 1 ? '' : 's'} · +${fmt(diff.added)} −${fmt(diff.removed)}`;
}

/**
 * A task's usage for its detail view: one row per turn that reported usage, then the task's sum (the
 * numbers the budgets are checked against); a line saying so when nothing was recorded yet.
 */
export function taskUsageSection(task, turns) {
  const rows = (turns || []).filter((t) => t.usage);
  const u = task.usage;
  if (!u && rows.length === 0) return el('p', { id: 'task-usage', className: 'muted' }, 'Usage: none recorded (no agent turn ended yet).');
  const head = ['turn', 'status', 'model', 'input tokens', 'cached', 'output tokens', 'total tokens', 'agent time', 'diff'];
  const cells = (x, diff) => [
    el('td', {}, x.model || '—'),
    el('td', {}, fmt(x.inputTokens)),
    el('td', {}, fmt(x.cachedInputTokens)),
    el('td', {}, fmt(x.outputTokens)),
    el('td', {}, fmt(x.totalTokens)),
    el('td', {}, duration(x.wallMs)),
    el('td', {}, diff),
  ];
  return el('table', { id: 'task-usage', className: 'usage' },
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...rows.map((t) => el('tr', { dataset: { turnKey: t.turnKey, totalTokens: String(t.usage.totalTokens) } },
      el('td', { className: 'mono' }, t.turnId || t.turnKey),
      el('td', {}, t.status),
      ...cells(t.usage, diffText(t.usage.diff))))),
    u ? el('tfoot', {}, el('tr', { className: 'total', dataset: { totalTokens: String(u.totalTokens), turns: String(u.turns) } },
      el('td', {}, 'task total'),
      el('td', {}, `${fmt(u.turns)} turn${u.turns === 1 ? '' : 's'}`),
      // The task's diff bytes are those of the changes it published, not the turns' diffs above.
      ...cells(u, u.diffBytes ? `${fmt(u.diffBytes)} B published` : '—'))) : null,
  );
}
