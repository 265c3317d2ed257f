// The admin page: overview, task list with filters, task timeline, and the operator controls.
// Routing by location.hash: `#/` (tasks), `#/tasks/<taskId>` and `#/security` (security-panel.js).
import { api, ApiError, el, link, liveEvents, loginForm, newRequestId, oneAtATime, operator, signOut, time, token } from './operator-client.js';
import { renderSecurityPanel } from './security-panel.js';
import { renderUsagePanel, taskUsageSection } from './usage-panel.js';

const TASK_STATES = [
  'received', 'queued', 'preparing', 'running', 'waiting_user', 'verifying_reply', 'retry_wait', 'blocked_workspace',
  'aborting', 'succeeded', 'succeeded_with_rest_fallback', 'failed', 'failed_reply', 'cancelled', 'aborted',
  'ignored', 'duplicate', 'rejected',
];
// Which controls a task state allows (the server decides; this only hides buttons that would 409).
const TASK_CONTROLS = {
  cancel: ['queued', 'waiting_user', 'blocked_workspace'],
  abort: ['running'],
  unblock: ['blocked_workspace'],
};

/** States of a mention that never became work: no change section. */
const NEVER_RAN = ['ignored', 'duplicate', 'rejected'];

const main = document.getElementById('main');
const header = document.getElementById('status');
const filters = { repoKey: '', state: '', page: 1 };
let stopLive = null;
let refreshTimer = null;

window.addEventListener('ccweb:unauthorized', () => start());
window.addEventListener('hashchange', () => render());

const start = oneAtATime(doStart);

async function doStart() {
  stopLive?.();
  if (!token()) await loginForm(main, 'ccweb-gitea · operators');
  stopLive = liveEvents({
    transition: (t) => {
      if (t.kind === 'task') scheduleRefresh(t.taskId);
    },
    control: () => scheduleRefresh(null),
  });
  render();
}

/** Live events arrive in bursts: refresh at most every 150 ms. */
function scheduleRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => render(true), 150);
}

async function render(quiet = false) {
  const m = /^#\/tasks\/(.+)$/.exec(location.hash);
  try {
    await renderOverview();
    if (m) await renderTask(decodeURIComponent(m[1]), quiet);
    else if (location.hash === '#/security') await renderSecurityPanel(main, () => render(true));
    else await renderTasks();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;
    main.replaceChildren(el('p', { className: 'error' }, `Could not load: ${err.message}`));
  }
}

async function renderOverview() {
  const o = await api('/overview');
  const paused = o.control.globalPaused;
  header.replaceChildren(
    el('span', { className: `pill ${paused ? 'bad' : 'good'}`, id: 'pause-state' }, paused ? `paused: ${o.control.pauseReason || ''}` : 'running'),
    el('span', {}, ` ${o.running} running · ${o.queued} queued `),
    // The scheduler's cap (CCWEB_MAX_CONCURRENT_TASKS): queued tasks may wait for a slot, not for their repository.
    o.concurrency
      ? el('span', { className: `pill ${o.concurrency.waiting ? 'bad' : 'good'}`, id: 'slots', title: o.concurrency.waiting ? `${o.concurrency.waiting} queued task(s) wait for a free slot` : '' },
        `${o.concurrency.busy}/${o.concurrency.limit ?? '?'} slots busy${o.concurrency.waiting ? ` · ${o.concurrency.waiting} waiting` : ''}`)
      : '',
    // Several nodes on one database (CCWEB_DATABASE_URL): which writes, which wait, which went quiet.
    o.nodes && o.nodes.length > 1
      ? el('span', {
          className: `pill ${o.nodes.some((n) => n.stale) ? 'bad' : 'good'}`,
          id: 'nodes',
          title: o.nodes.map((n) => `${n.nodeId}${n.self ? ' (this node)' : ''}: ${n.role}${n.stale ? ', no heartbeat since' : ', heartbeat'} ${n.heartbeatAt} · ${n.version}`).join('\n'),
        }, `${o.nodes.filter((n) => n.role !== 'stopped').length} nodes${o.nodes.some((n) => n.stale) ? ` · ${o.nodes.filter((n) => n.stale).length} silent` : ''}`)
      : '',
    // CCWEB_AGENT_ISOLATION=off: said on every page, as on every start.
    o.agentIsolation?.mode === 'off'
      ? el('span', { className: 'pill bad', id: 'isolation-state', title: o.agentIsolation.warning || '' }, 'agent isolation OFF')
      : '',
    paused
      ? el('button', { id: 'resume', onclick: () => control('/control/resume', 'resume the service') }, 'Resume')
      : el('button', { id: 'pause', onclick: () => control('/control/pause', 'pause the service') }, 'Pause'),
    el('a', { href: '#/security', id: 'security-link' }, 'Security'),
    el('a', { href: '/visualizer' }, 'Visualizer'),
    el('button', { className: 'link', onclick: () => { signOut(); start(); } }, 'Sign out'),
  );
  header.dataset.repos = JSON.stringify(o.repos.map((r) => r.repoKey));
  renderOverview.last = o;
}

