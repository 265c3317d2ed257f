/**
 * Where the transition labels of a laid-out statechart go. The layout library routes the lines
 * without labels (given to it, they become nodes of their own and make the task machine twice as
 * wide); each label block is then put beside its own line at the spot that covers no state, no
 * other label and as little of the other lines as possible.
 */
export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export type Point = [number, number];

/** Edge labels are drawn at this size (visualizer page and SVG export), one line per transition. */
export const LABEL_FONT = 10.5;
export const LABEL_LINE = 13;

/**
 * The width of a line of sans-serif text, per character class (ems of common sans faces, rounded
 * up): event names are mostly capitals, which a flat average under-estimates.
 */
export function textWidth(text: string, fontPx: number): number {
  let em = 0;
  for (const ch of text) {
    if (/[A-Z]/.test(ch)) em += ch === 'M' || ch === 'W' ? 0.9 : 0.72;
    else if (/[a-z]/.test(ch)) em += ch === 'm' || ch === 'w' ? 0.85 : /[ijlft]/.test(ch) ? 0.36 : 0.6;
    else if (/[0-9]/.test(ch)) em += 0.64;
    else if (ch === ' ') em += 0.32;
    else if (ch === '_') em += 0.52;
    else em += 0.4;
  }
  return em * fontPx;
}

export function labelBlock(labels: string[]): { w: number; h: number } {
  return { w: Math.max(0, ...labels.map((l) => textWidth(l, LABEL_FONT))) + 6, h: labels.length * LABEL_LINE };
}

/** Points along an SVG path of M, L and C commands (what the layout writes). */
export function samplePath(d: string): Point[] {
  const tok = d.match(/[MLC]|-?\d+(?:\.\d+)?/g) ?? [];
  const out: Point[] = [];
  let i = 0;
  let cmd = 'M';
  let cur: Point = [0, 0];
  const point = (): Point => [Number(tok[i++]), Number(tok[i++])];
  while (i < tok.length) {
    if (/^[MLC]$/.test(tok[i]!)) cmd = tok[i++]!;
    if (cmd === 'C') {
      const [a, b, p] = [point(), point(), point()];
      for (let k = 1; k <= 12; k++) {
        const t = k / 12;
        const u = 1 - t;
        const at = (n: 0 | 1) => u * u * u * cur[n] + 3 * u * u * t * a[n] + 3 * u * t * t * b[n] + t * t * t * p[n];
        out.push([at(0), at(1)]);
      }
      cur = p;
    } else {
      const p = point();
      if (cmd === 'L') for (let k = 1; k <= 8; k++) out.push([cur[0] + ((p[0] - cur[0]) * k) / 8, cur[1] + ((p[1] - cur[1]) * k) / 8]);
      else out.push(p);
      cur = p;
    }
  }
  return out;
}

/**
 * The point a fraction `f` of the way along a sampled line, by length. The samples are not evenly
 * spaced (twelve per curve, eight per straight piece, however long), so counting samples would
 * bunch the candidates on short pieces, such as the stub through a state's `invoke …` line.
 */
export function pointAlong(pts: Point[], f: number): Point {
  if (pts.length < 2) return pts[0] ?? [0, 0];
  const steps = pts.slice(1).map((p, k) => Math.hypot(p[0] - pts[k]![0], p[1] - pts[k]![1]));
  let left = f * steps.reduce((a, b) => a + b, 0);
  for (const [k, step] of steps.entries()) {
    if (left <= step && step > 0) {
      const t = left / step;
      const [a, b] = [pts[k]!, pts[k + 1]!];
      return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t];
    }
    left -= step;
  }
  return pts[pts.length - 1]!;
}

export function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

/**
 * Top-left corners for each line's label block, in the order given. Candidates lie along the
 * line (middle first, by length), centred on it, then right, left, above and below it: between two
 * rows of states, where many lines fan out, a wide block often fits only above or below its line.
 * A candidate pays 100 per state or placed label it covers, 30 for leaving `frame` (the drawing
 * would grow), 1 per point of another line under it. The longest blocks are placed first: they
 * have the fewest places to go.
 */
export function placeLabels(lines: { path: string; labels: string[] }[], obstacles: Box[], frame: Box): Point[] {
  const samples = lines.map((l) => samplePath(l.path));
  const placed: Box[] = [];
  const result: Point[] = lines.map(() => [0, 0]);
  const order = lines.map((_, i) => i).sort((a, b) => lines[b]!.labels.length - lines[a]!.labels.length || a - b);
  for (const i of order) {
    const { w, h } = labelBlock(lines[i]!.labels);
    const pts = samples[i]!;
    let best: Box | null = null;
    let bestScore = Infinity;
    for (const f of [0.5, 0.42, 0.58, 0.34, 0.66, 0.26, 0.74, 0.18, 0.82]) {
      const [px, py] = pointAlong(pts, f);
      // On the line first (drawn with a white halo, it cannot be read as another line's label), then beside it.
      for (const c of [
        { x: px - w / 2, y: py - h / 2, w, h },
        { x: px + 5, y: py - h / 2, w, h },
        { x: px - w - 5, y: py - h / 2, w, h },
        { x: px - w / 2, y: py - h - 3, w, h },
        { x: px - w / 2, y: py + 3, w, h },
      ]) {
        let score = 0;
        for (const o of obstacles) if (overlaps(c, o)) score += 100;
        for (const o of placed) if (overlaps(c, o)) score += 100;
        if (c.x < frame.x || c.x + c.w > frame.x + frame.w || c.y < frame.y || c.y + c.h > frame.y + frame.h) score += 30;
        samples.forEach((s, j) => {
          if (j !== i) for (const [x, y] of s) if (x > c.x && x < c.x + c.w && y > c.y && y < c.y + c.h) score += 1;
        });
        if (score < bestScore) {
          best = c;
          bestScore = score;
        }
      }
      if (bestScore === 0) break;
    }
    placed.push(best!);
    result[i] = [best!.x, best!.y];
  }
  return result;
}
