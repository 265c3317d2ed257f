/**
 * Records the webhook fixtures (test/fixtures/gitea/webhooks/) from a real Gitea: starts the pinned
 * build (scripts/install-gitea.mjs) with ROOT_URL https://gitea.example.com/, plays a small scenario
 * through its API as real users, and writes each delivery Gitea makes byte for byte (`<name>.json`)
 * with the headers it sent (`<name>.headers.json`), signed with the secret `test-secret`.
 *
 *   node --import tsx scripts/record-gitea-webhooks.ts [--out DIR]
 *
 * The scenario (deterministic apart from times, UUIDs, the PR head sha and avatar hashes):
 * `alice` owns the public `alice/widgets`; `bob` (write) opens issue #7 and pull request #8 from the
 * branch `fix/login-timeout`; `ccweb-bot` is a write collaborator. Then, with the webhook on:
 *   issue_comment_created_on_issue  bob mentions the bot on #7
 *   issue_comment_edited            bob edits that comment (adds a `<link>`: Go escapes `<>&`)
 *   pull_request_comment_created    bob mentions the bot on #8 (`&` in the body)
 *   issue_comment_created_by_bot    the bot answers on #7
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { giteaApi, eventually } from '../src/demo/real-gitea/api.js';
import { startRealGitea } from '../src/demo/real-gitea/gitea-process.js';
import { startWebhookRecorder, type RecordedRequest } from '../test/support/real-gitea/webhook-recorder.js';

const { values } = parseArgs({ options: { out: { type: 'string' } } });
const outDir = values.out ?? fileURLToPath(new URL('../test/fixtures/gitea/webhooks/', import.meta.url));
const SECRET = 'test-secret';

const gitea = await startRealGitea({ rootUrl: 'https://gitea.example.com/' });
const recorder = await startWebhookRecorder();
try {
  const url = gitea.url;
  const users = {
    admin: { login: 'gitea-admin', password: 'pw-gitea-admin-0123456789', email: 'admin@example.com', full_name: 'Site Admin', token: '' },
    alice: { login: 'alice', password: 'pw-alice-0123456789', email: 'alice@example.com', full_name: 'Alice Example', token: '' },
    bob: { login: 'bob', password: 'pw-bob-0123456789', email: 'bob@example.com', full_name: 'Bob Builder', token: '' },
    bot: { login: 'ccweb-bot', password: 'pw-ccweb-bot-0123456789', email: 'ccweb-bot@example.com', full_name: 'ccweb bot', token: '' },
  };
  await gitea.cli(['admin', 'user', 'create', '--username', users.admin.login, '--password', users.admin.password, '--email', users.admin.email, '--admin', '--must-change-password=false']);
  const adminAuth = { basic: { login: users.admin.login, password: users.admin.password } };
  for (const u of [users.alice, users.bob, users.bot]) {
    await giteaApi(url, adminAuth, 'POST', '/admin/users', { username: u.login, password: u.password, email: u.email, full_name: u.full_name, must_change_password: false }, 201);
  }
  for (const u of Object.values(users)) {
    u.token = (await giteaApi<{ sha1: string }>(url, { basic: { login: u.login, password: u.password } }, 'POST', `/users/${u.login}/tokens`, { name: 'record', scopes: ['all'] }, 201)).body.sha1;
  }
  const as = (u: { token: string }) => ({ token: u.token });
  const b64 = (s: string) => Buffer.from(s).toString('base64');

  await giteaApi(url, as(users.alice), 'POST', '/user/repos', { name: 'widgets', private: false, auto_init: false, default_branch: 'main', description: 'Widget rendering service' }, 201);
  await giteaApi(url, as(users.alice), 'POST', '/repos/alice/widgets/contents', {
    branch: 'main',
    message: 'Initial import',
    files: [
      { operation: 'create', path: 'README.md', content: b64('# widgets\n\nRenders widgets.\n') },
      { operation: 'create', path: 'src/login.js', content: b64('export const LOGIN_TIMEOUT_MS = 10_000;\n') },
    ],
  }, 201);
  for (const u of [users.bob, users.bot]) await giteaApi(url, as(users.alice), 'PUT', `/repos/alice/widgets/collaborators/${u.login}`, { permission: 'write' }, 204);

  // Issues and pull requests share one number sequence: #1–#6 come first so the fixtures keep #7 and #8.
  for (let n = 1; n <= 6; n++) await giteaApi(url, as(users.alice), 'POST', '/repos/alice/widgets/issues', { title: `Earlier issue ${n}`, body: '' }, 201);
  const issue = await giteaApi<{ number: number }>(url, as(users.bob), 'POST', '/repos/alice/widgets/issues', {
    title: 'Build fails on main after dependency bump',
    body: "Since the last dependency bump `npm run build` fails with:\r\n\r\n```\r\nTS2307: Cannot find module 'left-pad'\r\n```",
  }, 201);
  const sha = (await giteaApi<{ sha: string }>(url, as(users.bob), 'GET', '/repos/alice/widgets/contents/src/login.js?ref=main')).body.sha;
  await giteaApi(url, as(users.bob), 'POST', '/repos/alice/widgets/contents', {
    branch: 'main',
    new_branch: 'fix/login-timeout',
    message: 'Raise the login timeout to 30s',
    files: [{ operation: 'update', path: 'src/login.js', sha, content: b64('export const LOGIN_TIMEOUT_MS = 30_000;\n') }],
  }, 201);
  await eventually('branch fix/login-timeout', () => giteaApi(url, as(users.bob), 'GET', '/repos/alice/widgets/branches/fix%2Flogin-timeout', undefined, 200));
  const pr = await giteaApi<{ number: number }>(url, as(users.bob), 'POST', '/repos/alice/widgets/pulls', {
    head: 'fix/login-timeout',
    base: 'main',
    title: 'Fix login timeout',
    body: 'Raises the login timeout to 30s and adds a retry.\r\n\r\nCloses #6',
  }, 201);
  if (issue.body.number !== 7 || pr.body.number !== 8) throw new Error(`expected #7 and #8, got #${issue.body.number} and #${pr.body.number}`);

  await giteaApi(url, as(users.alice), 'POST', '/repos/alice/widgets/hooks', {
    type: 'gitea',
    active: true,
    branch_filter: '*',
    events: ['issue_comment', 'pull_request_comment'],
    config: { url: recorder.url, content_type: 'json', secret: SECRET, http_method: 'post' },
  }, 201);

  const byComment = (id: number, action: string) => (r: RecordedRequest) => {
    const p = JSON.parse(r.body.toString()) as { action: string; comment: { id: number } };
    return p.action === action && p.comment.id === id;
  };
  const comment = async (u: { token: string }, index: number, body: string) =>
    (await giteaApi<{ id: number }>(url, as(u), 'POST', `/repos/alice/widgets/issues/${index}/comments`, { body }, 201)).body.id;

  const recorded: Array<[string, RecordedRequest]> = [];
  const onIssue = await comment(users.bob, 7, '@ccweb-bot please fix the failing build on main');
  recorded.push(['issue_comment_created_on_issue', await recorder.waitFor(byComment(onIssue, 'created'))]);
  await giteaApi(url, as(users.bob), 'PATCH', `/repos/alice/widgets/issues/comments/${onIssue}`, {
    body: '@ccweb-bot please fix the failing build on main (see the CI log <https://ci.example.com/build/881>)',
  }, 200);
  recorded.push(['issue_comment_edited', await recorder.waitFor(byComment(onIssue, 'edited'))]);
  const onPr = await comment(users.bob, 8, '@ccweb-bot please fix the lint errors & the failing test');
  recorded.push(['pull_request_comment_created', await recorder.waitFor(byComment(onPr, 'created'))]);
  const byBot = await comment(users.bot, 7, 'Fixed in #9: pinned `left-pad` and regenerated the lockfile. CI is green on the branch `ccweb/fix-issue-7`.');
  recorded.push(['issue_comment_created_by_bot', await recorder.waitFor(byComment(byBot, 'created'))]);

  const version = (await giteaApi<{ version: string }>(url, null, 'GET', '/version')).body.version;
  mkdirSync(outDir, { recursive: true });
  for (const [name, r] of recorded) {
    writeFileSync(join(outDir, `${name}.json`), r.body);
    // Host names the recorder's random port: not part of what Gitea decides.
    const headers = Object.fromEntries(r.rawHeaders.filter(([k]) => k.toLowerCase() !== 'host'));
    const meta = {
      recorded_from: `Gitea ${version} (code.gitea.io/gitea built by scripts/install-gitea.mjs), repo webhook, type gitea, POST, content type json; recorded by scripts/record-gitea-webhooks.ts`,
      method: r.method,
      body_file: `${name}.json`,
      body_bytes: r.body.length,
      body_sha256: createHash('sha256').update(r.body).digest('hex'),
      secret: SECRET,
      signature_algorithm: "hex(HMAC-SHA256(secret, raw body bytes)); X-Hub-Signature-256 = 'sha256=' + same hex; X-Hub-Signature = 'sha1=' + hex(HMAC-SHA1)",
      headers,
      notes: [
        'Body file is byte-exact as Gitea sent it (2-space indent, no trailing newline, <>& escaped); sign/verify over these exact bytes.',
        "Headers in the order Gitea's Go client sent them (Host, which names the recorder's port, left out). Never depend on header order.",
        'Accept-Encoding, Content-Length and User-Agent come from Go\'s net/http client, not from Gitea code.',
      ],
    };
    writeFileSync(join(outDir, `${name}.headers.json`), `${JSON.stringify(meta, null, 2)}\n`);
    console.log(`${name}: ${r.body.length} bytes, delivery ${r.headers['x-gitea-delivery']}`);
  }
} finally {
  await recorder.close();
  await gitea.close();
}
