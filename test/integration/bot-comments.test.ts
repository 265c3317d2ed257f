// Reading the bot's comments back (src/gitea/bot-comments.ts) and the two readers built on it that
// have no other test of their own: restart recovery's replyExists (src/verification/reply-exists.ts)
// and the repository lookup (src/gitea/current-repository.ts). Over HTTP on 127.0.0.1 against the
// Gitea REST double (a stand-in: it filters `since` like Gitea 1.26.3, in whole seconds of
// `updated_at`), with the real typed client.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatMarker, formatReceiptMarker, hasReceiptMarker } from '../../src/domain/marker.js';
import { listBotComments } from '../../src/gitea/bot-comments.js';
import { currentRepositoryOnGitea } from '../../src/gitea/current-repository.js';
import { replyExistsOnGitea } from '../../src/verification/reply-exists.js';
import { createGiteaClient, type GiteaClient } from '../../src/gitea/gitea-client.js';
import { BOT, OWNER, REPO, TOKEN, startGitea, taskRecord, turnRecord, type GiteaFixture } from '../support/verification-world.js';

let gitea: GiteaFixture;
let client: GiteaClient;
const T0 = Date.parse('2026-03-10T08:00:00.000Z');
const minutes = (n: number) => new Date(T0 + n * 60_000);

beforeEach(async () => {
  gitea = await startGitea([5]);
  client = createGiteaClient({ baseUrl: gitea.server.url, token: TOKEN, retries: 0 });
});
afterEach(async () => {
  await gitea.close();
});

function post(user: string, body: string, at: Date): number {
  return gitea.double.addComment(OWNER, REPO, 5, { user, body, createdAt: at }).id as number;
}

describe('listBotComments', () => {
  const receipt = formatReceiptMarker('t:status:received');

  it('asks Gitea from the moment minus the margin and keeps the bot comments with the marker, earliest first', async () => {
    post(BOT, `old ${receipt}`, minutes(-10));
    const inMargin = post(BOT, `in margin ${receipt}`, minutes(-4));
    post('mallory', `quoted ${receipt}`, minutes(1));
    post(BOT, 'no marker', minutes(1));
    const after = post(BOT, `after ${receipt}`, minutes(2));
    // The bot login in another case is the same Gitea user.
    const query = { owner: OWNER, repo: REPO, issue: 5, botLogin: BOT.toUpperCase(), hasMarker: (b: string) => hasReceiptMarker(b, 't:status:received'), since: T0 };
    expect((await listBotComments(client, query)).map((c) => c.id)).toEqual([inMargin, after]);
    expect((await listBotComments(client, { ...query, sinceMarginMs: 0 })).map((c) => c.id)).toEqual([after]);
  });

  it('throws what Gitea throws', async () => {
    gitea.double.faults.failNext(/\/issues\/5\/comments$/, 500);
    await expect(listBotComments(client, { owner: OWNER, repo: REPO, issue: 5, botLogin: BOT, hasMarker: () => true, since: T0 })).rejects.toMatchObject({ code: 'gitea_server_error' });
  });
});

describe('replyExistsOnGitea (restart recovery)', () => {
  const task = taskRecord(5, { taskId: 't5' });
  const turn = turnRecord(task, { turnKey: 't5:1', startedAt: new Date(T0).toISOString() });
  const exists = () => replyExistsOnGitea({ gitea: client, botLogin: BOT });

  it('is true only for the bot comment with this turn marker since the turn started', async () => {
    post(BOT, `other turn ${formatMarker({ taskId: 't5', turnKey: 't5:0', resourceKey: task.resourceKey })}`, minutes(1));
    post('alice', `quoting ${turn.marker}`, minutes(1));
    expect(await exists()(task, turn)).toBe(false);
    post(BOT, `answer\n\n${turn.marker}`, minutes(1));
    expect(await exists()(task, turn)).toBe(true);
  });

  it('does not see an answer older than the turn start minus the margin', async () => {
    post(BOT, `answer\n\n${turn.marker}`, minutes(-6));
    expect(await exists()(task, turn)).toBe(false);
    expect(await replyExistsOnGitea({ gitea: client, botLogin: BOT, sinceMarginMs: 7 * 60_000 })(task, turn)).toBe(true);
  });

  it('is false for a turn without a marker, without asking Gitea', async () => {
    const before = gitea.double.requests.length;
    expect(await exists()(task, { ...turn, marker: 'no marker' })).toBe(false);
    expect(gitea.double.requests.length).toBe(before);
  });
});

describe('currentRepositoryOnGitea', () => {
  it('follows the repository id; null without a usable id', async () => {
    const lookup = currentRepositoryOnGitea(client);
    const { id } = gitea.double.addRepo(OWNER, REPO) as { id: number };
    expect(await lookup({ repoId: id } as never)).toEqual({ owner: OWNER, name: REPO });
    expect(await lookup({ repoId: String(id) } as never)).toEqual({ owner: OWNER, name: REPO });
    expect(await lookup({ repoId: 'x' } as never)).toBeNull();
    expect(await lookup({ repoId: -1 } as never)).toBeNull();
    expect(await lookup({} as never)).toBeNull();
  });
});
