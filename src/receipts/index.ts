export * from './receipt-outbox.js';
export * from './receipt-record.js';
export * from './receipt-text.js';
