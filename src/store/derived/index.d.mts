import type { ExpandedOp } from './intake-accept-v1.mjs';

export interface DerivedFormat {
  NAME: string;
  auditCount(payload: never): number;
  expand(payload: never): ExpandedOp[];
}
export declare function derivedFormat(name: string): DerivedFormat;
export declare function expandDerived(name: string, payload: unknown): ExpandedOp[];
