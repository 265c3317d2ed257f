// The correlation marker every reply carries (spec §6.4). It is written into the prompt before Codex
// assigns a turn id, so it names our own per-attempt key (`turnKey` = `<taskId>:<n>`, generated and
// stored before `turn/start`); the turn record maps that key to Codex's `turnId`. A comment therefore
// binds to exactly one task attempt even though the agent never learns Codex's id.

export interface MarkerFields {
  taskId: string;
  turnKey: string;
  resourceKey: string;
}

export function turnKeyFor(taskId: string, n: number): string {
  return `${taskId}:${n}`;
}

/** `<!-- ccweb taskId=… turnKey=… resource=… -->` — an HTML comment, invisible in Gitea's rendering. */
export function formatMarker(m: MarkerFields): string {
  return `<!-- ccweb taskId=${m.taskId} turnKey=${m.turnKey} resource=${m.resourceKey} -->`;
}

const MARKER_RE = /<!-- ccweb taskId=(\S+) turnKey=(\S+) resource=(\S+) -->/g;

/** Every marker found in a comment body (an agent may quote an older one: callers match exactly). */
export function parseMarkers(body: string): MarkerFields[] {
  return [...body.matchAll(MARKER_RE)].map((m) => ({ taskId: m[1]!, turnKey: m[2]!, resourceKey: m[3]! }));
}

/** True when the body carries exactly this attempt's marker. */
export function hasMarker(body: string, m: MarkerFields): boolean {
  return parseMarkers(body).some((x) => x.taskId === m.taskId && x.turnKey === m.turnKey && x.resourceKey === m.resourceKey);
}

/** The receipt marker: one per task and status (`commentKey = taskId:status:<state>`, §6.4). */
export function formatReceiptMarker(commentKey: string): string {
  return `<!-- ccweb receipt=${commentKey} -->`;
}

export function hasReceiptMarker(body: string, commentKey: string): boolean {
  return body.includes(formatReceiptMarker(commentKey));
}
