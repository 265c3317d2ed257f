// Does a comment address the bot? Pure text rules, documented here because users will ask.
//
// A mention is `@<botLogin>`, case-insensitive, as a whole word:
// - left of `@`: start of text, or a character that cannot end an e-mail local part, a URL path or
//   another word — so `email@ccweb-bot`, `x.@ccweb-bot`, `https://host/@ccweb-bot` and
//   `\@ccweb-bot` are NOT mentions; whitespace, punctuation like `(`/`,`/`:`, and CJK text are fine
//   (`请@ccweb-bot 修复` is a mention: CJK is written without spaces).
// - right of the login: end of text or a character that cannot continue a Gitea login (ASCII letter,
//   digit, `_`, `-`, or `.` followed by one of those) — so `@ccweb-botx` and `@ccweb-bot-2` are other
//   users, while `@ccweb-bot.`, `@ccweb-bot,` and `@ccweb-bot请` are mentions.
// Only text Gitea shows as prose counts: a mention hidden in an HTML comment must not start a task.
// The comment is parsed as CommonMark + GFM tables/strikethrough by markdown-it (Gitea renders with
// goldmark, CommonMark + GFM) and only the text of paragraphs, headings, list items and table cells
// is searched. Not prose: fenced and indented code blocks, inline code spans, HTML comments and any
// other raw HTML (blocks and inline tags), link texts and image alt texts, link reference
// definitions, and block quotes including their lazy continuation lines (replies usually quote the
// bot). test/integration/mention-gitea-oracle.test.ts checks this against real Gitea's rendering.
// Deliberate differences from where Gitea draws mention links: `\@ccweb-bot` (a backslash escape, how
// a user writes the name without calling the bot) is not a mention, and `请@ccweb-bot` right after
// CJK text is (Gitea wants a space or punctuation before `@`; CJK is written without spaces).
import MarkdownIt from 'markdown-it';

export type ParsedCommand = { kind: 'stop' } | { kind: 'instruction'; text: string };

/** Characters that, right before `@`, make it part of something else (e-mail, path, word, escape). */
const LEFT_BLOCKER = /[A-Za-z0-9_.+\-@/\\=%&]/;
/** Characters a Gitea login can continue with. */
const LOGIN_CHAR = /[A-Za-z0-9_-]/;

// `default` = CommonMark + GFM tables and strikethrough; raw HTML recognised (as Gitea does) so that
// it can be left out; no linkify (a bare URL's `/@bot` is excluded by LEFT_BLOCKER anyway).
const md = new MarkdownIt('default', { html: true, linkify: false });
// Keep backslash escapes as their own tokens: `\@bot` must stay recognisable as escaped.
md.core.ruler.disable('text_join');

type Token = ReturnType<typeof md.parse>[number];

const NEEDS_PARSE = /[<`~>[\]\\&*_\t]|(?:^|\n) {4}/;

function inlineText(children: readonly Token[]): string {
  let out = '';
  let linkDepth = 0;
  for (const t of children) {
    switch (t.type) {
      case 'link_open':
        linkDepth++;
        out += ' ';
        break;
      case 'link_close':
        linkDepth = Math.max(0, linkDepth - 1);
        out += ' ';
        break;
      case 'text':
        out += linkDepth > 0 ? ' ' : t.content;
        break;
      case 'text_special':
        // An escape keeps its backslash (so `\@bot` is blocked on the left); an entity its text.
        out += linkDepth > 0 ? ' ' : t.info === 'escape' ? t.markup : t.content;
        break;
      case 'softbreak':
      case 'hardbreak':
        out += '\n';
        break;
      default:
        // code_inline, html_inline, image, emphasis markers: not prose, but a word boundary.
        out += ' ';
    }
  }
  return out;
}

/**
 * The text Gitea shows as prose (see the file comment), blocks separated by line breaks. Code, raw
 * HTML, link texts and quotes are left out.
 */
export function visibleProse(body: string): string {
  // Without any character that can hide text or move a word boundary (HTML, code, quotes, links,
  // escapes, entities, emphasis) and without indented lines, every character is prose: most
  // comments, and the parse costs ≈ 20 µs even for a one-liner.
  if (!NEEDS_PARSE.test(body)) return body;
  const tokens = md.parse(body, {});
  const parts: string[] = [];
  let quoteDepth = 0;
  for (const t of tokens) {
    if (t.type === 'blockquote_open') quoteDepth++;
    else if (t.type === 'blockquote_close') quoteDepth = Math.max(0, quoteDepth - 1);
    else if (t.type === 'inline' && quoteDepth === 0) parts.push(inlineText(t.children ?? []));
  }
  return parts.join('\n');
}

function escapeRegExp(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Offsets `[start, end)` into `visibleProse(body)` of every mention of `botLogin` that counts (see
 * file comment).
 */
export function findMentions(body: string, botLogin: string): Array<{ start: number; end: number }> {
  return mentionsIn(visibleProse(body), botLogin);
}

function mentionsIn(masked: string, botLogin: string): Array<{ start: number; end: number }> {
  if (botLogin === '') return [];
  const re = new RegExp('@' + escapeRegExp(botLogin), 'gi');
  const found: Array<{ start: number; end: number }> = [];
  for (let m = re.exec(masked); m !== null; m = re.exec(masked)) {
    const start = m.index;
    const end = start + m[0].length;
    const before = masked[start - 1];
    const after = masked[end];
    const afterNext = masked[end + 1];
    const leftOk = before === undefined || !LEFT_BLOCKER.test(before);
    const rightOk =
      after === undefined ||
      (!LOGIN_CHAR.test(after) && !(after === '.' && afterNext !== undefined && LOGIN_CHAR.test(afterNext)));
    if (leftOk && rightOk) found.push({ start, end });
  }
  return found;
}

/** True when `body` mentions `@botLogin` in prose (not in code, HTML, a link or a quote). */
export function mentionsBot(body: string, botLogin: string): boolean {
  // Most comments never name the bot: skip the Markdown parse for them.
  if (!body.toLowerCase().includes(`@${botLogin.toLowerCase()}`)) return false;
  return findMentions(body, botLogin).length > 0;
}

/**
 * `null` when the bot is not mentioned. `stop` when everything after the first counting mention is
 * the single word `stop` (case-insensitive, optional trailing `.`/`!`), e.g. `@ccweb-bot stop` or
 * `Hey @ccweb-bot STOP!`. Otherwise an instruction whose text is the whole comment body, untouched.
 */
export function parseCommand(body: string, botLogin: string): ParsedCommand | null {
  if (botLogin === '' || !body.toLowerCase().includes(`@${botLogin.toLowerCase()}`)) return null;
  const prose = visibleProse(body);
  const first = mentionsIn(prose, botLogin)[0];
  if (first === undefined) return null;
  const rest = prose.slice(first.end).trim();
  if (/^stop[.!]?$/i.test(rest)) return { kind: 'stop' };
  return { kind: 'instruction', text: body };
}
