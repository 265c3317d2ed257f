// A mention Gitea does not show (HTML comment, indented code, lazy quote
// continuation, …) must not start a task. The oracle is real Gitea's rendering of each comment of
// a corpus of tricky comments (POST /api/v1/markdown, recorded from Gitea 1.26.3 into
// test/fixtures/mentions/, re-recordable with scripts/record-mention-corpus.mjs), and the same corpus
// rendered live by a throwaway real Gitea must give the recorded verdicts.
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { startSeededGitea, type SeededGitea } from '../support/real-gitea/index.js';
import { mentionsBot } from '../../src/webhook/mention.js';

interface Case {
  name: string;
  body: string;
  html: string;
}

const fixture = JSON.parse(readFileSync(new URL('../fixtures/mentions/gitea-1.26.3-rendered.json', import.meta.url), 'utf8')) as { cases: Case[] };
const BOT = 'ccweb-bot';

/**
 * Whether Gitea's HTML shows a mention link of the bot outside a block quote (the service ignores
 * quotes on purpose: replies quote the bot).
 */
function giteaShowsMention(html: string): boolean {
  const re = /<a\s[^>]*href="[^"]*\/ccweb-bot"[^>]*>@ccweb-bot<\/a>/gi;
  for (let m = re.exec(html); m !== null; m = re.exec(html)) {
    const before = html.slice(0, m.index);
    const opened = (before.match(/<blockquote\b/g) ?? []).length;
    const closed = (before.match(/<\/blockquote>/g) ?? []).length;
    if (opened === closed) return true;
  }
  return false;
}

// Where the service deliberately differs from Gitea's mention links (src/webhook/mention.ts):
// stricter (no trigger though Gitea links): an escaped `\@`, text inside a raw HTML block;
// more lenient (trigger though Gitea does not link): right after CJK text.
const DELIBERATE: Record<string, boolean> = {
  'escaped at': false,
  'html block div': false,
  cjk: true,
};

describe('mentions against real Gitea rendering (recorded)', () => {
  it('the corpus covers the hidden cases of the issue', () => {
    const names = fixture.cases.map((c) => c.name);
    for (const n of ['html comment', 'indented code', 'lazy quote continuation', 'unclosed html comment', 'link reference definition']) expect(names).toContain(n);
    // And Gitea really hides them: the oracle is not vacuous.
    for (const n of ['html comment', 'indented code', 'lazy quote continuation']) {
      expect(giteaShowsMention(fixture.cases.find((c) => c.name === n)!.html), n).toBe(false);
    }
    expect(giteaShowsMention(fixture.cases.find((c) => c.name === 'plain')!.html)).toBe(true);
  });

  for (const c of fixture.cases) {
    const gitea = giteaShowsMention(c.html);
    const expected = DELIBERATE[c.name] ?? gitea;
    it(`${c.name}: ${JSON.stringify(c.body)} → ${expected ? 'mention' : 'no mention'}${c.name in DELIBERATE ? ' (deliberate)' : ''}`, () => {
      expect(mentionsBot(c.body, BOT)).toBe(expected);
    });
  }

  it('never a trigger where Gitea shows nothing, apart from the CJK rule', () => {
    const hiddenButTriggered = fixture.cases.filter((c) => !giteaShowsMention(c.html) && mentionsBot(c.body, BOT) && c.name !== 'cjk');
    expect(hiddenButTriggered.map((c) => c.name)).toEqual([]);
  });
});

// The same corpus rendered now by a throwaway real Gitea (test/support/real-gitea, the version
// scripts/install-gitea.mjs pins): the live verdicts must equal the recorded ones, so the recorded
// oracle cannot drift from Gitea unnoticed.
describe('mentions against a live real Gitea', () => {
  let g: SeededGitea | null = null;
  afterAll(async () => {
    await g?.close();
  });

  it('renders every corpus comment as recorded', { timeout: 240_000 }, async () => {
    g = await startSeededGitea();
    const { token } = g.users.admin;
    for (const c of fixture.cases) {
      const res = await fetch(`${g.url}/api/v1/markdown`, {
        method: 'POST',
        headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ Text: c.body, Mode: 'comment' }),
      });
      expect(res.status).toBe(200);
      expect(giteaShowsMention(await res.text()), c.name).toBe(giteaShowsMention(c.html));
    }
  });
});
