// Case-insensitive access to HTTP headers as Koa/Node give them (lower-case keys) or as fixtures
// spell them (`X-Gitea-Event`). Pure; no Koa types.

/** Headers as Node's `IncomingHttpHeaders`, a fixture's header map, or anything alike. */
export type WebhookHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * The single value of header `name` (case-insensitive), or `undefined` when it is absent or was
 * sent more than once as separate values (an ambiguous header is treated as missing).
 */
export function getHeader(headers: WebhookHeaders, name: string): string | undefined {
  const lower = name.toLowerCase();
  let value = headers[lower];
  if (value === undefined) {
    for (const key of Object.keys(headers)) {
      if (key.toLowerCase() === lower) {
        value = headers[key];
        break;
      }
    }
  }
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  return value.length === 1 ? value[0] : undefined;
}
