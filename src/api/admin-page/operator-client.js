// Shared by the admin page and the visualizer: the admin token (sessionStorage: gone when the tab
// closes), API calls, the live event stream, and small DOM helpers that only ever set text.

const TOKEN_KEY = 'ccweb.adminToken';
const OPERATOR_KEY = 'ccweb.operator';
export const API = '/api/gitea-workflow';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function operator() {
  return sessionStorage.getItem(OPERATOR_KEY) || '';
}

export function signIn(newToken, newOperator) {
  sessionStorage.setItem(TOKEN_KEY, newToken);
  if (newOperator) sessionStorage.setItem(OPERATOR_KEY, newOperator);
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** Why the login form is shown again (a rejected token), or null on a first visit. */
let authProblem = null;
/** The login form on screen, if any: a burst of 401s shows one form, not one per request. */
let pendingLogin = null;

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** fetch with the bearer token; JSON in and out. A 401 signs out and shows the login again. */
export async function api(path, { method = 'GET', body, raw = false } = {}) {
  const hadToken = Boolean(token());
  const headers = { authorization: `Bearer ${hadToken ? token() : ''}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${API}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (raw && res.ok) return res;
  const data = res.headers.get('content-type')?.includes('json') ? await res.json() : null;
  if (res.status === 401) {
    // Said on the login form that follows, so a mistyped token is not met by a silent empty form.
    authProblem = hadToken
      ? 'The service did not accept that admin token (HTTP 401). Check it against the service\'s CCWEB_ADMIN_TOKEN and sign in again.'
      : 'Sign in with the admin token.';
    signOut();
    window.dispatchEvent(new CustomEvent('ccweb:unauthorized'));
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

/** A request id for a control action: a UUID, also where crypto.randomUUID is unavailable (plain http). */
export function newRequestId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The header's live indicator (`#live`, both pages): its text and, through data-status, its colour. */
export function showLiveStatus(status) {
  const live = document.getElementById('live');
  if (!live) return;
  live.textContent = status;
  live.dataset.status = status;
}

/**
 * `fn` one run at a time: a call while it runs gets the running promise. A page's start is run so,
 * because a burst of 401s (page data and the live stream) must not sign in or open a stream twice.
 */
export function oneAtATime(fn) {
  let running = null;
  return () => {
    running ??= fn().finally(() => {
      running = null;
    });
    return running;
  };
}

/**
 * Live events. EventSource cannot send headers, so each (re)connection first fetches a one-time
 * ticket with the token; the token itself never appears in a URL. `onStatus` gets live /
 * reconnecting / offline; by default the header's indicator shows it.
 */
export function liveEvents(handlers, onStatus = showLiveStatus) {
  let source = null;
  let stopped = false;
  let retry = 1000;
  const connect = async () => {
    if (stopped || !token()) return;
    try {
      const { ticket } = await api('/events/ticket', { method: 'POST' });
      source = new EventSource(`${API}/events?ticket=${encodeURIComponent(ticket)}`);
      source.onopen = () => {
        retry = 1000;
        onStatus('live');
      };
      for (const [type, fn] of Object.entries(handlers)) {
        source.addEventListener(type, (ev) => fn(JSON.parse(ev.data)));
      }
      source.onerror = () => {
        // The ticket is spent: never let EventSource retry with it; reconnect with a new one.
        source.close();
        onStatus('reconnecting');
        setTimeout(connect, retry);
        retry = Math.min(retry * 2, 15000);
      };
    } catch {
      onStatus('offline');
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 15000);
    }
  };
  connect();
  return () => {
    stopped = true;
    source?.close();
  };
}

/** Creates an element; children are nodes or strings (always text, never HTML). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'onclick' || k === 'onchange' || k === 'onsubmit' || k === 'oninput') node.addEventListener(k.slice(2), v);
    else if (k === 'className') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** A link only for http(s) urls (the server filters too); anything else is plain text. */
export function link(url, text) {
  if (typeof url === 'string' && /^https?:\/\//i.test(url)) return el('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, text);
  return el('span', {}, text);
}

export function time(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  // ISO 8601 in UTC, to the second: the same text as the API and the logs, whatever the browser's locale.
  return Number.isNaN(d.getTime()) ? String(iso) : `${d.toISOString().slice(0, 19)}Z`;
}

/** The login form, shared by both pages; resolves once a token is stored. */
export function loginForm(container, title) {
  if (pendingLogin && container.contains(pendingLogin.form)) return pendingLogin.promise;
  let resolveLogin;
  const promise = new Promise((resolve) => {
    resolveLogin = resolve;
  });
  const tokenInput = el('input', { type: 'password', id: 'token', autocomplete: 'off', required: true, placeholder: 'admin token' });
  const opInput = el('input', { type: 'text', id: 'operator', autocomplete: 'username', placeholder: 'your login (for the audit log)', value: operator() });
  const problem = authProblem;
  authProblem = null;
  const form = el(
    'form',
    {
      className: 'login',
      onsubmit: (e) => {
        e.preventDefault();
        signIn(tokenInput.value.trim(), opInput.value.trim());
        pendingLogin = null;
        resolveLogin();
      },
    },
    el('h1', {}, title),
    problem ? el('p', { className: 'error', id: 'login-error', role: 'alert' }, problem) : null,
    el('label', { for: 'token' }, 'Admin token'),
    tokenInput,
    el('label', { for: 'operator' }, 'Operator'),
    opInput,
    el('button', { type: 'submit', id: 'sign-in' }, 'Sign in'),
    el('p', { className: 'hint' }, 'The token stays in this tab (sessionStorage) and is sent only as a bearer header.'),
  );
  pendingLogin = { form, promise };
  container.replaceChildren(form);
  tokenInput.focus();
  return promise;
}
