// The one clone URL of a repository (issue 15: the Gitea host is configuration, never payload; see
// src/webhook/repository-origin.ts for the payload side). In gitea/ (issue 34): the workspace
// (executor/) and change delivery (publish/) build it too, and took it from webhook/ until then.

/** `<giteaUrl>/<owner>/<name>.git`: the only clone URL the service uses. */
export function cloneUrlFor(giteaUrl: string, owner: string, name: string): string {
  return `${giteaUrl.replace(/\/+$/, '')}/${encodeURIComponent(owner)}/${encodeURIComponent(name)}.git`;
}