async function renderTasks() {
  const o = renderOverview.last;
  const q = new URLSearchParams({ page: String(filters.page), pageSize: '25' });
  if (filters.repoKey) q.set('repoKey', filters.repoKey);
  if (filters.state) q.set('state', filters.state);
  const list = await api(`/tasks?${q}`);
  const repoSelect = el(
    'select',
    { id: 'filter-repo', onchange: (e) => { filters.repoKey = e.target.value; filters.page = 1; render(); } },
    el('option', { value: '' }, 'all repositories'),
    ...(o?.repos ?? []).map((r) => el('option', { value: r.repoKey, selected: r.repoKey === filters.repoKey }, r.repoKey)),
  );
  const stateSelect = el(
    'select',
    { id: 'filter-state', onchange: (e) => { filters.state = e.target.value; filters.page = 1; render(); } },
    el('option', { value: '' }, 'all states'),
    ...TASK_STATES.map((s) => el('option', { value: s, selected: s === filters.state }, s)),
  );
  const rows = list.items.map((t) =>
    el(
      'tr',
      { dataset: { testid: 'task-row', taskId: t.taskId, state: t.state } },
      el('td', {}, el('a', { href: `#/tasks/${encodeURIComponent(t.taskId)}`, className: 'mono' }, t.taskId)),
      el('td', {}, el('span', { className: `state s-${t.state}` }, t.state)),
      el('td', {}, t.repoKey),
      // The Gitea thread the mention came from.
      el('td', {}, link(t.commentUrl, `${t.resource.kind === 'pull_request' ? 'PR' : 'issue'} #${t.resource.number}`)),
      el('td', { className: 'pull-request' }, t.pullRequest ? link(t.pullRequest.url, `#${t.pullRequest.number}`) : ''),
      el('td', {}, t.author),
      el('td', { className: 'instruction' }, t.instruction),
      el('td', { className: 'error-code' },
        t.error ? [el('span', { className: 'mono' }, t.error), t.errorMeaning ? el('div', { className: 'muted meaning' }, t.errorMeaning) : ''] : '',
        t.stop ? el('div', { className: 'stop meaning' }, stopText(t.stop, false)) : ''),
      el('td', { className: 'time' }, time(t.updatedAt)),
    ),
  );
  const pages = Math.max(1, Math.ceil(list.total / list.pageSize));
  main.replaceChildren(
    // The task list first: it is what an operator comes for; repositories and usage below it.
    el('section', {},
      el('h2', {}, 'Tasks'),
      el('div', { className: 'filters' },
        repoSelect,
        stateSelect,
        el('span', { className: 'muted', id: 'task-count' },
          `${list.total} tasks`,
          // Finished tasks leave the list for the on-disk archive (CCWEB_ARCHIVE_AFTER_MINUTES); they open by id.
          list.archivedTasks ? ` · ${list.archivedTasks} archived (not listed; open by id)` : ''),
        el('form', { id: 'open-task', onsubmit: (e) => {
          e.preventDefault();
          const id = e.target.elements.taskId.value.trim();
          if (id) location.hash = `#/tasks/${encodeURIComponent(id)}`;
        } }, el('input', { name: 'taskId', className: 'mono', placeholder: 'open a task by id', 'aria-label': 'open a task by id' }))),
      el('table', { id: 'tasks' },
        el('thead', {}, el('tr', {}, ...['task', 'state', 'repository', 'thread', 'pull request', 'author', 'instruction', 'error or stop', 'updated'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: 9, className: 'muted' }, 'No tasks.'))),
      ),
      el('div', { className: 'pager' },
        el('button', { disabled: filters.page <= 1, onclick: () => { filters.page -= 1; render(); } }, '← newer'),
        el('span', {}, ` page ${list.page} of ${pages} `),
        el('button', { disabled: filters.page >= pages, onclick: () => { filters.page += 1; render(); } }, 'older →'),
      ),
      el('h2', {}, 'Repositories'),
      repoTable(o),
      usageSection(),
    ),
  );
}

