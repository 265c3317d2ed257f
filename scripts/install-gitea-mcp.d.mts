export declare const GITEA_MCP_PIN: { module: string; revision: string; version: string; sourceArchive: string; sourceSha256: string };
export declare function giteaMcpCacheRoot(env?: NodeJS.ProcessEnv): string;
export declare function giteaMcpInstallPaths(env?: NodeJS.ProcessEnv): { dir: string; binary: string; version: string };
export declare function isGiteaMcpInstalled(env?: NodeJS.ProcessEnv): boolean;
export declare function installGiteaMcp(env?: NodeJS.ProcessEnv): Promise<{ dir: string; binary: string; version: string }>;
