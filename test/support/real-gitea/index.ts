export { startRealGitea, freePort, type RealGitea, type RealGiteaOptions } from '../../../src/demo/real-gitea/gitea-process.js';
export { startSeededGitea, SEED_FILES, SERVICE_BOT_PERMISSION, type SeededGitea, type SeededUser, type GiteaComment, type Role, type SeedOptions } from './seed.js';
export { giteaApi, eventually, GiteaApiError, type ApiResult, type GiteaAuth } from '../../../src/demo/real-gitea/api.js';
export { GiteaWebSession, type HookDelivery } from './web-session.js';
export { GITEA_VERSION, giteaInstallPaths, installGitea } from '../../../scripts/install-gitea.mjs';
export { startWebhookRecorder, type RecordedRequest, type WebhookRecorder } from './webhook-recorder.js';
