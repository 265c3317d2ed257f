import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { WorkspacePathError, workspacePathFor } from '../../src/domain/workspace-path.js';
import { isSafeBranchName } from '../../src/workspace/workspace-manager.js';

describe('workspacePathFor', () => {
  it('joins root/instance/owner/repo, normalised', () => {
    expect(workspacePathFor('/srv/ws/', 'default', 'acme', 'widget')).toBe(path.resolve('/srv/ws/default/acme/widget'));
    expect(workspacePathFor('/srv//ws/./x/..', 'default', 'a.b', 'c_d-e.f')).toBe(path.resolve('/srv/ws/default/a.b/c_d-e.f'));
  });

  it.each([
    ['..', 'r'],
    ['o', '..'],
    ['.', 'r'],
    ['o', 'a..b'],
    ['o/x', 'r'],
    ['o', '../r'],
    ['o', 'r/../../x'],
    ['o\\x', 'r'],
    ['o', 'r\u0000'],
    ['o', 'r\n'],
    ['o', '\u007f'],
    ['o', '\u009b'],
    ['-o', 'r'],
    ['o', '--upload-pack=x'],
    ['', 'r'],
    ['o', ''],
    [' o', 'r'],
  ])('refuses owner %j repo %j', (owner, repo) => {
    expect(() => workspacePathFor('/srv/ws', 'default', owner, repo)).toThrow(WorkspacePathError);
  });

  it('refuses unsafe instance ids and an empty root', () => {
    for (const instance of ['..', '../..', 'a/b', '', '-x']) {
      expect(() => workspacePathFor('/srv/ws', instance, 'o', 'r')).toThrow(WorkspacePathError);
    }
    expect(() => workspacePathFor('', 'default', 'o', 'r')).toThrow(WorkspacePathError);
  });
});

describe('isSafeBranchName', () => {
  it('accepts ordinary names and refuses git-special or option-like ones', () => {
    for (const good of ['main', 'master', 'release/1.2', 'feature_x-y']) expect(isSafeBranchName(good)).toBe(true);
    for (const bad of ['', '-main', '--orphan', 'a..b', 'a b', 'x.lock', 'a//b', '/a', 'a/', 'HEAD', '@', 'a@{1}', 'a~1', 'a^', 'a:b', '.hidden', 'a/.b', 'x\n']) {
      expect(isSafeBranchName(bad), bad).toBe(false);
    }
  });
});
