// The gate's table against the real gitea-mcp's tool list (recorded from the pinned binary in
// test/fixtures/gitea-mcp/; test/integration/mcp-gate.test.ts checks the recording against the live
// binary): what the agent is offered, and what each call may name.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseGateCalls } from '../../src/mcp-gate/gate-files.js';
import { badPathReason, createdCommentId, decideCall, forwardedArguments, narrowTools, RULES, type GateTaskView, type McpTool } from '../../src/mcp-gate/gate-policy.js';

const recorded = JSON.parse(readFileSync(new URL('../fixtures/gitea-mcp/tools-list-a5dd03c7f0d8.json', import.meta.url), 'utf8')) as { tools: McpTool[] };
const scope = { owner: 'acme', repo: 'widget', number: 7 };
const view = (over: Partial<GateTaskView> = {}): GateTaskView => ({ taskId: 'gitea-task-1', extra: [], ownComments: new Set([501]), ...over });
const allow = (tool: string, args: Record<string, unknown>, v = view()) => decideCall(tool, args, scope, v).allow;
const reason = (tool: string, args: Record<string, unknown>, v = view()) => {
  const d = decideCall(tool, args, scope, v);
  return d.allow ? null : d.reason;
};
const repo = { owner: 'acme', repo: 'widget' };

describe('the tools the agent is offered', () => {
  it('are the reading tools and the answer, cut from the 49 the real gitea-mcp lists', () => {
    expect(recorded.tools).toHaveLength(49);
    const offered = narrowTools(recorded.tools, scope, view());
    expect(offered.map((t) => t.name).sort()).toEqual([
      'get_commit',
      'get_dir_contents',
      'get_file_contents',
      'get_gitea_mcp_server_version',
      'get_repository_tree',
      'issue_read',
      'issue_write',
      'list_branches',
      'list_commits',
      'list_issues',
      'list_pull_requests',
      'pull_request_read',
    ]);
    const issueWrite = offered.find((t) => t.name === 'issue_write')!;
    expect((issueWrite.inputSchema.properties!['method'] as { enum: string[] }).enum).toEqual(['add_comment', 'edit_comment']);
    // Arguments only the hidden methods use are gone from the schema too.
    expect(Object.keys(issueWrite.inputSchema.properties!).sort()).toEqual(['body', 'commentID', 'index', 'method', 'owner', 'repo']);
    expect(issueWrite.description).toContain('writes only on #7');
    expect((offered.find((t) => t.name === 'pull_request_read')!.inputSchema.properties!['method'] as { enum: string[] }).enum).toEqual(['get', 'get_diff', 'get_reviews', 'get_review', 'get_review_comments']);
  });

  it('take the labels group when an operator allowed it for the repository', () => {
    const offered = narrowTools(recorded.tools, scope, view({ extra: ['labels'] }));
    expect((offered.find((t) => t.name === 'issue_write')!.inputSchema.properties!['method'] as { enum: string[] }).enum).toEqual([
      'add_comment',
      'edit_comment',
      'add_labels',
      'remove_label',
      'replace_labels',
      'clear_labels',
    ]);
    expect((offered.find((t) => t.name === 'label_read')!.inputSchema.properties!['method'] as { enum: string[] }).enum).toEqual(['list_repo_labels', 'get_repo_label']);
  });

  it('never include a tool the table does not name (default deny)', () => {
    const novel: McpTool = { name: 'transfer_repo', inputSchema: { type: 'object', properties: { owner: {}, repo: {} } } };
    expect(narrowTools([...recorded.tools, novel], scope, view()).map((t) => t.name)).not.toContain('transfer_repo');
    for (const name of Object.keys(RULES)) {
      // Every rule names a real tool of some gitea-mcp generation (old comment tools included).
      expect([...recorded.tools.map((t) => t.name), 'get_issue_comments_by_index', 'create_issue_comment', 'edit_issue_comment']).toContain(name);
    }
  });
});

