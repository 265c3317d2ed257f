export * from './find-reply.js';
export * from './reply-body.js';
export * from './reply-verification.js';
