/**
 * Lease owners name one process of one service instance: `<instance>/<pid>/<startedAt>`. Restart
 * recovery compares owners: a lease of the same instance but another process has no live worker
 * any more (the MVP runs one scheduler per instance), so it can be released at once instead of
 * waiting for its TTL.
 */
export function leaseOwnerId(instanceId: string, pid: number = process.pid, startedAt: number = Date.now()): string {
  if (instanceId === '' || instanceId.includes('/')) throw new Error('instance id must be non-empty and contain no "/"');
  return `${instanceId}/${pid}/${startedAt}`;
}

/** The instance part of an owner id, or null when the owner does not have the expected shape. */
export function instanceOfOwner(owner: string): string | null {
  const parts = owner.split('/');
  return parts.length === 3 && parts[0] !== '' ? parts[0]! : null;
}

/** True when `owner` is an earlier (or otherwise different) process of the same instance as `self`. */
export function isPreviousProcessOf(owner: string, self: string): boolean {
  const instance = instanceOfOwner(self);
  return instance !== null && owner !== self && instanceOfOwner(owner) === instance;
}
