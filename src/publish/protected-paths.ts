// Which paths of a change the publisher never commits: CI definitions. A workflow file the
// agent writes runs, once pushed, on Gitea's runners with the repository's secrets — so a prompt
// injected into an issue could turn the agent into a way to run code with them. The built-in CI
// folders are refused unless the operator allows CI changes for the repository; paths the operator
// adds (POST /repos/:repoKey/publish-paths) are refused always. Pure: publisher.ts and
// withhold-paths.ts do the git.

/** Gitea Actions reads `.gitea/workflows/` and `.github/workflows/`; Forgejo `.forgejo/workflows/`. */
export const CI_DEFINITION_PATHS = ['.gitea/workflows', '.github/workflows', '.forgejo/workflows'] as const;

/** What an operator set for one repository (`RepositoryRecord.publishPaths`). */
export interface PublishPathSettings {
  /** The built-in CI folders may be committed here. */
  allowCiChanges: boolean;
  /** More paths (a file, or a folder and everything under it) never committed here. */
  protectedPaths: string[];
}

export const DEFAULT_PUBLISH_PATHS: PublishPathSettings = { allowCiChanges: false, protectedPaths: [] };

export const MAX_PROTECTED_PATHS = 50;

/** The settings a repository record carries, or the defaults (an older record has none). */
export function publishPathSettings(record: { publishPaths?: unknown } | undefined): PublishPathSettings {
  const raw = record?.publishPaths as Partial<PublishPathSettings> | undefined;
  return {
    allowCiChanges: raw?.allowCiChanges === true,
    protectedPaths: Array.isArray(raw?.protectedPaths) ? raw.protectedPaths.filter((p): p is string => typeof p === 'string') : [],
  };
}

/**
 * An operator's path in its one form: relative, `/`-separated, no `.`/`..` segments, no trailing
 * slash; null when it is not acceptable (the control API answers 400 naming it).
 */
export function normaliseProtectedPath(input: string): string | null {
  // eslint-disable-next-line no-control-regex
  if (input.length === 0 || input.length > 300 || /[\u0000-\u001f\u007f\\]/.test(input)) return null;
  const segments = input.replace(/^\.\/+/, '').split('/').filter((s) => s.length > 0);
  if (segments.length === 0 || input.startsWith('/') || segments.some((s) => s === '.' || s === '..')) return null;
  return segments.join('/');
}

/** The paths refused for these settings (the built-in CI folders first). */
export function refusedPrefixes(settings: PublishPathSettings): string[] {
  return [...(settings.allowCiChanges ? [] : CI_DEFINITION_PATHS), ...settings.protectedPaths];
}

/**
 * The changed paths (as git names them, repository-relative) that fall under a refused prefix: the
 * prefix itself (a file, or a symbolic link standing in for the folder) or anything below it.
 * Compared without case: a checkout on a case-insensitive file system, or a server that folds case,
 * must not let `.GITEA/Workflows/x.yml` through.
 */
export function refusedPaths(changed: readonly string[], settings: PublishPathSettings): string[] {
  const prefixes = refusedPrefixes(settings).map((p) => p.toLowerCase());
  const out = changed.filter((path) => {
    const p = path.toLowerCase();
    return prefixes.some((prefix) => p === prefix || p.startsWith(`${prefix}/`));
  });
  return [...new Set(out)].sort();
}

/** NUL-separated git output (`-z`) as a list of paths. */
export function nulList(stdout: string): string[] {
  return stdout.split('\0').filter((p) => p.length > 0);
}

/** A git pathspec matching exactly this path (no glob, no magic from the name itself). */
export function literalPathspec(path: string): string {
  return `:(literal)${path}`;
}
