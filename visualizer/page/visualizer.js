// The state visualizer: each machine's statechart, drawn from the definition and layout the
// service serializes from the machines themselves (GET /machines), with a live actor's current
// state and its path so far (its `<kind>.transition` audit events) highlighted, updated over SSE.
// Selection lives in the hash (`#actor=task:<id>` or `#machine=<id>`) so views can be linked.
import { api, el, liveEvents, loginForm, oneAtATime, time, token } from '/admin/operator-client.js';

const SVG = 'http://www.w3.org/2000/svg';
const main = document.getElementById('main');
let machines = [];
let selected = { machineId: null, actorId: null, kind: null };
let actorView = null;
let refreshTimer = null;
let machineKinds = {};
let resizeTimer = null;
// Fit the chart to the panel's width (default; never enlarged, never below MIN_FIT so labels stay
// readable — the panel scrolls instead) or draw it at 100 %.
let fit = true;
const MIN_FIT = 0.7;
/** Space the layout keeps at its top for a title; the page shows title and description as HTML. */
const LAYOUT_TOP = 44;

window.addEventListener('ccweb:unauthorized', () => start());
window.addEventListener('hashchange', () => fromHash().then(draw));
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    const chart = document.getElementById('chart');
    const machine = machines.find((m) => m.id === selected.machineId);
    const drawing = chart?.querySelector('svg');
    if (chart && machine && drawing) size(drawing, machine.layout, chart);
  }, 100);
});

const start = oneAtATime(doStart);

let stopLive = null;

async function doStart() {
  stopLive?.();
  if (!token()) await loginForm(main, 'ccweb-gitea · state visualizer');
  machines = (await api('/machines')).machines;
  stopLive = liveEvents({
    transition: (t) => {
      if (t.actorId === selected.actorId || t.kind === selected.kind) {
        clearTimeout(refreshTimer);
        refreshTimer = setTimeout(() => fromHash().then(draw), 120);
      }
    },
  });
  await fromHash();
  draw();
}

async function fromHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const actorId = params.get('actor');
  actorView = null;
  if (actorId) {
    try {
      actorView = await api(`/actors/${encodeURIComponent(actorId)}`);
      selected = { machineId: actorView.actor.machineId, actorId, kind: actorView.actor.kind };
    } catch {
      selected = { ...selected, actorId: null };
    }
  } else {
    // The kind filter comes only from the hash: switching machines writes the new machine's kind
    // there (or none), so a filter chosen for one machine never sticks to the next.
    selected = { machineId: params.get('machine') || selected.machineId || landingMachine(), actorId: null, kind: params.get('kind') || null };
  }
  const list = await api(`/actors?${selected.kind ? `kind=${encodeURIComponent(selected.kind)}&` : ''}limit=200`);
  selected.kinds = list.kinds;
  selected.actors = list.items;
  machineKinds = list.machineKinds || {};
}

/** The task machine is what operators come for; any other machine if there is none. */
function landingMachine() {
  return (machines.find((m) => m.id === 'task') || machines[0])?.id;
}

/** The hash that shows a machine, with its actors listed (their kind, when the store has any). */
function machineHash(machineId) {
  const kind = machineKinds[machineId];
  return `machine=${encodeURIComponent(machineId)}${kind ? `&kind=${encodeURIComponent(kind)}` : ''}`;
}

/**
 * How a final state ended, for its colour: succeeded (green), failed or stopped (red), or neither —
 * a mention that never became work (grey). By the state's name: the machines name their ends so.
 */
function outcomeOf(stateId) {
  const name = String(stateId).split('.').at(-1);
  if (/^(succeeded|done|confirmed|released|completed)/.test(name)) return 'outcome-good';
  if (/^(failed|aborted|cancelled|error|expired|exhausted|timed_out)/.test(name)) return 'outcome-bad';
  return 'outcome-neutral';
}

