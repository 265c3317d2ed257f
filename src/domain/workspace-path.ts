// Where a repository's workspace lives: <root>/<instance>/<owner>/<repo>, normalised, never outside root.
// In src/domain/ because intake computes it for the repository record it writes, and intake may not
// import the workspace manager (the walls in .dependency-cruiser.mjs).
import path from 'node:path';

export class WorkspacePathError extends Error {
  override readonly name = 'WorkspacePathError';
}

// Control characters (C0, DEL, C1) — never valid in an owner, repo or instance name.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Throws `WorkspacePathError` unless `value` is a safe single path segment. */
export function assertSafeSegment(label: string, value: string): void {
  if (typeof value !== 'string' || value.length === 0) {
    throw new WorkspacePathError(`${label} is empty`);
  }
  if (value.length > 255) throw new WorkspacePathError(`${label} is too long`);
  if (CONTROL.test(value)) throw new WorkspacePathError(`${label} contains a control character`);
  if (value.includes('/') || value.includes('\\')) {
    throw new WorkspacePathError(`${label} contains a path separator`);
  }
  if (value === '.' || value.includes('..')) throw new WorkspacePathError(`${label} contains '..' or is '.'`);
  // A leading '-' could be read by git as an option.
  if (value.startsWith('-')) throw new WorkspacePathError(`${label} starts with '-'`);
  if (value.trim() !== value) throw new WorkspacePathError(`${label} has leading or trailing whitespace`);
}

/** `root/instanceId/owner/repo`, absolute and normalised; throws `WorkspacePathError` on anything unsafe. */
export function workspacePathFor(root: string, instanceId: string, owner: string, repo: string): string {
  if (typeof root !== 'string' || root.length === 0) throw new WorkspacePathError('workspace root is empty');
  if (CONTROL.test(root)) throw new WorkspacePathError('workspace root contains a control character');
  assertSafeSegment('instance id', instanceId);
  assertSafeSegment('owner', owner);
  assertSafeSegment('repo', repo);
  const base = path.resolve(root);
  const full = path.resolve(base, instanceId, owner, repo);
  const rel = path.relative(base, full);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel) || rel.split(path.sep).length !== 3) {
    throw new WorkspacePathError('workspace path escapes the root');
  }
  return full;
}

/** True when `child` is `parent` itself or lies inside it (both taken as given, no symlink resolution). */
export function isInside(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
