/**
 * Gitea's web UI as a signed-in user, for what its REST API does not offer: the delivery history of a
 * webhook and its Replay button (`POST /{owner}/{repo}/settings/hooks/{id}/replay/{uuid}`).
 *
 * Gitea 1.26 has no CSRF token any more: it uses Go's `http.CrossOriginProtection`, which lets
 * through requests that carry neither `Sec-Fetch-Site` nor `Origin` (i.e. not from a browser). So a
 * session cookie from `POST /user/login` is all a replay needs.
 */

export interface HookDelivery {
  /** The delivery UUID (`X-Gitea-Delivery`). */
  uuid: string;
  /** Gitea's numeric hook_task id (newest first in the history). */
  taskId: number;
  /** Request headers as Gitea recorded them. */
  requestHeaders: Record<string, string>;
  /** The payload as Gitea recorded it (HTML-unescaped). */
  payload: string;
  /** The answer's HTTP status, null while not delivered. */
  status: number | null;
  /** The answer's body, as recorded by Gitea. */
  responseBody: string;
  succeeded: boolean;
}

function unescapeHtml(s: string): string {
  return s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#(\d+);/g, (_m, d: string) => String.fromCodePoint(Number(d)))
    .replace(/&#x([0-9a-f]+);/gi, (_m, h: string) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&amp;/g, '&');
}

export class GiteaWebSession {
  private cookies = new Map<string, string>();

  private constructor(private readonly baseUrl: string) {}

  static async login(baseUrl: string, login: string, password: string): Promise<GiteaWebSession> {
    const s = new GiteaWebSession(baseUrl);
    await s.request('GET', '/user/login'); // session cookie
    const res = await s.request('POST', '/user/login', new URLSearchParams({ user_name: login, password }));
    // A successful sign-in redirects (303) and sets the remember/session cookies; a failed one renders the form (200).
    if (res.status !== 303 && res.status !== 302) throw new Error(`web sign-in as ${login} failed: HTTP ${res.status}`);
    return s;
  }

  async request(method: string, path: string, form?: URLSearchParams): Promise<Response> {
    const headers: Record<string, string> = {};
    if (this.cookies.size > 0) headers.Cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (form) headers['Content-Type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers, body: form?.toString(), redirect: 'manual', signal: AbortSignal.timeout(30_000) });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      if (eq > 0) this.cookies.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
    }
    return res;
  }

  /** Every delivery of a repository webhook, newest first (needs `[webhook] PAGING_NUM` large enough). */
  async hookDeliveries(owner: string, repo: string, hookId: number): Promise<HookDelivery[]> {
    const res = await this.request('GET', `/${owner}/${repo}/settings/hooks/${hookId}`);
    if (res.status !== 200) throw new Error(`hook page ${owner}/${repo} #${hookId}: HTTP ${res.status}`);
    const html = await res.text();
    const out: HookDelivery[] = [];
    // One `<div class="info tw-hidden" id="info-<id>">` per delivery, preceded by a button holding the UUID.
    const itemRe = /data-panel="#info-(\d+)">([0-9a-f-]{36})<\/button>/g;
    const items = [...html.matchAll(itemRe)];
    items.forEach((m, i) => {
      const taskId = Number(m[1]);
      const uuid = m[2]!;
      const end = i + 1 < items.length ? items[i + 1]!.index : html.length;
      const chunk = html.slice(m.index, end);
      const pres = [...chunk.matchAll(/<pre class="webhook-info">([\s\S]*?)<\/pre>/g)].map((p) => p[1]!);
      const requestHeaders: Record<string, string> = {};
      for (const h of (pres[0] ?? '').matchAll(/<strong>([^<]+):<\/strong> ([^\n]*)/g)) {
        if (h[1] === 'Request URL' || h[1] === 'Request method') continue;
        requestHeaders[unescapeHtml(h[1]!)] = unescapeHtml(h[2]!);
      }
      const statusMatch = /data-tab="response-\d+">[\s\S]*?<span class="ui (green|red) label">(\d+)<\/span>/.exec(chunk);
      out.push({
        uuid,
        taskId,
        requestHeaders,
        payload: unescapeHtml(pres[1] ?? ''),
        status: statusMatch ? Number(statusMatch[2]) : null,
        responseBody: unescapeHtml(pres[3] ?? ''),
        succeeded: statusMatch?.[1] === 'green',
      });
    });
    return out;
  }

  /** Presses Replay on one delivery: Gitea queues a new delivery (new UUID) of the same payload. */
  async replay(owner: string, repo: string, hookId: number, uuid: string): Promise<void> {
    const res = await this.request('POST', `/${owner}/${repo}/settings/hooks/${hookId}/replay/${uuid}`, new URLSearchParams());
    // Success redirects back to the hook page; 404 for an unknown UUID.
    if (res.status !== 303 && res.status !== 302) throw new Error(`replay of ${uuid} on hook ${hookId}: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
  }
}
