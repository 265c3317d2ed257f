// The pure rule of repository names: which stored repository record a name stands for, and the
// comment re-keyed to it (src/domain/repository-identity.ts, src/intake/canonical-repository.ts).
import { describe, expect, it } from 'vitest';
import {
  anyDisabled,
  canonicalRepository,
  findRepository,
  foldName,
  matchingRepositories,
  rekey,
  sameRepoKey,
} from '../../src/domain/repository-identity.js';
import { canonicalComment } from '../../src/intake/canonical-repository.js';
import { commentTriggerKey, normalizeComment } from '../../src/webhook/normalize-comment.js';
import { loadFixture, mutatedDelivery } from '../support/webhook-fixtures.js';

const rec = (repoKey: string, registeredAt: string, repoId?: number, status: 'active' | 'disabled' = 'active') => ({
  repoKey,
  registeredAt,
  status,
  ...(repoId === undefined ? {} : { repoId }),
});

describe('repository names compare as Gitea compares them', () => {
  it('case-insensitively, and nothing else is folded', () => {
    expect(foldName('default:ACME/Widget')).toBe('default:acme/widget');
    expect(sameRepoKey('default:ACME/Widget', 'default:acme/widget')).toBe(true);
    expect(sameRepoKey('default:acme/widget', 'default:acme/widgets')).toBe(false);
    expect(sameRepoKey('default:acme/wid-get', 'default:acme/wid_get')).toBe(false);
    expect(sameRepoKey('default:acme/widget', 'other:acme/widget')).toBe(false);
  });

  it('a name finds its stored record in any case; nothing stored → undefined', () => {
    const records = [rec('default:acme/widget', '2026-01-01T00:00:00Z', 5), rec('default:acme/gadget', '2026-01-01T00:00:00Z', 6)];
    expect(canonicalRepository('default:ACME/Widget', records, 5)?.repoKey).toBe('default:acme/widget');
    expect(canonicalRepository('default:acme/widget', records, 5)?.repoKey).toBe('default:acme/widget');
    expect(canonicalRepository('default:ACME/Thing', records, 7)).toBeUndefined();
  });

  it('a stored mixed-case key is the canonical one (never lowercased)', () => {
    const records = [rec('default:Acme/Widget', '2026-01-01T00:00:00Z', 5)];
    expect(canonicalRepository('default:acme/widget', records, 5)?.repoKey).toBe('default:Acme/Widget');
  });

  it('among variants an older version stored: the same Gitea id first, then the earliest registered, then by key', () => {
    const early = rec('default:ACME/widget', '2026-01-01T00:00:00Z', 9);
    const sameId = rec('default:acme/Widget', '2026-03-01T00:00:00Z', 5);
    const late = rec('default:acme/widget', '2026-02-01T00:00:00Z', 9);
    expect(matchingRepositories('default:Acme/Widget', [late, early, sameId], 5).map((r) => r.repoKey)).toEqual([
      'default:acme/Widget',
      'default:ACME/widget',
      'default:acme/widget',
    ]);
    // Without an id (the control API): the earliest registered.
    expect(canonicalRepository('default:acme/widget', [late, sameId, early])?.repoKey).toBe('default:ACME/widget');
    const tieA = rec('default:b/x', '2026-01-01T00:00:00Z');
    const tieB = rec('default:B/x', '2026-01-01T00:00:00Z');
    expect(canonicalRepository('default:b/X', [tieA, tieB])?.repoKey).toBe('default:B/x');
    expect(canonicalRepository('default:b/X', [tieB, tieA])?.repoKey).toBe('default:B/x');
  });

  it('the control API prefers the record stored under exactly the key given', () => {
    const first = rec('default:acme/widget', '2026-01-01T00:00:00Z');
    const variant = rec('default:ACME/Widget', '2026-02-01T00:00:00Z');
    expect(findRepository('default:ACME/Widget', [first, variant])?.repoKey).toBe('default:ACME/Widget');
    expect(findRepository('default:Acme/Widget', [first, variant])?.repoKey).toBe('default:acme/widget');
    expect(findRepository('default:acme/nope', [first, variant])).toBeUndefined();
  });

  it('any disabled variant disables the repository', () => {
    expect(anyDisabled([rec('a', 'x', 1), rec('A', 'y', 1, 'disabled')])).toBe(true);
    expect(anyDisabled([rec('a', 'x', 1)])).toBe(false);
    expect(anyDisabled([])).toBe(false);
  });

  it('rekey swaps the repoKey prefix of a derived key only when it names the same repository', () => {
    expect(rekey('default:ACME/Widget:issue:7', 'default:ACME/Widget', 'default:acme/widget')).toBe('default:acme/widget:issue:7');
    expect(rekey('default:ACME/Widget:comment:3:created:2026-07-20T09:15:42Z', 'default:ACME/Widget', 'default:acme/widget')).toBe(
      'default:acme/widget:comment:3:created:2026-07-20T09:15:42Z',
    );
    expect(rekey('default:acme/gadget:issue:7', 'default:acme/gadget', 'default:acme/widget')).toBe('default:acme/gadget:issue:7');
    expect(rekey('default:other/x:issue:7', 'default:ACME/Widget', 'default:acme/widget')).toBe('default:other/x:issue:7');
  });
});

describe('canonicalComment', () => {
  const headers = loadFixture('issue_comment_created_on_issue').headers;
  const normalize = (owner: string, name: string) => {
    const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
      p.repository.owner.login = owner;
      p.repository.name = name;
      p.repository.full_name = `${owner}/${name}`;
    });
    const r = normalizeComment(headers, d.body);
    if (!r.ok) throw new Error(r.issues);
    return r.value;
  };

  it('puts the comment under the stored key and owner/name; its trigger key follows', () => {
    const variant = normalize('ALICE', 'Widgets');
    const c = canonicalComment(variant, { repoKey: 'default:alice/widgets', owner: 'alice', name: 'widgets' });
    expect(c.repoKey).toBe('default:alice/widgets');
    expect(c.resourceKey).toBe('default:alice/widgets:issue:7');
    expect(c.repo).toMatchObject({ id: variant.repo.id, owner: 'alice', name: 'widgets', fullName: 'alice/widgets', cloneUrl: variant.repo.cloneUrl });
    expect(commentTriggerKey(c)).toBe(commentTriggerKey(normalize('alice', 'widgets')));
    // The rest of the comment is untouched.
    expect({ ...c, repoKey: 0, resourceKey: 0, repo: 0 }).toEqual({ ...variant, repoKey: 0, resourceKey: 0, repo: 0 });
  });
});
