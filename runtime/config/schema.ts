// The configuration schema: the single source of the config's types, defaults, validation and
// its generated reference (docs/configuration.md, rendered by docs.ts). Change a key here and
// the loader, the error messages and the docs all follow.
import * as v from 'valibot';
import { LOG_LEVELS } from '../log/levels.ts';
import { EXPECTS, MAX_TIMER_MS, expects, int, type Expects } from './expects.ts';
import { appliesOf, onReload, onRestart, partlyOnReload, type Applies } from './applies.ts';
import { hostPortSchema, hostSchema } from './address.ts';
import { channelProblems } from './notifications-schema.ts';
import { parseCidr } from './pipeline-match.ts';
import { pipelineListProblems, stepLists } from './pipeline-list.ts';
import {
  maxConnectionsSchema, autoPromoteRulesSchema, canarySchema, controlPlaneSchema, notificationsSchema, rollbackRulesSchema,
} from './canary-schema.ts';
import { fleetSchema } from './fleet-schema.ts';

/** Step kinds the proxy ships; every other pipeline step must name a WASM module or package. */
/**
 * Why pipeline entry `id` (`name` or `wasm:name`) has nothing to load: not a built-in step and
 * `entry` names no module or package (`missing` says where one would be given); null when it has.
 * Names the step and the built-ins, never the plugin directory's path.
 */
export function unknownStep(id: string, entry: { module?: string; package?: string } | undefined, missing: string): string | null {
  const name = id.startsWith('wasm:') ? id.slice(5) : id;
  // `cache` and `wasm:cache` both name the built-in; a steps entry may still override its module.
  if ((BUILTIN_STEPS as readonly string[]).includes(name)) return null;
  if (entry?.module !== undefined || entry?.package !== undefined) return null;
  return `unknown step type "${id}": not a built-in step (${BUILTIN_STEPS.join(', ')}), and ${missing}`;
}

export const BUILTIN_STEPS = [
  'logging',
  'filter',
  'cache',
  'metrics',
  'rate_limit',
  'auth',
  'transform',
  'route',
] as const;

export const STEP_ID_PATTERN = /^(wasm:)?[a-z][a-z0-9_-]*$/;
export const STEP_NAME_PATTERN = /^[a-z][a-z0-9_-]*$/;
const MONGODB_URI_PATTERN = /^mongodb(\+srv)?:\/\/\S+$/;
const DNS_SERVER_PATTERN = /^(\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?|[0-9a-fA-F:]*:[0-9a-fA-F:.]*|\[[0-9a-fA-F:.]+\](:\d{1,5})?)$/;

const listen = hostPortSchema('Address the proxy accepts client connections on, as "host:port" or "[ipv6]:port" (port 0 picks a free one).');

const stepId = expects(
  v.pipe(v.string(), v.regex(STEP_ID_PATTERN)),
  'step identifier (a built-in name like "cache", or "wasm:<name>")',
);

const upstream = v.strictObject({
  uri: onRestart(v.optional(
    expects(
      v.pipe(
        v.string(),
        v.regex(MONGODB_URI_PATTERN),
        v.description(
          'Upstream connection URI, ' +
            'mongodb://[user:password@]host[:port][,host…][/authdb][?authSource=…&authMechanism=SCRAM-SHA-256|SCRAM-SHA-1&replicaSet=…], or ' +
            'mongodb+srv://[user:password@]name[/authdb][?options] (one DNS name, no port): the hosts come from the SRV records of ' +
            '_mongodb._tcp.<name> (srvServiceName=… changes "mongodb", srvMaxHosts=N keeps N of them at random), which must lie in the parent ' +
            'domain of <name>; the one TXT record of <name> may set authSource, replicaSet and loadBalanced (the URI\'s own options win); TLS is ' +
            'on unless the URI says tls=false; the SRV records are re-resolved every srv_rescan_interval_ms. Several hosts, or replicaSet=name: a ' +
            'replica set (members discovered, writes to the primary, reads by the client\'s $readPreference) or a list of mongos routers (requests ' +
            'spread over the healthy ones); see docs/operations.md. With a user, every pooled connection authenticates (SCRAM); clients never send ' +
            'these credentials (they log in to the proxy only when `auth` is set). When absent, the embedded development upstream starts in-process.',
        ),
      ),
      'string mongodb:// or mongodb+srv:// URI',
    ),
  )),
  pool_size: onRestart(v.optional(int(1, undefined, 'Maximum number of pooled connections to the upstream.'), 100)),
  min_idle: onRestart(v.optional(
    int(0, undefined, 'Connections kept open even when idle; must not exceed pool_size.'),
    0,
  )),
  max_idle_time_ms: onRestart(v.optional(
    int(0, MAX_TIMER_MS, 'Milliseconds an idle pooled connection is kept before it is closed.'),
    60000,
  )),
  connect_timeout_ms: onRestart(v.optional(
    int(1, MAX_TIMER_MS, 'Milliseconds allowed to open a new upstream connection.'),
    5000,
  )),
  wait_queue_timeout_ms: onRestart(v.optional(
    int(1, MAX_TIMER_MS, 'Milliseconds a request waits for a pooled connection before it fails.'),
    10000,
  )),
  request_timeout_ms: onRestart(v.optional(
    int(0, MAX_TIMER_MS, 'Milliseconds allowed for one upstream round trip; 0 means no limit. With a single upstream host (no server monitor) this is ' +
      'the only bound on a request written to a server that stopped answering without closing its connection; a replica set or mongos list also ' +
      'has its monitors, which clear a silent server\'s pool (see docs/operations.md, "A silent server"). Set it above your slowest legitimate ' +
      'command when the upstream is one host.'),
    0,
  )),
  dns_servers: onRestart(v.optional(
    expects(
      v.pipe(
        v.array(v.pipe(v.string(), v.regex(DNS_SERVER_PATTERN))),
        v.description('DNS servers asked for a mongodb+srv:// upstream.uri: its SRV and TXT records and the addresses (A, then AAAA) of the SRV ' +
          'targets, as "ip" or "ip:port" ("[ipv6]:port"). Absent: the system\'s resolver (its configured name servers for SRV and TXT, the usual ' +
          'host lookup for the targets).'),
      ),
      'array of "ip" or "ip:port" strings',
    ),
  )),
  srv_rescan_interval_ms: onRestart(v.optional(
    int(100, MAX_TIMER_MS, 'Milliseconds between re-resolutions of a mongodb+srv:// upstream\'s SRV records (counted from the end of the previous ' +
      'one; after a failed one, the next comes after at most 10000). Node\'s resolver does not report SRV record TTLs, so they cannot shorten it.'),
    60000,
  )),
  heartbeat_ms: onRestart(v.optional(
    int(500, MAX_TIMER_MS, 'Multi-host upstreams (replica set, mongos list): milliseconds between two hello checks of each server (every 500 ms while ' +
      'a replica set has no known primary; at once after a network or "not primary" error).'),
    10000,
  )),
  local_threshold_ms: onRestart(v.optional(
    int(0, undefined, 'Multi-host upstreams: requests are spread over the eligible servers whose hello round trip is within this many milliseconds ' +
      'of the fastest one.'),
    15,
  )),
  server_selection_timeout_ms: onRestart(v.optional(
    int(1, MAX_TIMER_MS, 'Multi-host upstreams: milliseconds a request waits for a server it can go to (a primary, a secondary its read preference ' +
      'accepts, a healthy mongos) before it fails with a retryable FailedToSatisfyReadPreference error.'),
    10000,
  )),
});

