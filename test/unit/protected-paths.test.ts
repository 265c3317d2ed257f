// What the publisher never commits (src/publish/protected-paths.ts): CI definitions unless the
// operator allows them, the operator's own paths always; the texts that name refused paths on Gitea (src/receipts/path-text.ts).
// The git side (withhold-paths.ts) is covered by test/e2e/publish.e2e.test.ts against a real Gitea.
import { describe, expect, it } from 'vitest';
import { PublishPathsBody } from '../../src/api/control-schemas.js';
import {
  DEFAULT_PUBLISH_PATHS,
  normaliseProtectedPath,
  publishPathSettings,
  refusedPaths,
} from '../../src/publish/protected-paths.js';
import { pathForText, pathsForText } from '../../src/receipts/path-text.js';
import { withheldPathsReceiptText } from '../../src/receipts/receipt-text.js';

describe('refused paths', () => {
  const changed = [
    'src/a.js',
    '.gitea/workflows/x.yml',
    '.github/workflows/ci.yaml',
    '.forgejo/workflows/deep/y.yml',
    '.gitea/issue_template.md',
    '.github/workflowsX/not-ci.yml',
    'docs/.gitea/workflows/example.yml',
  ];
  it('by default: every CI folder of Gitea, GitHub and Forgejo, and nothing else', () => {
    expect(refusedPaths(changed, DEFAULT_PUBLISH_PATHS)).toEqual(['.forgejo/workflows/deep/y.yml', '.gitea/workflows/x.yml', '.github/workflows/ci.yaml']);
  });
  it('the folder itself too (a file or a symbolic link named like it), and without regard to case', () => {
    expect(refusedPaths(['.gitea/workflows', '.GITEA/Workflows/x.yml', '.Github/WORKFLOWS'], DEFAULT_PUBLISH_PATHS)).toEqual(['.GITEA/Workflows/x.yml', '.Github/WORKFLOWS', '.gitea/workflows']);
  });
  it('allowCiChanges lets CI folders through; the operator\'s own paths stay refused', () => {
    expect(refusedPaths(changed, { allowCiChanges: true, protectedPaths: [] })).toEqual([]);
    expect(refusedPaths([...changed, 'deploy/prod.env', 'deploy', 'deployment.md', 'Makefile'], { allowCiChanges: true, protectedPaths: ['deploy', 'Makefile'] })).toEqual([
      'Makefile',
      'deploy',
      'deploy/prod.env',
    ]);
  });
  it('a repository record without settings gets the defaults; stray values do not loosen them', () => {
    expect(publishPathSettings(undefined)).toEqual(DEFAULT_PUBLISH_PATHS);
    expect(publishPathSettings({})).toEqual(DEFAULT_PUBLISH_PATHS);
    expect(publishPathSettings({ publishPaths: { allowCiChanges: 'yes', protectedPaths: ['a', 3] } })).toEqual({ allowCiChanges: false, protectedPaths: ['a'] });
  });
});

describe('operator paths', () => {
  it('are repository-relative and in one form', () => {
    expect(normaliseProtectedPath('deploy/')).toBe('deploy');
    expect(normaliseProtectedPath('./scripts//release.sh')).toBe('scripts/release.sh');
    for (const bad of ['', '/etc/passwd', '../x', 'a/../b', 'a/./b', 'a\\b', 'a\nb', 'x'.repeat(301)]) expect(normaliseProtectedPath(bad), bad).toBeNull();
  });
  it('the control body refuses a bad path naming it, and normalises good ones', () => {
    const base = { requestId: 'req-12345678', operator: 'ops', reason: 'ci is reviewed by hand' };
    expect(PublishPathsBody.parse({ ...base, allowCiChanges: true, protectedPaths: ['deploy/'] }).protectedPaths).toEqual(['deploy']);
    expect(PublishPathsBody.parse({ ...base, allowCiChanges: false }).protectedPaths).toEqual([]);
    const bad = PublishPathsBody.safeParse({ ...base, allowCiChanges: false, protectedPaths: ['../x'] });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues)).toContain('\\"../x\\" is not a repository path');
    expect(PublishPathsBody.safeParse({ ...base, allowCiChanges: 'yes' }).success).toBe(false);
    expect(PublishPathsBody.safeParse({ ...base, allowCiChanges: false, extra: 1 }).success).toBe(false);
    expect(PublishPathsBody.safeParse({ ...base, allowCiChanges: false, protectedPaths: Array.from({ length: 51 }, (_, i) => `p${i}`) }).success).toBe(false);
  });
});

describe('the notice naming withheld paths', () => {
  it('names each path in a plain alphabet (the names came from the agent), at most ten', () => {
    expect(pathForText('.gitea/workflows/<img src=x>@admin.yml')).toBe('.gitea/workflows/_img_src_x__admin.yml');
    const many = Array.from({ length: 12 }, (_, i) => `.gitea/workflows/w${i}.yml`);
    expect(pathsForText(many)).toEqual({ shown: many.slice(0, 10), more: 2 });
  });
  it('tells the user once, in zh and en, what was not committed and where it is kept', () => {
    const task = {
      taskId: 'T1',
      publish: { withheld: { paths: ['.gitea/workflows/x.yml', '.github/workflows/`rm`.yml'], branch: 'ccweb-kept/T1-withheld', patchFile: '/data/patches/T1.withheld.patch' } },
    };
    const en = withheldPathsReceiptText(task, 'en');
    expect(en).toMatch(/^giteabot: task T1 did not commit `\.gitea\/workflows\/x\.yml`, `\.github\/workflows\/_rm_\.yml`: /);
    expect(en).toContain('The rest of the change was published');
    expect(en).toContain('`ccweb-kept/T1-withheld`');
    expect(en).toContain('`patches/T1.withheld.patch`');
    const zh = withheldPathsReceiptText(task, 'zh');
    expect(zh).toMatch(/^giteabot: 任务 T1 的以下文件没有提交/);
    expect(zh).toContain('`.gitea/workflows/x.yml`');
    expect(zh).toContain('`ccweb-kept/T1-withheld`');
  });
});
