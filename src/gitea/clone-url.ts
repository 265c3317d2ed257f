// The one clone URL of a repository (the Gitea host is configuration, never payload; see
// src/webhook/repository-origin.ts for the payload side). In gitea/, the platform: the workspace
// (executor/) and change delivery (publish/) build it too, and a piece several parts need belongs there.

/** `<giteaUrl>/<owner>/<name>.git`: the only clone URL the service uses. */
export function cloneUrlFor(giteaUrl: string, owner: string, name: string): string {
  return `${giteaUrl.replace(/\/+$/, '')}/${encodeURIComponent(owner)}/${encodeURIComponent(name)}.git`;
}