const clients = v.strictObject({
  max_connections: onRestart(v.optional(
    int(0, 1_000_000, 'Client connections served at once; 0 means no limit. A connection past the limit is accepted, its first request (the ' +
      'driver\'s handshake) is answered with error 9001 SocketException "connection limit reached", and it is closed; counted in ' +
      'proxy_client_connections_refused_total.'),
    0,
  )),
  max_pending_reply_bytes: onRestart(v.optional(
    int(65536, undefined, 'Bytes of replies a client may leave unread before the proxy stops reading (and forwarding) its requests; reading ' +
      'resumes when its socket drains. One reply is always written whole, so a client holds at most this plus one reply (≤ 48,000,000 bytes).'),
    16 * 1024 * 1024,
  )),
  max_queued_requests: onRestart(v.optional(
    int(1, 10000, 'Requests read from one client and not yet started; past this the proxy stops reading that client until the queue halves ' +
      '(drivers do not pipeline, so this only bounds misbehaving clients).'),
    64,
  )),
  max_queued_request_bytes: onRestart(v.optional(
    int(65536, undefined, 'Bytes of requests read from one client and not yet started; past this the proxy stops reading that client until ' +
      'they are down to half. A request is always read whole, so a client holds at most this plus one request (≤ 48,000,000 bytes).'),
    16 * 1024 * 1024,
  )),
});

const tls = v.strictObject({
  cert_file: onReload(v.pipe(v.string(), v.minLength(1), v.description('PEM certificate (chain) the proxy presents to clients. Re-read on reload: ' +
    'renewed certificates apply to new connections, open ones stay.'))),
  key_file: onReload(v.pipe(v.string(), v.minLength(1), v.description('PEM private key of cert_file.'))),
  key_passphrase: onReload(v.optional(v.pipe(v.string(), v.description('Passphrase of an encrypted key_file.')))),
  ca_file: onReload(v.optional(v.pipe(v.string(), v.minLength(1), v.description('PEM authorities whose client certificates are accepted (needed ' +
    'with client_certificates "optional" or "required").')))),
  client_certificates: onReload(v.optional(
    v.pipe(v.picklist(['none', 'optional', 'required']), v.description('"none": clients are not asked for a certificate; "optional": asked, and ' +
      'one that does not verify against ca_file is refused; "required": a client without a valid certificate is refused.')),
    'none',
  )),
});

const BASE64_PATTERN = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** Standard base64 of exactly `bytes` bytes (`bytes` 0: of at least 16 bytes). */
const base64Bytes = (bytes: number, description: string) => expects(
  v.pipe(
    v.string(),
    v.regex(BASE64_PATTERN),
    v.check((s) => bytes === 0 ? Buffer.from(s, 'base64').length >= 16 : Buffer.from(s, 'base64').length === bytes),
    v.description(description),
  ),
  bytes === 0 ? 'base64 string of at least 16 bytes' : `base64 string of ${bytes} bytes`,
);

const authUser = v.strictObject({
  name: onReload(v.pipe(v.string(), v.minLength(1), v.description('User name, as clients give it (the `user` request property once logged in).'))),
  db: onReload(v.optional(v.pipe(v.string(), v.minLength(1), v.description('Authentication database: the client\'s authSource (drivers default to ' +
    'the URI\'s database, else "admin").')), 'admin')),
  iterations: onReload(int(4096, undefined, 'PBKDF2 iteration count the credential was made with (SCRAM i=; mongod\'s iterationCount).')),
  salt: onReload(base64Bytes(0, 'Salt of the credential, base64 (mongod\'s salt).')),
  stored_key: onReload(base64Bytes(32, 'SCRAM-SHA-256 StoredKey, base64 (mongod\'s storedKey).')),
  server_key: onReload(base64Bytes(32, 'SCRAM-SHA-256 ServerKey, base64 (mongod\'s serverKey).')),
});

const auth = v.strictObject({
  mode: onReload(v.optional(
    v.pipe(v.picklist(['required', 'optional']), v.description('"required": a connection must log in before any command other than hello, ' +
      'saslStart, saslContinue, logout, ping and buildInfo (others get code 13 Unauthorized); "optional": clients without credentials are served ' +
      'anonymously (`user` ""), clients with credentials must give correct ones.')),
    'required',
  )),
  users: onReload(expects(
    v.pipe(v.array(authUser), v.minLength(1), v.description('Users clients log in as with SCRAM-SHA-256, stored as SCRAM credentials (never ' +
      'passwords): make an entry with `proxy user add <name>`, or copy the SCRAM-SHA-256 credential of a mongod user. A reload applies changes; a ' +
      'connection logged in as a removed or changed user must log in again.')),
    'non-empty array of users',
  )),
  secret_file: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('File holding the secret the proxy seals cursor ids and ' +
    'derives the decoy salts of unknown user names from (relative to the working directory), e.g. made with `openssl rand -base64 48 > ' +
    'proxy-secret && chmod 600 proxy-secret`: at least 32 characters (surrounding whitespace not counted), at most 1024 bytes, and on POSIX no ' +
    'permission for its group or others (as mongod\'s keyFile). Give every instance behind one address the same file: a cursor opened through ' +
    'one is continued through another, and after a restart. Absent: a random secret each time the proxy starts (cursors do not outlive it, ' +
    'and do not move between instances). Read at start. See docs/operations.md, "Several proxy instances".')))),
});

const shutdown = v.strictObject({
  drain_timeout_ms: onReload(v.optional(
    int(0, MAX_TIMER_MS, 'On SIGTERM/SIGINT: milliseconds allowed for requests in flight to be answered before the remaining connections are closed. ' +
      'Requests read but not started are answered with ShutdownInProgress (code 91).'),
    10000,
  )),
});