function draw() {
  const machine = machines.find((m) => m.id === selected.machineId) || machines[0];
  if (!machine) {
    main.replaceChildren(el('p', {}, 'No machines.'));
    return;
  }
  const kindSelect = el(
    'select',
    { id: 'actor-kind', onchange: (e) => { location.hash = `${e.target.value ? `kind=${encodeURIComponent(e.target.value)}&` : ''}machine=${encodeURIComponent(machine.id)}`; } },
    el('option', { value: '' }, 'all kinds'),
    ...(selected.kinds || []).map((k) => el('option', { value: k, selected: k === selected.kind }, k)),
  );
  // Live: the actor still runs (status active); one that reached a final state is listed apart.
  const actors = (selected.actors || []).filter((a) => a.status === 'active');
  const finished = (selected.actors || []).filter((a) => a.status !== 'active');
  const actorItem = (a) => el('li', {},
        el('a', {
          href: `#actor=${encodeURIComponent(a.actorId)}`,
          className: a.actorId === selected.actorId ? 'actor selected' : 'actor',
          'aria-current': a.actorId === selected.actorId ? 'true' : undefined,
          dataset: { actorId: a.actorId, state: a.state },
        },
        el('span', { className: 'actor-id mono' }, a.actorId),
        el('span', { className: `state s-${a.state}` }, a.state)));
  // A list, not a <select>: an actor id is long (`verifier:gitea-task-…`) and must wrap, not be cut.
  const actorList = el('ul', { id: 'actor-list', className: 'actor-list', 'aria-label': 'live actors' },
    actors.length ? actors.map(actorItem) : el('li', { className: 'muted' }, 'No live actors of this kind.'),
  );
  const finishedList = finished.length
    ? el('details', { id: 'finished-actors' },
      el('summary', { className: 'muted' }, `Finished actors (${finished.length})`),
      el('ul', { id: 'finished-actor-list', className: 'actor-list', 'aria-label': 'finished actors' }, finished.map(actorItem)))
    : null;
  const side = el('div', { className: 'side' },
    el('div', { className: 'machines' }, el('div', { className: 'muted' }, 'Machines'),
      ...machines.map((m) => el('button', { 'aria-pressed': String(m.id === machine.id), dataset: { machine: m.id }, onclick: () => { location.hash = machineHash(m.id); } }, m.id))),
    el('label', { for: 'actor-kind', className: 'muted' }, 'Live actors'),
    kindSelect,
    actorList,
    finishedList,
    actorView ? actorPanel(actorView) : el('p', { className: 'muted' }, 'Select an actor to see its current state and its path.'),
  );
  const zoom = el('button', { id: 'zoom', onclick: () => { fit = !fit; draw(); } }, fit ? 'Zoom: fit width' : 'Zoom: 100 %');
  const chart = el('div', { className: 'chart', id: 'chart' });
  const drawing = drawMachine(machine, actorView && actorView.actor.machineId === machine.id ? actorView : null);
  chart.append(drawing);
  const head = el('div', { className: 'machine-head' },
    el('div', {},
      el('h2', { id: 'machine-title' }, machine.id),
      machine.graph.description ? el('p', { id: 'machine-description', className: 'muted' }, machine.graph.description) : null),
    el('div', { className: 'toolbar' }, zoom));
  main.replaceChildren(side, el('div', { className: 'chart-column' }, head, chart));
  size(drawing, machine.layout, chart);
  chart.querySelector('g.state.current')?.scrollIntoView({ block: 'nearest', inline: 'nearest' });
}

/** Fit: the panel's width, never enlarged and never below MIN_FIT; otherwise 100 %. */
function size(svgNode, layout, chart) {
  const height = layout.height - LAYOUT_TOP;
  const available = chart.clientWidth - 2;
  const scale = fit ? Math.max(MIN_FIT, Math.min(1, available / layout.width)) : 1;
  svgNode.setAttribute('width', String(Math.round(layout.width * scale)));
  svgNode.setAttribute('height', String(Math.round(height * scale)));
  svgNode.dataset.scale = scale.toFixed(3);
}

