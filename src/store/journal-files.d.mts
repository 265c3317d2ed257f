export declare const CHECKPOINT_FILE: string;
export declare const CHECKPOINT_FORMAT: string;
export declare function segmentName(firstSeq: number): string;
export declare function listSegments(dir: string): Promise<string[]>;

export interface JournalEntry {
  seq: number;
  ops: unknown[];
}

export declare class JournalCorruptionError extends Error {
  readonly code: 'journal_corrupt';
  readonly file: string;
  readonly line: number;
  constructor(file: string, line: number, reason: string);
}

export declare function parseSegment(
  text: string,
  file: string,
  options?: { allowTornTail?: boolean },
): { entries: JournalEntry[]; validBytes: number; torn: boolean; tornLine: number };
export declare const AUDIT_ARCHIVE_RE: RegExp;
export declare function auditArchiveName(firstSeq: number, lastSeq: number): string;

export declare function forEachSegmentEntry(
  bytes: Buffer,
  file: string,
  options: { allowTornTail?: boolean },
  onEntry: (entry: JournalEntry, lineNo: number) => void,
): { validBytes: number; torn: boolean; tornLine: number };
