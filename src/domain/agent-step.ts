/**
 * What the agent is doing right now, as the receipt shows it. Only service-made data: a
 * program's name or a tool's name checked against a plain alphabet, counts. Never the command line,
 * a plan step's words or anything else the model wrote: the receipt is public on the thread, and
 * the agent's text can carry what it read (a secret in its environment, the untrusted comment).
 */
export type AgentStep =
  | { kind: 'command'; program: string | null }
  | { kind: 'tool'; name: string | null }
  | { kind: 'file_change'; files: number }
  | { kind: 'plan'; done: number; total: number }
  | { kind: 'web_search' }
  | { kind: 'thinking' };

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,39}$/;

/** A program or tool name fit to show, or null. */
export function plainName(s: unknown): string | null {
  return typeof s === 'string' && NAME_RE.test(s) ? s : null;
}
