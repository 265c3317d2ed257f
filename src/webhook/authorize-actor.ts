// Who may trigger a task: the commenter needs write (push) or admin on the repository.
//
// Order (first decisive rule wins):
// 1. deny list (case-insensitive logins) → not authorised, whatever their permissions;
// 2. allow list, when set and non-empty → the login must be on it (an extra requirement, never a
//    bypass of the permission check);
// 3. the signed `repository.permissions` from the webhook is a hint, never the decision (every
//    repository admin who added the webhook knows the secret and can sign any payload): present
//    without `push`/`admin` → not authorised (no API call: a forged "no" only hurts its forger);
// 4. otherwise ask Gitea (`GET /repos/{o}/{r}/collaborators/{user}/permission`) through
//    `fetchPermission`: `write`/`admin`/`owner` → allowed, `none`/`read` → not authorised;
//    Gitea's 404 (no such user or repository) → not authorised; any other throw or an unknown answer
//    → `permission_check_failed`: undecided, never a "yes" — intake keeps the comment waiting and asks
//    again later (src/intake/pending-intake.ts), it is not a refusal.

export type RepoPermission = 'none' | 'read' | 'write' | 'admin' | 'owner';

export interface AuthorizeActorInput {
  login: string;
  permissions?: { admin: boolean; push: boolean; pull?: boolean } | undefined;
  allowList?: readonly string[] | undefined;
  denyList?: readonly string[] | undefined;
  fetchPermission: (login: string) => Promise<RepoPermission>;
}

export type AuthorizeVia = 'permission_api';

export type AuthorizeResult =
  | { allowed: true; via: AuthorizeVia }
  /**
   * `readerOnly`: Gitea says the commenter has no write access (the signed hint or the API), as
   * opposed to the operator's deny or allow list refusing them: only then is "only people with write
   * access can ask" true to tell them.
   */
  | { allowed: false; reason: 'actor_not_authorized'; readerOnly?: true }
  /** Gitea did not answer clearly (5xx, timeout, down, 401/403, an unknown level): undecided. */
  | { allowed: false; reason: 'permission_check_failed'; error: unknown };

function listed(list: readonly string[] | undefined, login: string): boolean {
  const lower = login.toLowerCase();
  return (list ?? []).some((entry) => entry.trim().toLowerCase() === lower);
}

export async function authorizeActor(input: AuthorizeActorInput): Promise<AuthorizeResult> {
  const { login, permissions, allowList, denyList, fetchPermission } = input;
  if (login === '' || listed(denyList, login)) return { allowed: false, reason: 'actor_not_authorized' };
  if (allowList !== undefined && allowList.length > 0 && !listed(allowList, login)) {
    return { allowed: false, reason: 'actor_not_authorized' };
  }
  if (permissions !== undefined && permissions !== null && permissions.push !== true && permissions.admin !== true) {
    return { allowed: false, reason: 'actor_not_authorized', readerOnly: true };
  }
  let permission: unknown;
  try {
    permission = await fetchPermission(login);
  } catch (error) {
    if (typeof error === 'object' && error !== null && (error as { status?: unknown }).status === 404) {
      return { allowed: false, reason: 'actor_not_authorized', readerOnly: true };
    }
    return { allowed: false, reason: 'permission_check_failed', error };
  }
  switch (permission) {
    case 'write':
    case 'admin':
    case 'owner':
      return { allowed: true, via: 'permission_api' };
    case 'none':
    case 'read':
      return { allowed: false, reason: 'actor_not_authorized', readerOnly: true };
    default:
      return { allowed: false, reason: 'permission_check_failed', error: new Error(`unknown permission level ${JSON.stringify(permission)?.slice(0, 40)}`) };
  }
}
