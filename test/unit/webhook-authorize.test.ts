import { describe, expect, it, vi } from 'vitest';
import { authorizeActor, type RepoPermission } from '../../src/webhook/authorize-actor.js';
import { normalizeComment } from '../../src/webhook/normalize-comment.js';
import { loadFixture, mutatedDelivery } from '../support/webhook-fixtures.js';

const never = () => Promise.reject(new Error('must not be called'));

describe('authorizeActor', () => {
  // A signed payload claiming push for a user without access must not get a run.
  it('signed push permission is only a hint: Gitea is asked, and its "none" wins', async () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const r = normalizeComment(headers, body);
    if (!r.ok) throw new Error(r.issues);
    expect(r.value.permissions?.push).toBe(true);
    const denied = vi.fn(async (): Promise<RepoPermission> => 'none');
    expect(await authorizeActor({ login: r.value.actor.login, permissions: r.value.permissions, fetchPermission: denied })).toEqual({
      allowed: false,
      reason: 'actor_not_authorized',
      readerOnly: true,
    });
    expect(denied).toHaveBeenCalledWith(r.value.actor.login);
    const granted = vi.fn(async (): Promise<RepoPermission> => 'write');
    expect(await authorizeActor({ login: r.value.actor.login, permissions: r.value.permissions, fetchPermission: granted })).toEqual({
      allowed: true,
      via: 'permission_api',
    });
    // Signed admin, Gitea unreachable: fail closed.
    expect(await authorizeActor({ login: 'a', permissions: { admin: true, push: false, pull: true }, fetchPermission: never })).toMatchObject({ allowed: false, reason: 'permission_check_failed', error: expect.anything() });
  });

  it('a read-only commenter is rejected from the signed permissions, no API call', async () => {
    const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
      p.repository.permissions = { admin: false, push: false, pull: true };
    });
    const r = normalizeComment(d.headers, d.body);
    if (!r.ok) throw new Error(r.issues);
    const fetchPermission = vi.fn(never);
    expect(await authorizeActor({ login: 'bob', permissions: r.value.permissions, fetchPermission })).toEqual({
      allowed: false,
      reason: 'actor_not_authorized',
      readerOnly: true,
    });
    expect(fetchPermission).not.toHaveBeenCalled();
  });

  it('without signed permissions, asks the API', async () => {
    const cases: Array<[RepoPermission, boolean]> = [
      ['owner', true],
      ['admin', true],
      ['write', true],
      ['read', false],
      ['none', false],
    ];
    for (const [permission, allowed] of cases) {
      const fetchPermission = vi.fn(async () => permission);
      const r = await authorizeActor({ login: 'bob', fetchPermission });
      expect(r).toEqual(allowed ? { allowed: true, via: 'permission_api' } : { allowed: false, reason: 'actor_not_authorized', readerOnly: true });
      expect(fetchPermission).toHaveBeenCalledWith('bob');
    }
  });

  it('fails closed when the permission API fails or answers nonsense', async () => {
    expect(await authorizeActor({ login: 'bob', fetchPermission: never })).toMatchObject({ allowed: false, reason: 'permission_check_failed', error: expect.anything() });
    expect(
      await authorizeActor({ login: 'bob', fetchPermission: async () => 'superuser' as unknown as RepoPermission }),
    ).toMatchObject({ allowed: false, reason: 'permission_check_failed', error: expect.anything() });
    expect(
      await authorizeActor({
        login: 'bob',
        fetchPermission: () => {
          throw new Error('sync throw');
        },
      }),
    ).toMatchObject({ allowed: false, reason: 'permission_check_failed', error: expect.anything() });
  });

  it('a refusal by the operator\'s lists is not "no write access" (no reader notice: it would not be true)', async () => {
    const perms = { admin: false, push: true, pull: true };
    expect(await authorizeActor({ login: 'bob', permissions: perms, denyList: ['bob'], fetchPermission: never })).not.toHaveProperty('readerOnly');
    expect(await authorizeActor({ login: 'bob', permissions: perms, allowList: ['alice'], fetchPermission: never })).not.toHaveProperty('readerOnly');
    expect(await authorizeActor({ login: 'bob', fetchPermission: () => Promise.reject(Object.assign(new Error('no such user'), { status: 404 })) })).toEqual({ allowed: false, reason: 'actor_not_authorized', readerOnly: true });
  });

  it('the deny list wins over admin permissions (case-insensitive)', async () => {
    expect(
      await authorizeActor({
        login: 'Mallory',
        permissions: { admin: true, push: true, pull: true },
        denyList: ['mallory'],
        allowList: ['mallory'],
        fetchPermission: never,
      }),
    ).toEqual({ allowed: false, reason: 'actor_not_authorized' });
  });

  it('an allow list, when set, is required in addition to write permission', async () => {
    const perms = { admin: false, push: true, pull: true };
    expect(await authorizeActor({ login: 'bob', permissions: perms, allowList: ['alice'], fetchPermission: never })).toEqual({
      allowed: false,
      reason: 'actor_not_authorized',
    });
    expect(await authorizeActor({ login: 'BOB', permissions: perms, allowList: ['alice', 'bob'], fetchPermission: async () => 'write' })).toEqual({
      allowed: true,
      via: 'permission_api',
    });
    // Being on the allow list does not bypass the permission check.
    expect(
      await authorizeActor({ login: 'bob', permissions: { admin: false, push: false, pull: true }, allowList: ['bob'], fetchPermission: never }),
    ).toEqual({ allowed: false, reason: 'actor_not_authorized', readerOnly: true });
    // An empty allow list means "no allow list".
    expect(await authorizeActor({ login: 'bob', permissions: perms, allowList: [], fetchPermission: async () => 'admin' })).toEqual({
      allowed: true,
      via: 'permission_api',
    });
  });
});
