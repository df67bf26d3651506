// The one error the configuration layer throws. A bad config is refused as a whole, with every
// problem listed as `<file>: <key path>: <reason>`, so the running proxy can keep its old config.
import type { CodesOf } from '../errors/catalogue.ts';

export interface ConfigIssue {
  /** Key path such as `upstream.pool_size` or `pipeline.request[1]`; empty for the whole file. */
  path: string;
  message: string;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code: CodesOf<'ConfigError'> = 'PROXY_ERR_CONFIG';
  /** The file the config came from, or null when it was built in memory. */
  readonly source: string | null;
  readonly issues: ConfigIssue[];

  constructor(source: string | null, issues: ConfigIssue[], options?: { cause?: unknown }) {
    super(formatIssues(source, issues), options);
    this.source = source;
    this.issues = issues;
  }
}

function formatIssues(source: string | null, issues: ConfigIssue[]): string {
  const where = source ?? '<config>';
  const lines = issues.map((i) => (i.path ? `${where}: ${i.path}: ${i.message}` : `${where}: ${i.message}`));
  return lines.length === 1 ? `invalid configuration: ${lines[0]}` : `invalid configuration:\n  ${lines.join('\n  ')}`;
}
