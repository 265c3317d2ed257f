// The admin page's security view (`#/security`): failed authentications as the service
// aggregates them (one row per kind, source and window: GET /security-events?category=authentication),
// mentions by people who may not ask the bot, which are not failed authentications (one row per
// author and UTC day: category=mention), and the security-level audit events (refused agent tool
// calls, operators' control actions: GET /audit?level=security), newest first. Each window's length
// comes from the answer (`windowMs`), never written here. Everything shown came from a request or a
// record, so it is set as text only (el()).
import { api, el, time } from './operator-client.js';

const KINDS = {
  invalid_signature: 'webhook: bad signature',
  invalid_form: 'webhook: bad signature (form body)',
  admin_unauthorized: 'admin API: wrong or missing token',
  comment_not_confirmed: 'webhook: signed, but Gitea contradicts the comment',
};
const MENTION_REASONS = {
  actor_not_authorized: 'no write access (or not allowed by CCWEB_ALLOW_USERS / CCWEB_DENY_USERS)',
  permission_check_failed: 'Gitea did not say whether they may write',
};
const ACTIONS = {
  'agent.gitea_refused': 'agent tool call refused by the gate',
};
const PAGE_SIZE = 25;
const AUDIT_LIMIT = 100;
const fmt = (n) => Number(n || 0).toLocaleString('en-US');
const state = { page: 1, mentionPage: 1 };

/** What the first request of a window looked like: `POST /api/… · ua … · event … · 123 B`. */
function sampleText(s) {
  const parts = [];
  if (s.method || s.path) parts.push([s.method, s.path].filter(Boolean).join(' '));
  if (s.event) parts.push(`event ${s.event}`);
  if (s.deliveryId) parts.push(`delivery ${s.deliveryId}`);
  if (s.userAgent) parts.push(`user agent ${s.userAgent}`);
  if (typeof s.bodyBytes === 'number') parts.push(`${fmt(s.bodyBytes)} B body`);
  return parts.join(' · ') || '—';
}

/** `10 min`, `1 day`, `2 h`: a window's length as a person reads it. */
export function windowText(ms) {
  const minutes = Math.round(Number(ms || 0) / 60_000);
  if (minutes > 0 && minutes % 1440 === 0) return minutes === 1440 ? '1 day' : `${minutes / 1440} days`;
  if (minutes >= 60 && minutes % 60 === 0) return `${minutes / 60} h`;
  return `${minutes} min`;
}

function pager(page, current, go) {
  const pages = Math.max(1, Math.ceil(page.total / page.pageSize));
  return el('div', { className: 'pager' },
    el('button', { disabled: current <= 1, onclick: () => go(current - 1) }, '← newer'),
    el('span', {}, ` page ${page.page} of ${pages} `),
    el('button', { disabled: current >= pages, onclick: () => go(current + 1) }, 'older →'),
  );
}

function eventsTable(page) {
  const head = [`window (${windowText(page.windowMs.authentication)})`, 'what failed', 'source', 'requests', 'first · last', 'first request'];
  return el('table', { id: 'security-events' },
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...(page.items.length
      ? page.items.map((e) => el('tr', { dataset: { testid: 'security-event', kind: e.kind, source: e.source, count: String(e.count) } },
        el('td', { className: 'time' }, `${time(e.windowStart)} – ${time(e.windowEnd)}`, e.open ? el('span', { className: 'pill bad open' }, 'ongoing') : ''),
        el('td', {}, KINDS[e.kind] || e.kind, el('div', { className: 'mono muted' }, e.kind)),
        el('td', { className: 'mono' }, e.source),
        el('td', { className: 'count' }, fmt(e.count)),
        el('td', { className: 'time' }, time(e.firstAt), el('br'), time(e.lastAt)),
        el('td', { className: 'sample mono' }, sampleText(e.sample))))
      : [el('tr', {}, el('td', { colspan: head.length, className: 'muted' }, 'No failed authentications recorded.'))])),
  );
}

/** `acme/widget issue #7 · comment 123`: where a refused mention was made. */
function mentionPlace(m) {
  const where = [m.resourceKey ? m.resourceKey.replace(/^[^:]*:/, '').replace(/:(issue|pull_request):/, (_, k) => ` ${k === 'issue' ? 'issue' : 'PR'} #`) : null, m.commentId ? `comment ${m.commentId}` : null].filter(Boolean);
  return `${m.at ? `${time(m.at)} ` : ''}${where.join(' · ')}`;
}

function mentionsTable(page) {
  const head = [`window (${windowText(page.windowMs.mention)}, UTC)`, 'author', 'mentions', 'listed as tasks', 'why refused', 'first · latest mention'];
  return el('table', { id: 'refused-mentions' },
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...(page.items.length
      ? page.items.map((e) => el('tr', { dataset: { testid: 'refused-mention', login: e.mention.login, count: String(e.count) } },
        el('td', { className: 'time' }, `${time(e.windowStart)} – ${time(e.windowEnd)}`, e.open ? el('span', { className: 'pill open' }, 'today') : ''),
        el('td', { className: 'mono' }, e.mention.login),
        el('td', { className: 'count' }, fmt(e.count)),
        el('td', { className: 'count' }, fmt(e.mention.tasks)),
        el('td', {}, Object.entries(e.mention.reasons).map(([r, n]) => `${MENTION_REASONS[r] || r}: ${fmt(n)}`).join(' · ')),
        el('td', { className: 'sample mono' }, mentionPlace(e.mention.first), el('br'), mentionPlace(e.mention.last))))
      : [el('tr', {}, el('td', { colspan: head.length, className: 'muted' }, 'No mention refused.'))])),
  );
}