const workerHeartbeat = v.strictObject({
  interval_ms: onRestart(v.optional(
    int(100, 60_000, 'With several workers: milliseconds between two pings the first process sends each worker over their IPC channel. A worker ' +
      'answers from its event loop.'),
    1000,
  )),
  timeout_ms: onRestart(v.optional(
    int(0, MAX_TIMER_MS, 'With several workers: milliseconds a worker may go without answering a ping before it is taken for hung: it is ended ' +
      '(SIGKILL) and replaced, and its clients reconnect to the others. Keep it well above the longest time a worker\'s event loop may be ' +
      'busy on purpose. 0: no heartbeat (a hung worker stays until it is killed by hand).'),
    10000,
  )),
});

const devdb = v.strictObject({
  port: onRestart(v.optional(
    int(0, 65535, 'Port of the in-process development upstream (used when upstream.uri is absent); 0 picks a free port.'),
    0,
  )),
});

const log = v.strictObject({
  level: onRestart(v.optional(
    v.pipe(
      v.picklist(LOG_LEVELS),
      v.description('Lowest log level written.'),
    ),
    'info',
  )),
  format: onRestart(v.optional(
    v.pipe(
      v.picklist(['json', 'pretty']),
      v.description('Log line format: one JSON object per line (pino), or human-readable text for a terminal.'),
    ),
    'json',
  )),
  ring_lines: onRestart(v.optional(int(0, 100_000, 'Recent log lines kept in memory for `proxy logs` (GET /api/v1/logs on the admin port); 0 keeps ' +
    'none.'), 1000)),
});

/** Steps per phase at most: a graph is compiled and instantiated whole on every reload and canary. */
export const MAX_STEPS_PER_PHASE = 64;
const maxSteps = v.rawCheck<string[]>(({ dataset, addIssue }) => {
  if (dataset.typed && dataset.value.length > MAX_STEPS_PER_PHASE) addIssue({ message: `at most ${MAX_STEPS_PER_PHASE} steps per phase, ` +
    `got ${dataset.value.length}` });
});

/** A pipeline id: a metrics label value and a URL query value, so a plain name. */
export const PIPELINE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
export const PIPELINE_ID_MAX_LENGTH = 48;
/** The one rule of a pipeline id, `pipeline.id` and `pipelines[].id` alike. */
function pipelineIdSchema(description: string) {
  return expects(v.pipe(v.string(), v.regex(PIPELINE_ID_PATTERN), v.maxLength(PIPELINE_ID_MAX_LENGTH), v.description(description)),
    `pipeline id: letters, digits, "_", "-" and ".", starting with a letter or digit, at most ${PIPELINE_ID_MAX_LENGTH} characters`);
}
/** Pipelines at most: each is a graph compiled on every reload. */
export const MAX_PIPELINES = 64;

const pipeline = v.strictObject({
  id: onRestart(v.optional(pipelineIdSchema('Name of this pipeline, used to tag its metrics (pipeline_id) and to name it to the canary API.'),
    'default')),
  request: onReload(v.optional(
    v.pipe(
      v.array(stepId),
      maxSteps,
      v.description('Ordered step identifiers of the request phase (run before forwarding upstream). At most 64 steps.'),
    ),
    [],
  )),
  response: onReload(v.optional(
    v.pipe(
      v.array(stepId),
      maxSteps,
      v.description('Ordered step identifiers of the response phase (run after the upstream answers). At most 64 steps.'),
    ),
    [],
  )),
});

const matchValues = (desc: string, phrase: string, check?: (s: string) => string | null) => onReload(v.optional(expects(
  v.pipe(
    v.union([v.pipe(v.string(), v.minLength(1)), v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.minLength(1))]),
    v.rawCheck<string | string[]>(({ dataset, addIssue }) => {
      if (!dataset.typed || check === undefined) return;
      for (const value of typeof dataset.value === 'string' ? [dataset.value] : dataset.value) {
        const problem = check(value);
        if (problem !== null) addIssue({ message: problem });
      }
    }),
    v.description(desc),
  ),
  phrase,
)));

const GLOB_NOTE = '`*` matches any run of characters, `?` one character.';
const match = v.strictObject({
  db: matchValues(`Database name(s) (the command's $db); globs: ${GLOB_NOTE}`, 'glob string or array of globs'),
  collection: matchValues(`Collection name(s) the command names (find, insert, aggregate, getMore …; a command on no collection has ""); ` +
    `globs: ${GLOB_NOTE}`, 'glob string or array of globs'),
  command: matchValues('Command name(s), exactly as sent (the command document\'s first key: find, insert, aggregate, getMore …); a command ' +
    'mongod runs under two spellings (findAndModify and findandmodify, isMaster, buildInfo, dbStats, collStats, mapReduce, getLastError, ' +
    'dataSize) is matched by either.', 'string or ' +
    'array of strings'),
  app_name: matchValues(`The client's appName (its connection string's appName, without "?" parameters); globs: ${GLOB_NOTE}`, 'glob string or array of globs'),
  user: matchValues('The user the connection logged in as (`auth`), or one an auth step set; an anonymous connection matches no `user`.', 'string ' +
    'or array of strings'),
  client: matchValues('Client address block(s) in CIDR notation ("10.0.0.0/8", "2001:db8::/32"; an address alone is a block of one). An IPv4 ' +
    'client on a dual-stack listener matches IPv4 blocks.', 'CIDR string or array of CIDR strings', (s) => {
    const c = parseCidr(s);
    return typeof c === 'string' ? c : null;
  }),
});

/**
 * Levels a step's `config` may nest (the object itself is level 1). It is handed to the plugin as
 * JSON and hashed on every load: deeper nesting overflowed the host's stack (JSON.stringify) or the
 * plugin's JSON parser, a failed start or reload that named neither the key nor the reason.
 */
export const MAX_STEP_CONFIG_DEPTH = 100;

/** How deep `value` nests, counting objects and arrays; stops counting past `limit`. Iterative. */
function nestingDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object') continue;
    if (d > deepest) deepest = d;
    if (deepest > limit) return deepest;
    for (const child of Object.values(x)) if (child !== null && typeof child === 'object') stack.push([child, d + 1]);
  }
  return deepest;
}

/** A step's `config`: an object nested at most MAX_STEP_CONFIG_DEPTH levels (the canary's candidate steps use it too). */
export const stepConfigSchema = v.pipe(
  v.record(v.string(), v.unknown()),
  v.rawCheck<Record<string, unknown>>(({ dataset, addIssue }) => {
    if (dataset.typed && nestingDepth(dataset.value, MAX_STEP_CONFIG_DEPTH) > MAX_STEP_CONFIG_DEPTH) {
      addIssue({ message: `nested deeper than ${MAX_STEP_CONFIG_DEPTH} levels (objects and arrays)` });
    }
  }),
);

