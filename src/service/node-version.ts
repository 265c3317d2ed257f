// The Node versions the service is supported on (docs/operations.md, "Installing on a server"). An older one still runs it,
// so a start is not refused; it prints one warning line instead (issue 32: a start on Node 20 said nothing).

/** The oldest supported major version: Node 22 LTS (24 LTS is what CI runs). */
export const OLDEST_SUPPORTED_NODE_MAJOR = 22;

/** One warning line for `process.version` (e.g. "v20.20.2"), or null when it is supported. */
export function nodeVersionWarning(version: string): string | null {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (!Number.isInteger(major) || major >= OLDEST_SUPPORTED_NODE_MAJOR) return null;
  return `ccweb-gitea: warning: running on Node ${version}, older than the supported Node 22 and 24 LTS; it still starts, but install Node 24 LTS (docs/operations.md, Installing on a server)`;
}
