export declare const GITEA_VERSION: string;
export declare const GITEA_MODULE: string;
export declare function giteaCacheRoot(env?: NodeJS.ProcessEnv): string;
export declare function giteaInstallPaths(env?: NodeJS.ProcessEnv): { dir: string; binary: string; version: string };
export declare function isGiteaInstalled(env?: NodeJS.ProcessEnv): boolean;
export declare function installGitea(env?: NodeJS.ProcessEnv): Promise<{ dir: string; binary: string; version: string }>;
