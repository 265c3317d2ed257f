export * from './task-lifecycle.js';
export * from './repo-lock.js';
export * from './session.js';
export * from './reply-verifier.js';
export * from './app-server.js';