function actorPanel(v) {
  return el('div', {},
    el('p', { className: 'current-state' }, 'Current: ', el('span', { className: `state s-${v.actor.state}`, id: 'current-state', dataset: { state: v.actor.state } }, v.actor.state)),
    el('p', { className: 'muted' }, `${v.actor.actorId} · version ${v.actor.stateVersion} · ${v.actor.status}`),
    v.actor.taskId ? el('p', {}, el('a', { href: `/admin#/tasks/${encodeURIComponent(v.actor.taskId)}` }, 'open task in admin')) : null,
    el('ol', { className: 'path', id: 'path' }, ...v.path.map((p) => el('li', {}, `${p.from ?? '∅'} → ${p.to}`, p.event ? ` (${p.event})` : '', el('span', { className: 'muted' }, ` ${p.by} · ${time(p.timestamp)}`)))),
  );
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Draws the layout the server computed; classes mark the actor's current state and path. */
function drawMachine(machine, view) {
  const { layout, graph } = machine;
  const current = view?.actor.state ?? null;
  const visited = new Set((view?.path ?? []).flatMap((p) => [p.from, p.to]).filter(Boolean));
  const taken = new Set((view?.path ?? []).filter((p) => p.from && p.to).map((p) => `${p.from}>${p.to}`));
  const root = svg('svg', { width: layout.width, height: layout.height - LAYOUT_TOP, viewBox: `0 ${LAYOUT_TOP} ${layout.width} ${layout.height - LAYOUT_TOP}`, 'data-machine': machine.id, role: 'img', 'aria-label': `${machine.id} statechart` });
  const defs = svg('defs');
  // Fixed-size arrowheads: a highlighted (thicker) edge must not get a bigger arrow.
  const marker = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' });
  marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z' }));
  defs.append(marker);
  root.append(defs);
  const invokes = new Map(graph.nodes.map((n) => [n.id, n.invokes]));
  for (const n of layout.nodes.filter((n) => n.type === 'compound' || n.type === 'parallel')) {
    const g = svg('g', { class: 'compound', 'data-state': n.id });
    g.append(svg('rect', { x: n.x, y: n.y, width: n.w, height: n.h, rx: 10 }), svg('text', { x: n.x + 8, y: n.y + 15, 'font-size': 11 }, n.label));
    root.append(g);
  }
  if (layout.initial) {
    root.append(svg('circle', { cx: layout.initial.x, cy: layout.initial.y, r: 5, fill: '#333' }));
    root.append(svg('path', { d: layout.initial.path, stroke: '#333', fill: 'none', 'marker-end': 'url(#arrow)' }));
  }
  for (const e of layout.edges) {
    const cls = ['edge', e.kind === 'back' ? 'back' : '', taken.has(`${e.source}>${e.target}`) ? 'taken' : ''].filter(Boolean).join(' ');
    const g = svg('g', { class: cls, 'data-source': e.source, 'data-target': e.target });
    g.append(svg('path', { d: e.path, 'marker-end': 'url(#arrow)' }));
    e.labels.forEach((label, i) => g.append(svg('text', { x: e.labelX, y: e.labelY + 10 + i * 13 }, label)));
    root.append(g);
  }
  for (const n of layout.nodes.filter((n) => n.type !== 'compound' && n.type !== 'parallel')) {
    const cls = ['state', n.type === 'final' ? `final ${outcomeOf(n.id)}` : '', n.id === current ? 'current' : visited.has(n.id) ? 'visited' : ''].filter(Boolean).join(' ');
    const g = svg('g', { class: cls, 'data-state': n.id });
    g.append(svg('rect', { x: n.x, y: n.y, width: n.w, height: n.h, rx: 8 }));
    g.append(svg('text', { class: 'name', x: n.x + n.w / 2, y: n.y + n.h / 2 + 4.5, 'text-anchor': 'middle' }, n.label));
    const inv = invokes.get(n.id) || [];
    if (inv.length) g.append(svg('text', { class: 'invoke', x: n.x + n.w / 2, y: n.y + n.h + 12, 'text-anchor': 'middle' }, `invoke ${inv.map((i) => i.src).join(', ')}`));
    root.append(g);
  }
  return root;
}

start();