/** The usage section (usage-panel.js), filled once its data arrives. */
function usageSection() {
  const section = el('section', { id: 'usage' });
  void renderUsagePanel(section);
  return section;
}

function repoTable(o) {
  if (!o || !o.repos.length) return el('p', { className: 'muted' }, 'No repositories yet.');
  const leases = new Map(o.leases.map((l) => [l.repoKey, l]));
  return el('table', { id: 'repos' },
    el('thead', {}, el('tr', {}, ...['repository', 'status', 'running', 'queued', 'lease', ''].map((h) => el('th', {}, h)))),
    el('tbody', {}, ...o.repos.map((r) => {
      const lease = leases.get(r.repoKey);
      const path = `/repos/${encodeURIComponent(r.repoKey)}`;
      return el('tr', { dataset: { repo: r.repoKey } },
        el('td', {}, r.repoKey),
        el('td', {}, el('span', { className: `pill ${r.status === 'active' ? 'good' : 'bad'}` }, r.status)),
        el('td', {}, String(r.running)),
        el('td', {}, String(r.queued)),
        el('td', { className: 'mono' }, lease && lease.state === 'held' ? `${lease.taskId} until ${time(lease.expiresAt)}` : '—'),
        el('td', {}, r.status === 'unregistered' ? '' : r.status === 'disabled'
          ? el('button', { onclick: () => control(`${path}/enable`, `enable ${r.repoKey}`) }, 'Enable')
          : el('button', { onclick: () => control(`${path}/disable`, `disable ${r.repoKey}`) }, 'Disable')),
      );
    })),
  );
}

