export declare function withLock<T>(lockDir: string, log: (msg: string) => void, fn: () => Promise<T>): Promise<T>;
export declare function accountHome(): string;