function auditDetails(e) {
  const m = e.metadata || {};
  const parts = [];
  if (m.tool) parts.push(`tool ${m.tool}`);
  if (m.reason) parts.push(`reason: ${m.reason}`);
  if (m.repoKey) parts.push(`repository ${m.repoKey}`);
  if (m.owner && m.repo) parts.push(`${m.owner}/${m.repo}${m.index ? ` #${m.index}` : ''}`);
  if (m.path) parts.push(`path ${m.path}`);
  if (m.host) parts.push(`host ${m.host}`);
  if (e.errorCode) parts.push(`error ${e.errorCode}`);
  if (m.status) parts.push(`HTTP ${m.status}`);
  if (m.requestId) parts.push(`request ${m.requestId}`);
  const text = parts.join(' · ');
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
}

function auditTable(events) {
  const head = ['#', 'time', 'what', 'actor', 'task', 'transition', 'details'];
  return el('table', { id: 'security-audit' },
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...(events.length
      ? events.map((e) => el('tr', { className: 'level-security', dataset: { action: e.action, seq: String(e.seq) } },
        el('td', {}, String(e.seq)),
        el('td', { className: 'time' }, time(e.timestamp)),
        el('td', {}, ACTIONS[e.action] || e.action, ACTIONS[e.action] ? el('div', { className: 'mono muted' }, e.action) : ''),
        el('td', {}, e.actor),
        el('td', {}, e.taskId ? el('a', { href: `#/tasks/${encodeURIComponent(e.taskId)}`, className: 'mono' }, e.taskId) : '—'),
        el('td', {}, e.fromState || e.toState ? `${e.fromState ?? '∅'} → ${e.toState ?? ''}` : ''),
        el('td', { className: 'details' }, auditDetails(e))))
      : [el('tr', {}, el('td', { colspan: head.length, className: 'muted' }, 'No security-level audit events.'))])),
  );
}

function pendingTable(pending) {
  const head = ['received', 'comment', 'author', 'state', 'attempts', 'next attempt', 'last error'];
  return el('table', { id: 'pending-intake' },
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...(pending.items.length
      ? pending.items.map((p) => el('tr', { dataset: { testid: 'pending-intake', state: p.state, attempts: String(p.attempts) } },
        el('td', { className: 'time' }, time(p.receivedAt)),
        el('td', { className: 'mono' }, `${p.resourceKey} · comment ${p.commentId}`),
        el('td', {}, p.author),
        el('td', {}, p.state === 'gave_up' ? el('span', { className: 'pill bad' }, 'gave up: Replay it on Gitea') : 'waiting'),
        el('td', { className: 'count' }, fmt(p.attempts)),
        el('td', { className: 'time' }, p.nextAttemptAt ? time(p.nextAttemptAt) : '—'),
        el('td', { className: 'details mono' }, p.lastError)))
      : [el('tr', {}, el('td', { colspan: head.length, className: 'muted' }, 'No mention waits for Gitea.'))])),
  );
}

/** Fills `container` with the security view; errors are shown in it (a 401 signs out in api()). */
export async function renderSecurityPanel(container, rerender) {
  const [page, mentions, audit, pending] = await Promise.all([
    api(`/security-events?category=authentication&page=${state.page}&pageSize=${PAGE_SIZE}`),
    api(`/security-events?category=mention&page=${state.mentionPage}&pageSize=${PAGE_SIZE}`),
    api(`/audit?level=security&order=desc&limit=${AUDIT_LIMIT}`),
    api('/pending-intake'),
  ]);
  const kinds = Object.entries(page.byKind).map(([k, n]) => `${KINDS[k] || k}: ${fmt(n)}`).join(' · ');
  const authWindow = windowText(page.windowMs.authentication);
  container.replaceChildren(
    el('p', {}, el('a', { href: '#/' }, '← all tasks')),
    el('h2', {}, 'Security · failed authentications'),
    el('p', { id: 'security-summary', className: page.requests ? '' : 'muted', dataset: { requests: String(page.requests) } },
      page.requests ? `${fmt(page.requests)} failed requests in ${fmt(page.total)} source windows — ${kinds}` : 'No failed authentications recorded.',
      el('span', { className: 'muted' }, ` (kept for CCWEB_SECURITY_EVENT_RETENTION_DAYS; one row per kind, source and ${authWindow} window)`)),
    eventsTable(page),
    pager(page, state.page, (n) => { state.page = n; rerender(); }),
    el('h2', {}, 'Mentions refused: no write access'),
    el('p', { id: 'mentions-summary', className: 'muted', dataset: { mentions: String(mentions.requests) } },
      mentions.requests
        ? `${fmt(mentions.requests)} mention${mentions.requests === 1 ? '' : 's'} refused. `
        : 'No mention refused. ',
      `Signed comments by people who may not ask the bot: not failed authentications. The first few of an author's day are listed as tasks in "rejected"; one row per author and ${windowText(mentions.windowMs.mention)} window (UTC).`),
    mentionsTable(mentions),
    pager(mentions, state.mentionPage, (n) => { state.mentionPage = n; rerender(); }),
    el('h2', {}, `Mentions waiting for Gitea (${fmt(pending.total)})`),
    el('p', { className: 'muted' }, 'Gitea could not yet confirm the comment or its author\'s permission (an error or a timeout): nothing runs until it does; asked again with backoff (CCWEB_INTAKE_CONFIRM_ATTEMPTS).'),
    pendingTable(pending),
    el('h2', {}, `Security-level audit events (newest ${AUDIT_LIMIT})`),
    el('p', { className: 'muted' }, 'Agent tool calls the gate refused, operators\' control actions, webhooks naming a foreign repository.'),
    auditTable(audit.events),
  );
}