const step = v.strictObject({
  module: onReload(v.optional(
    v.pipe(v.string(), v.minLength(1), v.description('Path to the step\'s .wasm file (built-in steps need none).')),
  )),
  package: onReload(v.optional(
    v.pipe(v.string(), v.minLength(1), v.description('npm package that provides the step\'s .wasm module.')),
  )),
  config: onReload(v.optional(
    expects(
      v.pipe(stepConfigSchema, v.description(`Step-specific settings, handed to the step as JSON; nested at most ${MAX_STEP_CONFIG_DEPTH} levels.`)),
      'object',
    ),
    {},
  )),
  on_error: onReload(v.optional(
    v.pipe(
      v.picklist(['open', 'closed']),
      v.description(
        'What happens when the step fails: "open" lets the request through, "closed" rejects it. The default depends on the step.',
      ),
    ),
  )),
  max_memory_pages: onReload(v.optional(
    int(1, 65536, 'Maximum linear memory of the WASM instance, in 64 KiB pages.'),
    256,
  )),
  kv_max_bytes: onReload(v.optional(
    int(4096, undefined, 'Byte cap of the step\'s host-side key/value store (keys count 2 bytes a character, values their length); default 1 MiB. ' +
      'A full store evicts least recently used entries. Memory: a full store holds about twice the cap (its record area keeps room to reuse) plus ' +
      '50–100 bytes of index per entry. Each graph (baseline, candidate) has its own store per step; a reload keeps the data while the step\'s ' +
      'config is unchanged, and a changed cap applies without losing what fits. The cache step keeps its entries here: give it at least its ' +
      'max_bytes (it warns when configured otherwise).'),
  )),
  fuel: onReload(v.optional(
    int(0, undefined, 'Work budget per plugin call (fuel: one unit per loop iteration and per entry into a function that calls another ' +
      'function of the module; functions without loops or such calls, and returns, are free); default 50,000,000. A call that runs out traps ' +
      'and counts as a step error.'),
  )),
});

const pipelineEntry = v.strictObject({
  id: onReload(pipelineIdSchema('Name of the pipeline: its metrics\' and profile\'s pipeline_id, the canary\'s pipeline_id. The entry whose id is ' +
    'the pipeline block\'s id (default "default") is the default pipeline.')),
  match: onReload(v.optional(v.pipe(match, v.description('What a request must carry for this pipeline to take it: every key given must match (a ' +
    'key with a list: any of its values). Absent or empty: every request. app_name, user and client are settled once per connection; db, ' +
    'collection and command per request.')))),
  request: onReload(v.optional(
    v.pipe(v.array(stepId), maxSteps, v.description('Ordered step identifiers of the request phase. At most 64 steps.')),
    [],
  )),
  response: onReload(v.optional(
    v.pipe(v.array(stepId), maxSteps, v.description('Ordered step identifiers of the response phase. At most 64 steps.')),
    [],
  )),
  steps: onReload(v.optional(
    v.pipe(
      v.record(expects(v.pipe(v.string(), v.regex(STEP_NAME_PATTERN)), 'step name matching ^[a-z][a-z0-9_-]*$'), step),
      v.description('Step settings of this pipeline only, keyed by step name: an entry here replaces the top-level `steps` entry of that name for ' +
        'this pipeline (so two pipelines can run one step with different configs).'),
    ),
  )),
});

const admin = v.strictObject({
  reload_on_change: onReload(v.optional(
    v.pipe(v.boolean(), v.description('Reload the configuration when its file is saved: written in place, replaced by a rename (most editors, `sed ' +
      '-i`) or swapped through a symlink (a Kubernetes ConfigMap). A save that leaves the file as it was reloads nothing; a bad file is refused ' +
      'and the old configuration kept.')),
    true,
  )),
  listen: onReload(v.optional(hostPortSchema(
    'Address of the admin HTTP API ("host:port", or "[ipv6]:port"): GET /metrics (Prometheus text), GET /api/v1/pipeline, POST /api/v1/reload, and ' +
      'the health probes GET /healthz (liveness) and GET /readyz (readiness). Absent: no admin API. A reload that changes it opens the new address ' +
      'first and then closes the old one; an address that cannot be bound refuses the reload (the old listener and configuration stay). ' +
      'POST /api/v1/reload refuses a configuration that moves or removes it (422) unless asked with ?allow_admin_change=true.',
  ))),
  token: onReload(v.optional(expects(
    v.pipe(
      v.string(),
      v.minLength(16),
      v.description('Bearer token the admin API requires (Authorization: Bearer <token>) on every route except the health probes /healthz and ' +
        '/readyz; at least 16 characters. Required when admin.listen is set; ${ENV} is not expanded. A reload replaces it: the old token is ' +
        'refused and the new one accepted from the next request on.'),
    ),
    'string of at least 16 characters',
  ))),
  max_connections: maxConnectionsSchema('admin API'),
});

const DURATION_PATTERN = /^\d+(ms|s|m|h|d)$/;

