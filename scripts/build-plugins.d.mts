export interface BuildOptions { bases?: string[]; outDir?: string; force?: boolean; log?: (line: string) => void }
export function buildPlugins(opts?: BuildOptions): Promise<string[]>;
