/**
 * Which Gitea the demo runs: the real one (the build of scripts/install-gitea.mjs, once per machine; its
 * links open Gitea's own pages) unless asked otherwise or it cannot be had. The double (./gitea-double/:
 * the REST API, git over HTTP and webhooks, no pages) stays for a machine without Go, and for `--nodes`,
 * whose failover re-points the double's webhook at the node that took over.
 */
export type GiteaKind = 'real' | 'double';

export interface GiteaChoice {
  kind: GiteaKind;
  /** A line for the newcomer when the demo chose the double by itself; null otherwise. */
  why: string | null;
}

export function chooseGitea(input: { asked: GiteaKind | null; nodes: number; giteaBuilt: boolean; goFound: boolean }): GiteaChoice {
  if (input.asked) return { kind: input.asked, why: null };
  if (input.nodes > 1) return { kind: 'double', why: `--nodes ${input.nodes}: on the Gitea double (an API without pages: its links open nothing)` };
  if (input.giteaBuilt || input.goFound) return { kind: 'real', why: null };
  return {
    kind: 'double',
    why:
      'Go is not installed and no Gitea build is cached: the demo runs on its Gitea double, an API without pages (its links open nothing). ' +
      'For the real Gitea, install Go and a C compiler (`npm run install-gitea` says which) and run the demo again: it builds Gitea once (about 4 minutes). `--gitea double` chooses the double without this note.',
  };
}