const profiling = v.strictObject({
  enabled: onReload(v.optional(v.pipe(v.boolean(), v.description('Times every step of every graph and serves GET /api/profile (and the flame ' +
    'graph). Off: graphs run the untimed loop and /api/profile answers 404.')), false)),
  port: onReload(v.optional(int(0, 65535, 'Port of the profiling HTTP endpoint (/api/profile, /api/profile/flamegraph, /metrics); separate from ' +
    'the wire-protocol port. 0 picks a free one. A reload that changes it opens the new address first and then closes the old one; an address that ' +
    'cannot be bound refuses the reload (the old listener and configuration stay).'), 9091)),
  host: onReload(v.optional(hostSchema('Address the profiling endpoint binds (a host name, IPv4 or IPv6 address); the default keeps it on this ' +
    'machine. Bind another address only together with `token`. A reload that changes it opens the new address first and then closes the old one; ' +
    'an address that cannot be bound refuses the reload (the old listener and configuration stay).'), '127.0.0.1')),
  token: onReload(v.optional(expects(v.pipe(v.string(), v.minLength(16), v.description('Bearer token the profiling endpoint requires ' +
    '(Authorization: Bearer <token>), at least 16 characters; absent: no authentication (then keep `host` on loopback). A reload replaces it: the ' +
    'old token is refused and the new one accepted from the next request on.')), 'string of at least 16 characters'))),
  max_connections: maxConnectionsSchema('profiling endpoint (the dashboard included)'),
  slow_step_threshold_us: onReload(v.optional(int(1, undefined, 'A step invocation slower than this many microseconds counts as slow ' +
    '(proxy_step_slow_total) and, with alert_on_slow_step, logs "slow step detected".'), 1000)),
  alert_on_slow_step: onReload(v.optional(v.pipe(v.boolean(), v.description('Log a warning (logger proxy::profiling) for slow step invocations, at ' +
    'most one line per step per second; the lines held back are counted (proxy_step_slow_log_suppressed_total) and reported by a "slow step lines ' +
    'suppressed" line when the second ends or the proxy stops.')), true)),
  per_step_thresholds: onReload(v.optional(expects(v.pipe(v.record(v.string(), v.pipe(v.number(), v.integer(), v.minValue(1))),
    v.description('Per-step overrides of slow_step_threshold_us, keyed by step identifier ("wasm:cache" or "cache").')), 'object of step → integer ' +
    'µs'), {})),
  histogram_buckets: onRestart(v.optional(expects(v.pipe(v.array(v.pipe(v.number(), v.integer(), v.minValue(1))), v.minLength(1),
    v.check((a) => a.every((x, i) => i === 0 || x > a[i - 1]), 'must be strictly increasing'),
    v.description('Upper bounds (µs) of the proxy_step_latency_us buckets in /metrics; +Inf is added. Percentiles in /api/profile come from HDR ' +
    'histograms and do not depend on these. Statistics restored from snapshot_dir are re-bucketed to new bounds at start.')), 'array of increasing ' +
    'integers (µs)'), [50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000])),
  snapshot_dir: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('Directory that persists the snapshots (created if missing; ' +
    'relative to the working directory): state.json, the cumulative statistics restored on start, and per-hour series-<YYYYMMDDHH>.jsonl files for ' +
    'GET /api/profile/series. Absent: the time series is kept in memory (bounded; docs/profiling.md) and statistics reset when the proxy restarts. ' +
    'One proxy per directory.')))),
  snapshot_interval_s: onRestart(v.optional(int(1, Math.floor(MAX_TIMER_MS / 1000),
    'Seconds between snapshots: one time-series point (GET /api/profile/series, the ' +
    'dashboard\'s trend charts) is taken, and with snapshot_dir state.json is rewritten and the point appended to its hour file.'), 30)),
  snapshot_retention: onRestart(v.optional(expects(v.pipe(v.string(), v.regex(DURATION_PATTERN),
    v.description('How long time-series points are kept: in memory, points older than this are dropped (and past 16 MiB of them the oldest go ' +
    'first); with snapshot_dir, an hour file is deleted once its whole hour is older than this, and state.json is always kept.')), 'duration like ' +
    '"24h" (ms, s, m, h, d)'), '24h')),
  filters: onReload(v.optional(v.pipe(v.strictObject({
    operations: onReload(v.optional(v.pipe(v.array(v.string()), v.description('Only requests with these command names are sampled.')))),
    collections: onReload(v.optional(v.pipe(v.array(v.string()), v.description('Only requests on these collections are sampled.')))),
    min_upstream_latency_us: onReload(v.optional(int(0, undefined, 'Only requests whose upstream time (waiting for a pooled connection plus the ' +
      'round trip, as avg_upstream_latency_us) took at least this many microseconds are sampled.'), 0)),
  }), v.description('Conditional profiling: when set, only requests matching every given criterion are sampled (recorded in histograms, counts and ' +
    'the flame graph); the others are not recorded, but their steps are still checked against the slow-step thresholds.')), {})),
  flamegraph_frames: onRestart(v.optional(int(100, 1_000_000, 'Per-request frames kept (a ring) for the flame graph, sampled at most this many per ' +
    '60 s on average (bursts of a tenth of it), each kept frame weighted by the requests skipped before it; a window longer than what the ring ' +
    'holds shows the newest frames. Plugin sub-operations are timed in the kept requests only, so their statistics are of the same sample.'), 20000)),
  storage: onRestart(v.optional(v.pipe(v.picklist(['memory', 'mmap']), v.description('Where graph and step histograms live: "memory" (default; HDR ' +
    'histograms in process memory) or "mmap" (a fixed-layout file at `mmap_path`, mapped into the proxy, that other processes read while it runs: ' +
    '`proxy profile --mmap <path>`; see docs/profiling.md).')), 'memory')),
  mmap_path: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('Path of the shared-memory histogram file (required with ' +
    'storage "mmap"; relative to the working directory). Created, or cleared, at start; one proxy per file: the proxy locks it while it runs, ' +
    'and a second proxy on the same file stops at start.')))),
  mmap_size_mb: onRestart(v.optional(int(1, 4096, 'Size of the histogram file in MiB (storage "mmap"): (size − 512 bytes) / 5888 rows, 178 in 1 ' +
    'MiB; a pipeline of N steps needs 2 × (4 + 2N) rows (baseline and candidate graphs, each step in both phases), and with `pipelines` every ' +
    'pipeline needs its own; checked at start and on reload.'), 1)),
});

const OTLP_URL_PATTERN = /^https?:\/\/[^\s/]+(\/\S*)?$/;
const RESOURCE_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

const telemetry = v.strictObject({
  otlp_endpoint: onRestart(v.optional(expects(v.pipe(v.string(), v.regex(OTLP_URL_PATTERN),
    v.description('OTLP/HTTP collector address. A URL without a path gets /v1/traces appended (http://127.0.0.1:4318 → ' +
    'http://127.0.0.1:4318/v1/traces); a URL with a path is used as is. Absent: tracing is off and costs nothing.')), 'URL ' +
    '"http(s)://host:port[/path]"'))),
  protocol: onRestart(v.optional(v.pipe(v.picklist(['http/protobuf', 'http/json']),
    v.description('OTLP encoding: protobuf (application/x-protobuf) or JSON (application/json).')), 'http/protobuf')),
  service_name: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('service.name resource attribute put on every exported span.')),
    'proxy')),
  sample_rate: onReload(v.optional(expects(v.pipe(v.number(), v.minValue(0), v.maxValue(1),
    v.description('Fraction of requests traced when the client sent no trace context (parent-based ratio sampling: a client traceparent\'s sampled ' +
    'flag decides for its requests). Recommended: 1.0 development, 0.1 staging, 0.01 production, 0.001 above 100 000 requests per second.')),
  'number 0..1'), 0.01)),
  propagation: onRestart(v.optional(v.pipe(v.picklist(['tracecontext']), v.description('Trace context propagation: W3C traceparent, read from a ' +
    'command\'s $traceparent field (or its comment) and stripped before forwarding.')), 'tracecontext')),
  resource_attributes: onRestart(v.optional(expects(v.pipe(v.record(expects(v.pipe(v.string(), v.regex(RESOURCE_KEY_PATTERN)), 'an attribute name: ' +
    'letters, digits, "_", "." and "-", starting with a letter or "_"'), v.string()),
  v.description('Resource attributes attached to exported traces, e.g. deployment.environment, service.version, service.namespace.')), 'object ' +
    'of attribute name → string'), {})),
  max_queue_spans: onRestart(v.optional(int(64, 1_000_000, 'Spans waiting for export at most; spans beyond are dropped and counted ' +
    '(proxy_trace_spans_dropped_total), so a down or slow collector never holds requests.'), 16_384)),
  max_batch_spans: onRestart(v.optional(int(1, 100_000, 'Spans per export request at most.'), 4096)),
  export_interval_ms: onRestart(v.optional(int(10, 3_600_000, 'Milliseconds between exports of a partly filled batch (a full batch goes at once).'), 5000)),
  export_timeout_ms: onRestart(v.optional(int(100, 600_000, 'An export request not answered within this many milliseconds fails; its spans are ' +
    'dropped and counted.'), 10000)),
});

