export * from './gitea-client.js';
export type { components as GiteaComponents, paths as GiteaPaths } from './generated/gitea-api.js';
