// How a path refused from a published change is named in the bot's comment. In receipts/,
// which writes that comment, not in publish/: publish/ imports receipts/, and a folder cycle is
// not allowed.

/**
 * A refused path as the service writes it on Gitea: the name came from the agent's change, so only
 * a plain path alphabet is kept (no markdown, no mention, no HTML), bounded in length.
 */
export function pathForText(path: string): string {
  const clean = path.replace(/[^A-Za-z0-9._/-]/g, '_');
  return clean.length > 120 ? `${clean.slice(0, 119)}…` : clean;
}

/** At most `max` refused paths for a comment, and how many more there were. */
export function pathsForText(paths: readonly string[], max = 10): { shown: string[]; more: number } {
  return { shown: paths.slice(0, max).map(pathForText), more: Math.max(0, paths.length - max) };
}