const rootObject = v.strictObject({
  listen: onRestart(v.optional(listen, '127.0.0.1:27018')),
  workers: onRestart(v.optional(expects(v.pipe(v.union([v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(256)), v.literal('auto')]),
    v.description('Worker processes serving client connections (node:cluster: the first process accepts and hands connections to the workers in ' +
      'turn). 1 runs the whole proxy in one process; "auto" (the default) runs one per CPU the system reports (os.availableParallelism()), ' +
      'but no more than clients.max_connections when that is set. With several, the first process keeps the HTTP endpoints and shows the ' +
      'statistics of every worker merged. See docs/operations.md, "Workers".')),
  'integer 1..256 or "auto"'), 'auto')),
  upstream: onRestart(v.optional(v.pipe(upstream, v.description('Connection pool to the upstream database.')), {})),
  devdb: onRestart(v.optional(v.pipe(devdb, v.description('In-process development upstream.')), {})),
  clients: onRestart(v.optional(v.pipe(clients, v.description('Per-client bounds (backpressure): what one client may make the proxy hold for it.')), {})),
  tls: partlyOnReload(v.optional(v.pipe(tls, v.description('TLS on the client-facing listener (clients then connect with tls=true). Absent: plain ' +
    'TCP.'))), 'Adding or removing the block needs a restart; changes to its keys apply on reload, to new connections (open ones keep their ' +
    'certificate).'),
  auth: partlyOnReload(v.optional(v.pipe(auth, v.description('Client authentication: clients log in to the proxy with SCRAM-SHA-256 as users ' +
    'listed here; the proxy logs in to the upstream with upstream.uri\'s own credentials and never forwards a client\'s. Absent: clients connect ' +
    'without credentials (a client that sends some gets AuthenticationFailed). See docs/operations.md.'))), 'Adding or removing the block, and ' +
    'changes to `mode` and `users`, apply on reload; `secret_file` needs a restart.', 'reload'),
  shutdown: onReload(v.optional(v.pipe(shutdown, v.description('Graceful shutdown.')), {})),
  worker_heartbeat: onRestart(v.optional(v.pipe(workerHeartbeat, v.description('How the first process of a proxy with several workers tells a ' +
    'hung worker (one that stops answering but does not exit) and replaces it. Not used with one worker. See docs/operations.md, "Workers".')),
  {})),
  compression: onRestart(v.optional(
    v.pipe(
      v.array(v.picklist(['snappy', 'zlib', 'zstd'])),
      v.description('Wire compressors the proxy offers to clients, in order of preference.'),
    ),
    ['snappy', 'zlib', 'zstd'],
  )),
  zlib_level: onRestart(v.optional(
    int(-1, 9, 'zlib compression level; -1 uses zlib\'s default.'),
    -1,
  )),
  log: onRestart(v.optional(v.pipe(log, v.description('Logging.')), {})),
  pipeline: partlyOnReload(v.optional(v.pipe(pipeline, v.description('The default pipeline: every request goes through it, or, with `pipelines`, ' +
    'every request no pipeline there matches.')), {}), '`request` and `response` apply on reload; `id` needs a restart.'),
  pipelines: onReload(v.optional(v.pipe(v.array(pipelineEntry), v.maxLength(MAX_PIPELINES),
    v.description('Several pipelines, each chosen by a `match`: a request goes through the first pipeline whose match it satisfies, else through ' +
    'the default pipeline (`pipeline`, or the entry with its id). Each pipeline is its own graph, with its own profile, metrics (label ' +
    'pipeline_id), canary and reload generation. A pipeline that can never match (an earlier match covers it) and an unknown step are refused with ' +
    'their key path. See docs/pipelines.md.')))),
  steps: onReload(v.optional(
    v.pipe(
      v.record(
        expects(v.pipe(v.string(), v.regex(STEP_NAME_PATTERN)), 'step name matching ^[a-z][a-z0-9_-]*$'),
        step,
      ),
      v.description('Per-step settings, keyed by step name (without the "wasm:" prefix).'),
    ),
    {},
  )),
  admin: onReload(v.optional(v.pipe(admin, v.description('Administrative behaviour of the running proxy.')))),
  profiling: partlyOnReload(v.optional(v.pipe(profiling, v.description('Per-step profiling: HDR histograms per graph, step and phase; the ' +
    'profiling HTTP endpoint; slow-step detection. Absent: no profiling endpoint (connections to its port are refused).'))), 'Adding or removing ' +
    'the block needs a restart; inside it, `histogram_buckets`, `flamegraph_frames`, `storage`, `mmap_path`, `mmap_size_mb` and the `snapshot_*` ' +
    'keys need a restart, the others apply on reload.'),
  telemetry: partlyOnReload(v.optional(v.pipe(telemetry, v.description('OpenTelemetry trace export (OTLP/HTTP) of sampled requests; see ' +
    'docs/tracing.md. `telemetry.sample_rate` applies on reload: raise it during an incident without dropping a connection.'))), 'Adding or ' +
    'removing the block needs a restart; inside it only `sample_rate` applies on reload.'),
  control_plane: partlyOnReload(v.optional(v.pipe(controlPlaneSchema, v.description('Canary control-plane API (docs/canary.md). Absent: no control ' +
    'plane (its port is refused) and no canary can start. Present without `profiling`: a profiler with default settings runs as well (no profiling ' +
    'endpoint is opened); a canary does not read it, each of its arms counts its own requests.'))), 'Adding or removing the block needs a restart; ' +
    'its keys apply on reload (tokens at once, a new host or port rebinds the listener).'),
  canary: partlyOnReload(v.optional(v.pipe(canarySchema, v.description('Canary defaults and storage; a canary started through the API may override ' +
    'stages, auto_promote and judge.')), {}), '`stages`, `auto_promote` and `judge` apply on reload to canaries started after it; the others need ' +
    'a restart.'),
  rollback_rules: onReload(v.optional(v.pipe(rollbackRulesSchema, v.description('Default rollback rules of canaries; a start request\'s ' +
    'rollback_rules are merged over them key by key.')), {})),
  auto_promote_rules: onReload(v.optional(v.pipe(autoPromoteRulesSchema, v.description('Default auto-promote rules of canaries (merged key by key ' +
    'with a start request\'s).')), {})),
  notifications: partlyOnReload(v.optional(v.pipe(notificationsSchema, v.description('Canary notifications: default channels, the outbox, retries ' +
    'and the SMTP server. See docs/notifications.md.')), {}), '`outbox_path` needs a restart; the other keys apply on reload.'),
  fleet: onRestart(v.optional(v.pipe(fleetSchema, v.description('Several proxy instances running one canary: shared state, one elected evaluator, ' +
    'fleet-wide evidence (docs/fleet.md). Absent: one instance (`store: sqlite`).')), {})),
});

