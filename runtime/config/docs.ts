// Renders docs/configuration.md from the schema, so the reference cannot drift from what the
// loader accepts (test/config/docs.test.ts fails when the committed file is stale).
// Regenerate with: node --import tsx runtime/config/docs.ts
import { writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { stringify as toYaml } from 'yaml';
import { stringify as toToml } from 'smol-toml';
import { BUILTIN_STEPS, schemaKeys, type ProxyConfigInput, type SchemaKey } from './schema.ts';
import type { Applies } from './applies.ts';

export const CONFIG_DOCS_PATH = resolve(dirname(fileURLToPath(import.meta.url)), '../../docs/configuration.md');

/** The example shown in three formats; docs.test.ts checks that it validates. */
export const EXAMPLE_CONFIG = {
  listen: '127.0.0.1:27018',
  upstream: {
    uri: 'mongodb://localhost:27017',
    pool_size: 50,
    min_idle: 5,
    connect_timeout_ms: 3000,
  },
  log: { level: 'info', format: 'pretty' },
  pipeline: {
    id: 'default',
    request: ['logging', 'wasm:redact'],
    response: ['metrics'],
  },
  steps: {
    redact: {
      module: 'build/plugins/redact.wasm',
      config: { fields: ['ssn', 'card_number'] },
      on_error: 'closed',
      fuel: 1000000,
    },
  },
} satisfies ProxyConfigInput;

const GENERAL = 'General';

export function renderConfigDocs(): string {
  const keys = schemaKeys();
  const sections = new Map<string, SchemaKey[]>([[GENERAL, []]]);
  const sectionKeys = new Map<string, SchemaKey>();
  for (const key of keys) {
    // `pipelines[].id` belongs to `pipelines` as `upstream.uri` does to `upstream`.
    const top = key.path.split(/[.[]/)[0];
    if (key.path === top) {
      // A key with keys of its own (a block, a record or an array of blocks) is a section.
      const isSection = keys.some((k) => k.path.startsWith(`${top}.`) || k.path.startsWith(`${top}[].`));
      if (isSection) {
        sections.set(top, []);
        sectionKeys.set(top, key);
      } else sections.get(GENERAL)!.push(key);
    } else {
      sections.get(top)!.push(key);
    }
  }

  const out: string[] = [
    '# Configuration reference',
    '',
    '<!-- Generated from runtime/config/schema.ts by `node --import tsx runtime/config/docs.ts`. Do not edit by hand. -->',
    '',
    'The proxy reads one configuration file: the file given with `--config`, or else the first of',
    '`proxy.json`, `proxy.yaml`, `proxy.yml`, `proxy.toml` found in the working directory. With no',
    'file, every key takes its default. JSON, YAML and TOML files hold the same keys, the extension',
    '(`.json`, `.yaml`, `.yml`, `.toml`) telling the format; `proxy serve --config-format json|yaml|toml`',
    'names it for a file without one (`--config <(render-config)` reads `/dev/fd/63`), at start and on',
    'every reload. A file larger than 4 MiB is refused (`cannot read file: larger than 4 MiB`), at start',
    'and on reload. The file may be a named pipe (FIFO) another process writes the configuration into',
    '(`mkfifo proxy.json`), or a process substitution: it is read until the writer closes it. A pipe that',
    'gives no data and no end of file for 5 s is refused (`cannot read file: a pipe with no data and no end',
    'of file for 5 s …`), as is one that ends without data (`cannot read file: the pipe ended without data',
    '…`: a process substitution is read once, so a reload from it finds it so): at start the proxy exits',
    '2, like for any file it cannot read; a reload (SIGHUP, a change, or `POST /api/v1/reload` without a',
    'body) is refused and the running configuration stays.',
    '',
    'Unknown keys are refused. A refused file is reported as `<file>: <key path>: <reason>`, for',
    'example `proxy.yaml: upstream.pool_size: expected integer >= 1, received "abc"`, and a running',
    'proxy that is reloading keeps its old configuration.',
    '',
    'The "On reload" column says when a changed key takes effect. **applies**: at the next reload —',
    '`SIGHUP`, `POST /api/v1/reload` on the admin API, or a save of the file (`admin.reload_on_change`).',
    '**restart**: when the proxy next starts; a reload applies every other change and names each such',
    'key whose value differs from the one the proxy started with in a warning, `configuration reloaded;',
    'these keys take effect only after a restart`. A block marked **partly** says which of its keys',
    'apply; adding or removing it needs a restart unless it says otherwise.',
    '',
    'Rules that involve more than one key:',
    '',
    '- `upstream.min_idle` must not exceed `upstream.pool_size`.',
    '- `pipelines[]` ids are unique; the entry whose id is `pipeline.id` (default `"default"`) is the default pipeline: it has no `match`, and ' +
      'then the `pipeline` block has no steps. The ids `baseline` and `candidate` are refused.',
    '- A `pipelines[]` entry that can never match is refused: an earlier entry has no `match`, the same `match`, or a `match` whose every key ' +
      'covers this one\'s (globs: `*`, a literal value the glob matches, a literal prefix `p*`; CIDR: a containing block; a command: its other ' +
      'spelling, `findAndModify` covering `findandmodify`).',
    `- Every step in \`pipeline.request\`, \`pipeline.response\`, \`pipelines[].request\` and \`pipelines[].response\` that is not a built-in ` +
      `(${BUILTIN_STEPS.map((s) => `\`${s}\``).join(', ')}) — including every \`wasm:<name>\` step — needs a \`steps.<name>\` entry (in a ` +
      `\`pipelines[]\` entry, its own \`steps.<name>\` or the top-level one) with \`module\` or \`package\`.`,
    '- Each `notifications.channels[]` entry needs the keys of its `type` and no keys of another type: `webhook` a `url` and a `secret` (or ' +
      '`notifications.webhook_secret`); `email` `addresses` and `notifications.smtp`; `pager` an `integration_key`, and `events` only among ' +
      '`canary.rolled_back`, `canary.threshold_warning`, `canary.completed`.',
    '- `notifications.initial_backoff_ms` must not exceed `notifications.max_backoff_ms`.',
    '- `auth.users[]` entries must differ in `name` or `db`.',
    '',
  ];

  for (const [name, rows] of sections) {
    if (rows.length === 0) continue;
    const head = sectionKeys.get(name);
    out.push(`## ${name === GENERAL ? GENERAL : `\`${name}\``}`, '');
    if (head) {
      const note = head.default === undefined ? ' Optional; absent by default.' : '';
      out.push(`${head.description}${note}`, '', `On reload: ${appliesText(head.applies)}`, '');
    }
    out.push('| Key | Type | Default | On reload | Description |', '|---|---|---|---|---|');
    for (const row of rows) {
      out.push(`| \`${row.path}\` | ${cell(row.type)} | ${defaultCell(row)} | ${cell(appliesText(row.applies))} | ${cell(row.description)} |`);
    }
    out.push('');
  }

  out.push(
    '## Example',
    '',
    'The same configuration in each format.',
    '',
    '`proxy.yaml`:',
    '',
    '```yaml',
    toYaml(EXAMPLE_CONFIG).trimEnd(),
    '```',
    '',
    '`proxy.json`:',
    '',
    '```json',
    JSON.stringify(EXAMPLE_CONFIG, null, 2),
    '```',
    '',
    '`proxy.toml`:',
    '',
    '```toml',
    toToml(EXAMPLE_CONFIG).trim(),
    '```',
    '',
  );
  return out.join('\n');
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** The "On reload" cell of a key (test/config/applies.test.ts makes sure every key has a mark). */
export function appliesText(applies: Applies | undefined): string {
  if (applies === undefined) return '(unmarked)';
  if (applies.on === 'reload') return '**applies**';
  if (applies.on === 'restart') return '**restart**';
  return `**partly**: ${applies.note}`;
}

function defaultCell(key: SchemaKey): string {
  if (key.default === undefined) return key.optional ? '(unset)' : '(required)';
  return `\`${cell(JSON.stringify(key.default))}\``;
}

function isMain(): boolean {
  const entry = process.argv[1];
  return entry !== undefined && pathToFileURL(resolve(entry)).href === import.meta.url;
}

if (isMain()) {
  writeFileSync(CONFIG_DOCS_PATH, renderConfigDocs());
  console.log(`wrote ${CONFIG_DOCS_PATH}`);
}