async function renderTask(taskId, quiet) {
  const d = await api(`/tasks/${encodeURIComponent(taskId)}`);
  const t = d.task;
  const c = d.correlation;
  const controls = Object.entries(TASK_CONTROLS)
    .filter(([, states]) => states.includes(t.state))
    .map(([name]) => el('button', { id: `task-${name}`, className: name === 'unblock' ? '' : 'danger', onclick: () => control(`/tasks/${encodeURIComponent(taskId)}/${name}`, `${name} task ${taskId}`) }, name[0].toUpperCase() + name.slice(1)));
  const chain = el('ol', { className: 'chain', id: 'correlation' },
    el('li', {}, el('b', {}, 'delivery '), el('span', { className: 'mono' }, c.deliveryKey)),
    el('li', {}, el('b', {}, 'task '), el('span', { className: 'mono' }, c.taskId), ' · trigger ', link(c.trigger.url, `comment ${c.trigger.commentId}`)),
    el('li', {}, el('b', {}, 'session '), el('span', { className: 'mono' }, c.sessionKey), ' · thread ', el('span', { className: 'mono' }, c.threadId || '—')),
    el('li', {}, el('b', {}, 'turns '), c.turns.length ? c.turns.map((x) => el('span', { className: 'mono tag' }, `${x.turnId || x.turnKey} (${x.kind}, ${x.status})`)) : '—'),
    el('li', {}, el('b', {}, 'comments '), c.comments.length ? c.comments.map((x) => el('span', { className: 'tag' }, link(x.url, `${x.kind} #${x.commentId ?? '?'} (${x.status})`))) : '—'),
  );
  const timeline = el('table', { id: 'timeline' },
    el('thead', {}, el('tr', {}, ...['#', 'time', 'action', 'actor', 'transition', 'error', 'details'].map((h) => el('th', {}, h)))),
    el('tbody', {}, ...d.audit.map((e) => el('tr', { className: e.level && e.level !== 'info' ? `level-${e.level}` : '', dataset: { action: e.action, taskId: e.taskId || '', actorId: e.actorId || '' } },
      el('td', {}, String(e.seq)),
      el('td', { className: 'time' }, time(e.timestamp)),
      el('td', { className: 'mono' }, e.action),
      el('td', {}, e.actor),
      el('td', {}, e.fromState || e.toState ? `${e.fromState ?? '∅'} → ${e.toState ?? ''}` : ''),
      el('td', {}, e.errorCode || ''),
      el('td', { className: 'details' }, details(e)),
    ))),
  );
  const focus = document.activeElement?.id;
  replaceMain(
    el('p', {}, el('a', { href: '#/' }, '← all tasks')),
    el('h2', {}, 'Task ', el('span', { className: 'mono' }, t.taskId), ' ', el('span', { className: `state s-${t.state}`, id: 'task-state', dataset: { state: t.state } }, t.state)),
    el('div', { className: 'controls' }, controls, el('a', { href: `/visualizer#actor=${encodeURIComponent(`task:${t.taskId}`)}` }, 'show in visualizer'), el('button', { className: 'link', onclick: () => downloadAudit(t.taskId) }, 'download audit (NDJSON)')),
    el('dl', { className: 'facts' },
      ...fact('repository', t.repoKey), ...fact('resource', `${t.resource.kind} #${t.resource.number}`), ...fact('author', t.author),
      ...fact('attempt', String(t.attempt)), ...fact('error', errorFact(d.error || t.errorCode, d.errorMeaning)), ...fact('stopped', d.stop ? el('span', { id: 'task-stop', dataset: { kind: d.stop.kind, outcome: d.stop.outcome } }, stopText(d.stop, true)) : '—'),
      ...fact('created', time(t.createdAt)), ...fact('updated', time(t.updatedAt)),
    ),
    el('h3', {}, 'Instruction'),
    el('pre', { className: 'instruction-full' }, t.instruction),
    // A mention that never ran (rejected, ignored, a duplicate) has no change to speak of.
    NEVER_RAN.includes(t.state) ? null : el('h3', {}, 'Change'),
    NEVER_RAN.includes(t.state) ? null : changeSection(d.publish, d.finished),
    el('h3', {}, 'Usage'),
    taskUsageSection(t, d.turns),
    el('h3', {}, 'Correlation'),
    chain,
    d.errors.length ? el('h3', {}, 'Errors') : null,
    d.errors.length ? el('ul', { className: 'errors' }, d.errors.map((e) => el('li', {}, `${e.errorCode ?? e.action}${e.action ? ` (${e.action})` : ''}`))) : null,
    el('h3', {}, `Timeline (${d.audit.length} events)`),
    timeline,
  );
  if (focus) document.getElementById(focus)?.focus();
  if (!quiet) window.scrollTo(0, 0);
}

/** An error code with its one-line meaning when the service explains it. */
function errorFact(code, meaning) {
  if (!code) return '—';
  return [el('span', { className: 'mono', id: 'task-error' }, code), meaning ? el('span', { className: 'muted' }, ` — ${meaning}`) : ''];
}

/** How a stop ended, after who stopped it (task-stop.ts's outcomes). */
const STOP_OUTCOMES = {
  stopped_at_restart: ' The service restarted while stopping it; nothing ran after that.',
  timed_out: ' The work in flight did not confirm it had stopped in time (abort_timeout).',
  stopping: ' Stopping…',
};

/** `Stopped by operator alice: “duplicate” at …`: who stopped a task, why, and how the stop ended. */
function stopText(s, withTime) {
  const who = s.kind === 'operator' ? `operator ${s.login || s.by}` : s.kind === 'stop_comment' ? `a stop comment by @${s.login || s.by}` : 'the service';
  return `Stopped by ${who}${s.reason ? `: “${s.reason}”` : ''}${withTime && s.at ? ` at ${time(s.at)}` : ''}.${STOP_OUTCOMES[s.outcome] || ''}`;
}

/** `3 files · +10 −2 · 1,234 B`: the size of a published change. */
function diffFact(diff) {
  if (!diff) return '—';
  const n = (x) => Number(x || 0).toLocaleString('en-US');
  return `${n(diff.files)} file${diff.files === 1 ? '' : 's'} · +${n(diff.added)} −${n(diff.removed)} · ${n(diff.bytes)} B`;
}