type PathItem = { type: 'object'; origin: 'value'; input: Record<string, unknown>; key: string; value: unknown };

function pathItem(input: Record<string, unknown>, key: string): PathItem {
  return { type: 'object', origin: 'value', input, key, value: input[key] };
}

/** Path items along `keys` (object keys and array indices) from `root`. */
function pathItems(root: Record<string, unknown>, keys: readonly (string | number)[]): Array<PathItem | { type: 'array'; origin: 'value';
  input: unknown[]; key: number; value: unknown }> {
  const out: Array<PathItem | { type: 'array'; origin: 'value'; input: unknown[]; key: number; value: unknown }> = [];
  let at: unknown = root;
  for (const k of keys) {
    if (typeof k === 'number') {
      const arr = at as unknown[];
      out.push({ type: 'array', origin: 'value', input: arr, key: k, value: arr[k] });
      at = arr[k];
    } else {
      const obj = at as Record<string, unknown>;
      out.push(pathItem(obj, k));
      at = obj[k];
    }
  }
  return out;
}

/** The whole configuration file. Cross-field rules run only once every key is individually valid. */
export const ProxyConfigSchema = v.pipe(
  rootObject,
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const cfg = dataset.value;
    const hb = cfg.worker_heartbeat;
    if (hb.timeout_ms !== 0 && hb.timeout_ms < 2 * hb.interval_ms) {
      addIssue({
        message: `must be 0 or at least twice worker_heartbeat.interval_ms (${2 * hb.interval_ms}), received ${hb.timeout_ms}`,
        path: [
          pathItem(cfg as unknown as Record<string, unknown>, 'worker_heartbeat'),
          pathItem(hb as unknown as Record<string, unknown>, 'timeout_ms'),
        ],
      });
    }
    if (cfg.upstream.min_idle > cfg.upstream.pool_size) {
      addIssue({
        message: `must be <= upstream.pool_size (${cfg.upstream.pool_size}), received ${cfg.upstream.min_idle}`,
        path: [
          pathItem(cfg as unknown as Record<string, unknown>, 'upstream'),
          pathItem(cfg.upstream as unknown as Record<string, unknown>, 'min_idle'),
        ],
      });
    }
    if (cfg.profiling?.storage === 'mmap' && cfg.profiling.mmap_path === undefined) {
      addIssue({
        message: 'is required when profiling.storage is "mmap"',
        path: [
          pathItem(cfg as unknown as Record<string, unknown>, 'profiling'),
          pathItem(cfg.profiling as unknown as Record<string, unknown>, 'mmap_path'),
        ],
      });
    }
    if (cfg.tls !== undefined && cfg.tls.client_certificates !== 'none' && cfg.tls.ca_file === undefined) {
      addIssue({
        message: `client_certificates "${cfg.tls.client_certificates}" needs tls.ca_file (the authorities client certificates must verify against)`,
        path: [
          pathItem(cfg as unknown as Record<string, unknown>, 'tls'),
          pathItem(cfg.tls as unknown as Record<string, unknown>, 'client_certificates'),
        ],
      });
    }
    if (cfg.auth !== undefined) {
      const seen = new Set<string>();
      const users = cfg.auth.users;
      users.forEach((u, i) => {
        const k = `${u.db}\u0000${u.name}`;
        if (seen.has(k)) {
          addIssue({
            message: `duplicate user "${u.name}" in db "${u.db}"`,
            path: [pathItem(cfg as unknown as Record<string, unknown>, 'auth'), pathItem(cfg.auth as unknown as Record<string, unknown>, 'users'),
              { type: 'array', origin: 'value', input: users, key: i, value: u }, pathItem(u as unknown as Record<string, unknown>, 'name')],
          });
        }
        seen.add(k);
      });
    }
    if (cfg.admin?.listen !== undefined && cfg.admin.token === undefined) {
      addIssue({
        message: 'is required when admin.listen is set (the admin API never runs unauthenticated)',
        path: [
          pathItem(cfg as unknown as Record<string, unknown>, 'admin'),
          pathItem(cfg.admin as unknown as Record<string, unknown>, 'token'),
        ],
      });
    }
    const root = cfg as unknown as Record<string, unknown>;
    const notif = cfg.notifications as unknown as Record<string, unknown>;
    if (cfg.notifications.initial_backoff_ms > cfg.notifications.max_backoff_ms) {
      addIssue({
        message: `must be <= notifications.max_backoff_ms (${cfg.notifications.max_backoff_ms}), received ${cfg.notifications.initial_backoff_ms}`,
        path: [pathItem(root, 'notifications'), pathItem(notif, 'initial_backoff_ms')],
      });
    }
    cfg.notifications.channels.forEach((ch, i) => {
      for (const problem of channelProblems(ch, cfg.notifications)) {
        addIssue({
          message: problem.message,
          path: [
            pathItem(root, 'notifications'),
            pathItem(notif, 'channels'),
            { type: 'array', origin: 'value', input: cfg.notifications.channels, key: i, value: ch },
            ...(problem.key === null ? [] : [pathItem(ch as unknown as Record<string, unknown>, problem.key)]),
          ],
        });
      }
    });
    for (const problem of pipelineListProblems(cfg)) addIssue({ message: problem.message,
      path: pathItems(root, problem.path) as [v.IssuePathItem, ...v.IssuePathItem[]] });
    for (const { path, list, owner } of stepLists(cfg)) {
      list.forEach((id, i) => {
        if (!STEP_ID_PATTERN.test(id)) return; // already reported as malformed
        const name = id.startsWith('wasm:') ? id.slice(5) : id;
        const problem = unknownStep(id, (owner === null ? undefined : owner.steps?.[name]) ?? cfg.steps[name], `steps.${name} names no "module" or "package"`);
        if (problem === null) return;
        addIssue({
          message: problem,
          path: [...pathItems(root, path), { type: 'array', origin: 'value', input: list, key: i, value: id }] as unknown as [v.IssuePathItem,
            ...v.IssuePathItem[]],
        });
      });
    }
  }),
);

export type ProxyConfig = v.InferOutput<typeof ProxyConfigSchema>;
/** What a config file may contain (every key optional). */
export type ProxyConfigInput = v.InferInput<typeof ProxyConfigSchema>;
export type StepConfig = ProxyConfig['steps'][string];
export type StepId = ProxyConfig['pipeline']['request'][number];

