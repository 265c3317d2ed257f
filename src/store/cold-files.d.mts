export declare const COLD_FILE_RE: RegExp;
export declare function coldFileName(firstSeq: number, lastSeq: number): string;
export declare function indexFileName(dataFile: string): string;
export declare function hash32(text: string): number;
export declare function recordId(collection: string, key: string): string;
export declare function readRange(fd: number, offset: number, length: number): Buffer;
export declare function readColdLine(fd: number, offset: number, length: number): [string, string, Record<string, unknown>];
export declare const COLD_ENTRY_WORDS: number;
export declare function encodeColdIndex(triples: Uint32Array): Buffer;
export declare function decodeColdIndex(buffer: Uint8Array): Uint32Array;
export declare function buildColdFile(entries: Array<[string, string, Record<string, unknown>]>): { text: string; index: Buffer };
export declare const AUDIT_KEYS: readonly ['taskId', 'deliveryId', 'actorId'];
export declare function buildAuditIndex(events: Array<{ seq: number; [k: string]: unknown }>, lineLengths: number[]): Buffer;
export declare function buildAuditArchive(events: Array<{ seq: number; [k: string]: unknown }>): { text: string; index: Buffer };
export interface AuditIndex {
  count: number;
  firstSeq: number;
  offsets: Uint32Array;
  keys: Record<'taskId' | 'deliveryId' | 'actorId', Uint32Array>;
}
export declare function decodeAuditIndex(buffer: Uint8Array): AuditIndex;
export declare function indexExistingAuditArchive(file: string): Buffer;
export declare function eventsWithHash(pairs: Uint32Array, h: number): number[];
export declare function openForRead(file: string): number;
export declare function closeQuietly(fd: number): void;
