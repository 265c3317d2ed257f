import type { Adapter } from 'lowdb';

export declare function fsyncDir(dir: string): Promise<void>;
export declare function writeFileDurably(file: string, text: string | Uint8Array, options?: { fsync?: boolean }): Promise<void>;

export declare class DurableJsonFile<T> implements Adapter<T> {
  constructor(file: string, options?: { fsync?: boolean });
  read(): Promise<T | null>;
  write(data: T): Promise<void>;
}

export declare function toLineJson(data: unknown): string;
export declare function parseLineJson(text: string): unknown;
