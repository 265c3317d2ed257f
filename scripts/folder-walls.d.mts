import type { ICruiseResult, IModule } from 'dependency-cruiser';

export declare function folderOf(path: string): string | null;
export declare function folderGraph(modules: readonly IModule[]): Map<string, Map<string, string[]>>;
export declare function folderCycles(graph: Map<string, Map<string, string[]>>): string[];
export interface ReadmeArrow {
  line: number;
  text: string;
  from: string[];
  only: boolean;
  to: string[];
}
export declare function readmeArrows(markdown: string): ReadmeArrow[];
export declare function arrowBreaches(graph: Map<string, Map<string, string[]>>, arrows: readonly ReadmeArrow[]): string[];
export declare function folderWallViolations(result: ICruiseResult, readme: string | null): string[];