/** The configuration used when no file is given or found. */
export function defaultConfig(): ProxyConfig {
  return v.parse(ProxyConfigSchema, {});
}

// ---- Introspection, shared by the error formatter and the docs generator -----------------------

export type AnySchema = v.GenericSchema & {
  type: string;
  pipe?: readonly { kind: string; type: string; description?: string }[];
  wrapped?: AnySchema;
  default?: unknown;
  entries?: Record<string, AnySchema>;
  item?: AnySchema;
  key?: AnySchema;
  value?: AnySchema;
  options?: readonly unknown[];
};

/** Strips optional wrappers, remembering the default, down to the schema that checks the value. */
export function unwrap(schema: AnySchema): { inner: AnySchema; optional: boolean; fallback: unknown } {
  let optional = false;
  let fallback: unknown = undefined;
  let s = schema;
  while (s.type === 'optional' || s.type === 'exact_optional' || s.type === 'nullish') {
    optional = true;
    if (s.default !== undefined && fallback === undefined) fallback = s.default;
    s = s.wrapped as AnySchema;
  }
  return { inner: s, optional, fallback };
}

/** The schema the value check is made of (for a pipe, its first item). */
export function base(schema: AnySchema): AnySchema {
  return schema.type === 'pipe' ? (schema.pipe?.[0] as unknown as AnySchema) : schema;
}

function descriptionOf(schema: AnySchema): string {
  const meta = schema.pipe?.find((p) => p.kind === 'metadata' && p.type === 'description');
  return meta?.description ?? '';
}

/** `integer 0..65535`, `number >= 1`, …: a number schema's own checks (integer, min_value, max_value), as `int()` words them. */
function numberPhrase(schema: AnySchema): string {
  const actions = (schema.pipe ?? []) as readonly { kind: string; type: string; requirement?: unknown }[];
  const kind = actions.some((a) => a.kind === 'validation' && a.type === 'integer') ? 'integer' : 'number';
  const min = actions.find((a) => a.kind === 'validation' && a.type === 'min_value')?.requirement;
  const max = actions.find((a) => a.kind === 'validation' && a.type === 'max_value')?.requirement;
  if (min !== undefined && max !== undefined) return `${kind} ${String(min)}..${String(max)}`;
  if (min !== undefined) return `${kind} >= ${String(min)}`;
  if (max !== undefined) return `${kind} <= ${String(max)}`;
  return kind;
}

/** `string`, or `non-empty string` / `string of at least 16 characters` for a string schema with a min_length check. */
function stringPhrase(schema: AnySchema): string {
  const actions = (schema.pipe ?? []) as readonly { kind: string; type: string; requirement?: unknown }[];
  const min = actions.find((a) => a.kind === 'validation' && a.type === 'min_length')?.requirement;
  if (typeof min !== 'number' || min < 1) return 'string';
  return min === 1 ? 'non-empty string' : `string of at least ${min} characters`;
}

/** The phrase for what a (non-optional) schema accepts, e.g. `integer >= 1`. */
export function describeExpected(schema: AnySchema): string {
  const own = (schema as Expects)[EXPECTS];
  if (own) return own;
  const b = base(schema);
  switch (b.type) {
    case 'strict_object':
    case 'object':
      return 'object';
    case 'record':
      return 'object';
    case 'array':
      return `array of ${describeExpected(unwrap(b.item as AnySchema).inner)}`;
    case 'picklist':
      return (b.options ?? []).map((o) => JSON.stringify(o)).join(' | ');
    case 'string':
      return stringPhrase(schema);
    case 'number':
      return numberPhrase(schema);
    case 'boolean':
      return 'boolean';
    default:
      return b.type;
  }
}

/** Follows a key path (object keys, record keys, array indices) from the root to a schema. */
export function schemaAtPath(path: readonly (string | number)[]): AnySchema | undefined {
  let s: AnySchema | undefined = rootObject as unknown as AnySchema;
  for (const key of path) {
    if (!s) return undefined;
    const b = base(unwrap(s).inner);
    if ((b.type === 'strict_object' || b.type === 'object') && typeof key === 'string') s = b.entries?.[key];
    else if (b.type === 'record') s = b.value;
    else if (b.type === 'array') s = b.item;
    else return undefined;
  }
  return s ? unwrap(s).inner : undefined;
}

export interface SchemaKey {
  /** Dotted key path; record members appear as `<name>`, e.g. `steps.<name>.module`. */
  path: string;
  /** What the key accepts, as used in error messages. */
  type: string;
  /** The default, or undefined when the key has none. */
  default: unknown;
  /** Whether the key may be left out. */
  optional: boolean;
  description: string;
  /** When a change applies (the key's mark; undefined only for a key someone forgot to mark). */
  applies: Applies | undefined;
}

/** The keys of the root object: what a reload's diff (reload.ts) walks. */
export function rootEntries(): Record<string, AnySchema> {
  return (rootObject as unknown as AnySchema).entries ?? {};
}

/** Every key of the configuration, depth first in declaration order. */
export function schemaKeys(): SchemaKey[] {
  const out: SchemaKey[] = [];
  const walk = (entries: Record<string, AnySchema>, prefix: string) => {
    for (const [key, schema] of Object.entries(entries)) {
      const { inner, optional, fallback } = unwrap(schema);
      const path = prefix + key;
      out.push({ path, type: describeExpected(inner), default: fallback, optional, description: descriptionOf(inner), applies: appliesOf(schema) });
      const b = base(inner);
      if (b.type === 'strict_object' && b.entries) walk(b.entries, `${path}.`);
      if (b.type === 'array') {
        const item = base(unwrap(b.item as AnySchema).inner);
        if (item.type === 'strict_object' && item.entries) walk(item.entries, `${path}[].`);
      }
      if (b.type === 'record') {
        const value = base(unwrap(b.value as AnySchema).inner);
        if (value.type === 'strict_object' && value.entries) walk(value.entries, `${path}.<name>.`);
      }
    }
  };
  walk((rootObject as unknown as AnySchema).entries ?? {}, '');
  return out;
}

/** The keys an object at `path` accepts (none when `path` is not an object), to suggest a misspelt key. */
export function objectKeysAt(path: readonly (string | number)[]): string[] {
  const s = path.length === 0 ? (rootObject as unknown as AnySchema) : schemaAtPath(path);
  if (!s) return [];
  const b = base(s);
  return (b.type === 'strict_object' || b.type === 'object') && b.entries ? Object.keys(b.entries) : [];
}

/** The key schema of the record found at `path`, used to explain a refused record key. */
export function recordKeySchemaAt(path: readonly (string | number)[]): AnySchema | undefined {
  const s = schemaAtPath(path);
  if (!s) return undefined;
  const b = base(s);
  return b.type === 'record' && b.key ? unwrap(b.key).inner : undefined;
}
