import type { ExpandedOp } from './intake-accept-v1.mjs';

export interface DerivedFormat {
  NAME: string;
  expand(payload: never): ExpandedOp[];
}
export declare function derivedFormat(name: string): DerivedFormat;
export declare function expandDerived(name: string, payload: unknown): ExpandedOp[];
