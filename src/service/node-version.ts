// The Node versions the service is supported on (docs/operations.md, "Installing on a server"). An older one still runs it,
// so a start is not refused: serve prints one warning line, and doctor's `node` check warns the same.

/** The oldest supported major version: Node 22 LTS (24 LTS is what CI runs). */
export const OLDEST_SUPPORTED_NODE_MAJOR = 22;
export const SUPPORTED_NODE = 'Node 22 and 24 LTS';
const NODE_FIX = 'install Node 24 LTS (docs/operations.md, Installing on a server)';

export type NodeVersionVerdict = { supported: true; text: string } | { supported: false; text: string; fix: string };

/** What `process.version` (e.g. "v20.20.2") means for the service. */
export function nodeVersionVerdict(version: string): NodeVersionVerdict {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (!Number.isInteger(major) || major >= OLDEST_SUPPORTED_NODE_MAJOR) return { supported: true, text: `running on Node ${version}; supported: ${SUPPORTED_NODE}` };
  return { supported: false, text: `running on Node ${version}, older than the supported ${SUPPORTED_NODE}`, fix: NODE_FIX };
}

/** serve's one warning line for `process.version`, or null when it is supported. */
export function nodeVersionWarning(version: string): string | null {
  const v = nodeVersionVerdict(version);
  return v.supported ? null : `ccweb-gitea: warning: ${v.text}; it still starts, but ${v.fix}`;
}