/**
 * What the task delivered: the pull request and branch to review, or where a refused change is kept.
 * A finished task that published nothing says so for good; one still at work says "yet".
 */
function changeSection(p, finished) {
  if (!p) return el('p', { className: 'muted', id: 'change', dataset: { status: 'none' } }, finished ? 'Nothing was published.' : 'Nothing published yet.');
  if (p.status === 'nothing_to_publish' && !p.branch && !(p.commits && p.commits.length)) {
    return el('p', { className: 'muted', id: 'change', dataset: { status: p.status } }, 'Nothing was published: the task left no change.');
  }
  const short = (sha) => (sha ? sha.slice(0, 10) : '—');
  return el('dl', { className: 'facts', id: 'change', dataset: { status: p.status } },
    ...fact('status', `${p.status}${p.mode ? ` (${p.mode})` : ''}`),
    ...fact('pull request', p.pullRequest ? link(p.pullRequest.url, `#${p.pullRequest.number}`) : '—'),
    ...fact('branch', p.branch ? el('span', { className: 'mono' }, p.branch) : '—'),
    ...fact('head', el('span', { className: 'mono' }, short(p.headSha))),
    ...fact('commits', p.commits?.length ? el('span', { className: 'mono' }, p.commits.map(short).join(' ')) : '—'),
    ...(p.diff ? fact('diff', el('span', { id: 'change-diff' }, diffFact(p.diff))) : []),
    ...(p.kept ? fact('kept', el('span', { className: 'mono' }, `${p.kept.branch} · ${p.kept.patchFile}`)) : []),
    ...(p.errorCode ? fact('publish error', `${p.errorCode}${p.message ? `: ${p.message}` : ''}`) : []),
  );
}

/** Like replaceChildren, but skips the null/false of optional sections (replaceChildren would print them). */
function replaceMain(...children) {
  main.replaceChildren(...children.filter((c) => c !== null && c !== undefined && c !== false));
}

function fact(k, v) {
  return [el('dt', {}, k), el('dd', {}, v)];
}

function details(e) {
  const m = { ...(e.metadata || {}) };
  const parts = [];
  if (m.event && typeof m.event === 'object') {
    parts.push(`event ${m.event.type}`);
    delete m.event;
  }
  if (m.reason) {
    parts.push(`reason: ${m.reason}`);
    delete m.reason;
  }
  for (const k of ['deliveryId', 'turnId', 'commentId', 'actorId']) if (e[k]) parts.push(`${k} ${e[k]}`);
  const rest = JSON.stringify(m);
  if (rest !== '{}') parts.push(rest.length > 200 ? `${rest.slice(0, 199)}…` : rest);
  return parts.join(' · ');
}

/** Every control: a reason prompt, a fresh requestId, and the server's answer shown as a notice. */
async function control(path, what) {
  const reason = window.prompt(`Reason to ${what}:`);
  if (reason === null) return;
  if (!reason.trim()) return notice('A reason is required.', true);
  let who = operator();
  if (!who) {
    who = window.prompt('Your login (recorded in the audit log):') || '';
    sessionStorage.setItem('ccweb.operator', who);
  }
  try {
    const res = await api(path, { method: 'POST', body: { requestId: newRequestId(), operator: who, reason: reason.trim() } });
    notice(res.toState ? `Done: ${res.fromState} → ${res.toState}` : 'Done.');
  } catch (err) {
    const body = err.body || {};
    notice(body.error === 'illegal_state' ? `Not possible in state ${body.state}.` : `Failed: ${body.error || err.message}`, true);
  }
  render(true);
}

function notice(text, bad = false) {
  const n = document.getElementById('notice');
  n.textContent = text;
  n.className = bad ? 'notice bad' : 'notice';
  n.hidden = false;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => (n.hidden = true), 6000);
}

async function downloadAudit(taskId) {
  const res = await api(`/audit?taskId=${encodeURIComponent(taskId)}&format=ndjson`, { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = el('a', { href: url, download: `audit-${taskId}.ndjson` });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

start();
