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
// Text that is not prose does not count: fenced code blocks (``` or ~~~, CommonMark rules for
// opening/closing; an unclosed fence runs to the end), inline code spans (matching backtick runs
// within one paragraph), and lines starting with `>` (quotes; replies usually quote the bot).
// Not handled (documented gaps): indented (4-space) code blocks, HTML comments, CommonMark "lazy"
// quote continuation lines (a line after `> …` without its own `>` counts as prose).

export type ParsedCommand = { kind: 'stop' } | { kind: 'instruction'; text: string };

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const QUOTE = /^ {0,3}>/;
/** Characters that, right before `@`, make it part of something else (e-mail, path, word, escape). */
const LEFT_BLOCKER = /[A-Za-z0-9_.+\-@/\\=%&]/;
/** Characters a Gitea login can continue with. */
const LOGIN_CHAR = /[A-Za-z0-9_-]/;

/**
 * `body` with every non-prose character (code, quotes) replaced by a space; line breaks and
 * length are kept, so offsets into the result are offsets into `body`.
 */
export function maskNonProse(body: string): string {
  const out = body.split('');
  const lines: Array<{ start: number; text: string }> = [];
  let pos = 0;
  for (const raw of body.split('\n')) {
    lines.push({ start: pos, text: raw.endsWith('\r') ? raw.slice(0, -1) : raw });
    pos += raw.length + 1;
  }
  const blank = (i: number, len: number) => {
    for (let k = i; k < i + len; k++) out[k] = ' ';
  };

  // Block level: fences and quotes.
  const prose: boolean[] = [];
  let fence: { char: string; len: number } | undefined;
  for (const line of lines) {
    if (fence !== undefined) {
      const m = FENCE_OPEN.exec(line.text);
      if (m && m[1]![0] === fence.char && m[1]!.length >= fence.len && m[2]!.trim() === '') fence = undefined;
      blank(line.start, line.text.length);
      prose.push(false);
      continue;
    }
    const open = FENCE_OPEN.exec(line.text);
    if (open && !(open[1]![0] === '`' && open[2]!.includes('`'))) {
      fence = { char: open[1]![0]!, len: open[1]!.length };
      blank(line.start, line.text.length);
      prose.push(false);
      continue;
    }
    if (QUOTE.test(line.text)) {
      blank(line.start, line.text.length);
      prose.push(false);
      continue;
    }
    prose.push(line.text.trim() !== '');
  }

  // Inline code spans, within each paragraph (a run of consecutive non-blank prose lines).
  for (let i = 0; i < lines.length; ) {
    if (!prose[i]) {
      i++;
      continue;
    }
    let j = i;
    while (j + 1 < lines.length && prose[j + 1]) j++;
    const start = lines[i]!.start;
    const end = lines[j]!.start + lines[j]!.text.length;
    maskCodeSpans(body, out, start, end);
    i = j + 1;
  }
  return out.join('');
}

function runLength(text: string, at: number, end: number): number {
  let n = 0;
  while (at + n < end && text[at + n] === '`') n++;
  return n;
}

function maskCodeSpans(text: string, out: string[], start: number, end: number): void {
  let i = start;
  while (i < end) {
    if (text[i] !== '`') {
      i++;
      continue;
    }
    const n = runLength(text, i, end);
    // Find a closing run of exactly n backticks.
    let k = i + n;
    let close = -1;
    while (k < end) {
      if (text[k] === '`') {
        const m = runLength(text, k, end);
        if (m === n) {
          close = k;
          break;
        }
        k += m;
      } else {
        k++;
      }
    }
    if (close === -1) {
      i += n; // a lone backtick run is literal text
      continue;
    }
    for (let x = i; x < close + n; x++) if (out[x] !== '\n' && out[x] !== '\r') out[x] = ' ';
    i = close + n;
  }
}

function escapeRegExp(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Offsets `[start, end)` of every mention of `botLogin` in `body` that counts (see file comment). */
export function findMentions(body: string, botLogin: string): Array<{ start: number; end: number }> {
  if (botLogin === '') return [];
  const masked = maskNonProse(body);
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

/** True when `body` mentions `@botLogin` in prose (not in code or a quote). */
export function mentionsBot(body: string, botLogin: string): boolean {
  return findMentions(body, botLogin).length > 0;
}

/**
 * `null` when the bot is not mentioned. `stop` when everything after the first counting mention is
 * the single word `stop` (case-insensitive, optional trailing `.`/`!`), e.g. `@ccweb-bot stop` or
 * `Hey @ccweb-bot STOP!`. Otherwise an instruction whose text is the whole comment body, untouched.
 */
export function parseCommand(body: string, botLogin: string): ParsedCommand | null {
  const first = findMentions(body, botLogin)[0];
  if (first === undefined) return null;
  const rest = body.slice(first.end).trim();
  if (/^stop[.!]?$/i.test(rest)) return { kind: 'stop' };
  return { kind: 'instruction', text: body };
}
