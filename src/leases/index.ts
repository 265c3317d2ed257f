export { LOCK_KIND, lockActorId, repoLockKind } from './repo-lock-actor.js';
export { leaseOwnerId, instanceOfOwner, isPreviousProcessOf } from './lease-owner.js';