describe('a call', () => {
  it('answering on the task\'s own issue goes through, in either letter case of the repository', () => {
    expect(allow('issue_write', { ...repo, method: 'add_comment', index: 7, body: 'hi' })).toBe(true);
    expect(allow('issue_write', { owner: 'ACME', repo: 'Widget', method: 'add_comment', index: '7', body: 'hi' })).toBe(true);
    expect(allow('create_issue_comment', { ...repo, index: 7, body: 'hi' })).toBe(true);
  });

  it('answering anywhere else is refused', () => {
    expect(reason('issue_write', { ...repo, method: 'add_comment', index: 8, body: 'x' })).toMatch(/only to #7/);
    expect(reason('issue_write', { owner: 'acme', repo: 'secret', method: 'add_comment', index: 7, body: 'x' })).toMatch(/only the repository acme\/widget/);
    expect(reason('issue_write', { ...repo, method: 'add_comment', index: 7, issue_number: 8, body: 'x' })).toMatch(/differ/);
    expect(reason('issue_write', { ...repo, method: 'add_comment', body: 'x' })).toMatch(/only to #7/);
  });

  it('editing is limited to the comments the gate created in this task', () => {
    expect(allow('issue_write', { ...repo, method: 'edit_comment', commentID: 501, body: 'x' })).toBe(true);
    expect(reason('issue_write', { ...repo, method: 'edit_comment', commentID: 502, body: 'x' })).toMatch(/not posted by you/);
    expect(reason('edit_issue_comment', { ...repo, commentID: 502, body: 'x' })).toMatch(/not posted by you/);
  });

  it('every write the issue lists is refused', () => {
    const writes: Array<[string, Record<string, unknown>]> = [
      ['create_or_update_file', { ...repo, filePath: 'README.md', content: 'x', message: 'm', branch_name: 'main' }],
      ['delete_file', { ...repo, filePath: 'README.md', message: 'm', branch_name: 'main', sha: 'abc' }],
      ['create_branch', { ...repo, branch: 'x', old_branch: 'main' }],
      ['delete_branch', { ...repo, branch: 'ccweb/issue-7' }],
      ['pull_request_write', { ...repo, method: 'merge', index: 7 }],
      ['pull_request_review_write', { ...repo, method: 'create', index: 7, state: 'APPROVED' }],
      ['actions_config_read', { ...repo, method: 'list_repo_secrets' }],
      ['actions_config_write', { ...repo, method: 'upsert_repo_secret', name: 'X', data: 'y' }],
      ['actions_run_write', { ...repo, method: 'dispatch_workflow', workflow_id: 'ci.yml', ref: 'main' }],
      ['create_repo', { name: 'x' }],
      ['fork_repo', { user: 'acme', repo: 'widget' }],
      ['search_repos', { keyword: 'secret' }],
      ['wiki_write', { ...repo, method: 'create', title: 'x', content: 'y' }],
      ['issue_write', { ...repo, method: 'create', title: 'x', body: 'y' }],
      ['issue_write', { ...repo, method: 'update', index: 7, state: 'closed' }],
      ['issue_write', { ...repo, method: 'add_labels', index: 7, labels: [1] }],
      ['label_write', { ...repo, method: 'create_repo_label', name: 'x', color: '#fff' }],
      ['create_tag', { ...repo, tag_name: 'v9' }],
      ['get_me', {}],
    ];
    for (const [tool, args] of writes) expect(allow(tool, args), tool).toBe(false);
  });

  it('reading another repository is refused, reading this one goes through', () => {
    expect(allow('get_file_contents', { ...repo, filePath: 'src/a.ts', ref: 'main' })).toBe(true);
    expect(allow('pull_request_read', { ...repo, method: 'get_diff', index: 3 })).toBe(true);
    expect(allow('issue_read', { ...repo, method: 'get_comments', index: 12 })).toBe(true);
    expect(reason('get_file_contents', { owner: 'acme', repo: 'secret', filePath: 'key.txt', ref: 'main' })).toMatch(/only the repository/);
    expect(reason('list_commits', { owner: 'other', repo: 'widget', page: 1, perPage: 5 })).toMatch(/only the repository/);
    expect(reason('get_file_contents', { filePath: 'x', ref: 'main' })).toMatch(/owner and repo are required/);
  });

  it('a path or ref cannot walk out of the repository', () => {
    expect(reason('get_file_contents', { ...repo, filePath: '../../secret/raw/key.txt', ref: 'main' })).toMatch(/\.\. segments/);
    expect(reason('get_dir_contents', { ...repo, filePath: 'a/../../b', ref: 'main' })).toMatch(/\.\. segments/);
    expect(reason('get_commit', { ...repo, sha: 'main?x=1' })).toMatch(/control characters/);
    expect(reason('get_file_contents', { ...repo, filePath: 'a%2F..%2Fb', ref: 'main' })).toMatch(/%/);
    expect(badPathReason('ref', 'feature/x.y')).toBeNull();
    expect(badPathReason('ref', 'a\\..\\b')).not.toBeNull();
  });

  it('an argument the rule does not name is refused (a later gitea-mcp gains nothing by adding one)', () => {
    expect(reason('get_file_contents', { ...repo, filePath: 'a', ref: 'main', other_repo: 'secret' })).toMatch(/argument other_repo/);
    expect(reason('issue_write', { ...repo, method: 'add_comment', index: 7, body: 'x', state: 'closed' })).toMatch(/argument state/);
  });

  it('the labels group works only when enabled, and only on the task\'s issue', () => {
    const labels = view({ extra: ['labels'] });
    expect(allow('issue_write', { ...repo, method: 'add_labels', index: 7, labels: [1] }, labels)).toBe(true);
    expect(allow('issue_write', { ...repo, method: 'add_labels', index: 8, labels: [1] }, labels)).toBe(false);
    expect(reason('issue_write', { ...repo, method: 'add_labels', index: 7, labels: [1] })).toMatch(/not enabled/);
  });
});

describe('the comment an answer created', () => {
  it('is read from both generations of result', () => {
    expect(createdCommentId({ content: [{ type: 'text', text: JSON.stringify({ id: 88, body: 'x' }) }] })).toBe(88);
    expect(createdCommentId({ content: [{ type: 'text', text: JSON.stringify({ Result: { id: 89 } }) }] })).toBe(89);
    expect(createdCommentId({ content: [{ type: 'text', text: 'not json' }] })).toBeNull();
  });
});

describe('the edges a review found', () => {
  it('numbers Go would read otherwise, names that only fold to ours, and inherited property names are refused', () => {
    // 16 digits round in a double (…993 → …992) while Go's ParseInt keeps them.
    expect(reason('issue_write', { ...repo, method: 'edit_comment', commentID: '9007199254740993', body: 'x' }, view({ ownComments: new Set([9007199254740992]) }))).toMatch(/commentID must be/);
    expect(reason('issue_write', { owner: '\u212Acme', repo: 'widget', method: 'add_comment', index: 7, body: 'x' }, view())).toMatch(/must be Gitea names/);
    expect(reason('constructor', {})).toMatch(/not available/);
    expect(reason('__proto__', {})).toMatch(/not available/);
    expect(reason('issue_write', { ...repo, method: 'constructor', index: 7 })).toMatch(/not allowed/);
  });

  it('forwards the task\'s own spelling of owner and repo', () => {
    const d = decideCall('issue_write', { owner: 'ACME', repo: 'Widget', method: 'add_comment', index: 7, body: 'x' }, scope, view());
    expect(d.allow).toBe(true);
    if (d.allow) expect(forwardedArguments({ owner: 'ACME', repo: 'Widget', method: 'add_comment', index: 7, body: 'x' }, scope, d.rule)).toEqual({ owner: 'acme', repo: 'widget', method: 'add_comment', index: 7, body: 'x' });
  });
});

describe('the calls file', () => {
  it('pairs a started line with its outcome; a call whose end nobody saw is audited as failed', () => {
    const at = '2026-12-02T00:00:00.000Z';
    const base = { at, taskId: 't', tool: 'issue_write', method: 'add_comment', place: { index: 7 } };
    const text = [
      JSON.stringify({ ...base, outcome: 'started', callId: '1-1' }),
      JSON.stringify({ ...base, outcome: 'forwarded', callId: '1-1', createdCommentId: 5 }),
      JSON.stringify({ ...base, outcome: 'refused', reason: 'no' }),
      JSON.stringify({ ...base, outcome: 'started', callId: '1-2' }),
      '{"torn',
    ].join('\n');
    const lines = parseGateCalls(text);
    expect(lines.map((l) => [l.outcome, l.callId ?? null])).toEqual([
      ['forwarded', '1-1'],
      ['refused', null],
      ['failed', '1-2'],
    ]);
    expect(lines[2]!.reason).toMatch(/ended unseen/);
  });
});
