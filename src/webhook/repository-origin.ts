// The Gitea host is configuration, never payload. Anyone who knows a webhook secret — every
// repository admin who added the webhook — can sign a payload, so nothing in it may decide where the
// bot's token goes: clone, fetch and push URLs are built from CCWEB_GITEA_URL and the repository's
// owner/name (src/gitea/clone-url.ts), and a payload whose repository URLs name another host is
// refused (400, security audit).
// A mismatch is not a misconfiguration we can fix up silently: either the payload is forged, or
// Gitea's ROOT_URL differs from CCWEB_GITEA_URL, which CCWEB_GITEA_PUBLIC_URL declares.

/** Host names (lower case) a payload's repository URLs may name: those of the configured URLs. */
export function allowedRepositoryHosts(...urls: Array<string | undefined>): string[] {
  const hosts = new Set<string>();
  for (const u of urls) {
    if (u === undefined || u === '') continue;
    hosts.add(new URL(u).hostname.toLowerCase());
  }
  return [...hosts];
}

/** The host of an http(s) URL or an scp-like/ssh git URL (`git@host:o/r.git`, `ssh://git@host:22/o/r.git`). */
export function urlHost(value: string): string | null {
  const scp = /^(?:[^@/\s]+@)?([^:/\s]+):(?!\/\/)/.exec(value);
  if (scp && !/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return scp[1]!.toLowerCase();
  try {
    const host = new URL(value).hostname.toLowerCase();
    return host === '' ? null : host;
  } catch {
    return null;
  }
}

export interface ForeignOrigin {
  /** `repository.clone_url`, `repository.html_url` or `repository.ssh_url`. */
  field: string;
  /** The foreign host, at most 128 printable characters (it goes into the security audit). */
  host: string;
}

const FIELDS = [
  ['clone_url', 'cloneUrl'],
  ['html_url', 'htmlUrl'],
  ['ssh_url', 'sshUrl'],
] as const;

/**
 * The first repository URL of the normalised payload whose host is not allowed, or null. Absent or
 * empty fields are fine (the payload schema decides what is required); an unparsable non-empty URL
 * counts as foreign.
 */
export function foreignRepositoryOrigin(
  repo: { cloneUrl?: string; htmlUrl?: string; sshUrl?: string },
  allowedHosts: readonly string[],
): ForeignOrigin | null {
  for (const [field, prop] of FIELDS) {
    const value = repo[prop];
    if (typeof value !== 'string' || value === '') continue;
    const host = urlHost(value);
    if (host === null || !allowedHosts.includes(host)) {
      return { field: `repository.${field}`, host: (host ?? 'unparsable').replace(/[^\x21-\x7e]/g, '?').slice(0, 128) };
    }
  }
  return null;
}
