// Configuration of the fleet (docs/fleet.md): where instances of one proxy keep their shared canary
// state, elect the one that evaluates, register themselves and keep candidate modules by hash. Absent, or
// `store: sqlite`: one instance, everything in its own SQLite file, as before. Every key needs a
// restart (an instance joins or leaves a fleet by restarting).
import * as v from 'valibot';
import { onRestart } from './applies.ts';
import { CANARY_DURATION_PATTERN, CANARY_DURATION_PHRASE, canaryDurationMs } from './canary-schema.ts';
import { expects } from './expects.ts';

export const fleetSchema = v.strictObject({
  store: onRestart(v.optional(v.pipe(v.picklist(['sqlite', 'etcd']), v.description('Where the canary state lives: `sqlite` (one instance; the ' +
    'canary database in canary.data_dir) or `etcd` (a fleet: state, election, registry and candidate modules in etcd v3 at `endpoints`).')), 'sqlite')),
  endpoints: onRestart(v.optional(v.pipe(v.array(v.pipe(v.string(), v.regex(/^https?:\/\/[^/\s]+$/, 'expected http://host:port or https://host:port'))),
    v.description('etcd client URLs (http://host:port, or https:// with `tls`); needed with `store: etcd`.')), [])),
  prefix: onRestart(v.optional(v.pipe(v.string(), v.regex(/^\/[A-Za-z0-9_./-]*$/, 'expected a key prefix starting with "/"'),
    v.description('Key prefix of this fleet in etcd: instances with the same endpoints and prefix form one fleet.')), '/pipeline-proxy')),
  instance_id: onRestart(v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/, 'expected letters, digits, "_", ".", ":" ' +
    'or "-" (at most 128)'), v.description('This instance\'s name in the fleet; unique per fleet. Default: the host name and the client port ' +
    '(`host-27018`).')))),
  advertise_url: onRestart(v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/[^/\s]+$/, 'expected http://host:port'),
    v.description('The control-plane URL other instances reach this one at (the leader reads its evidence there). Default: http:// with ' +
    'control_plane.host and its bound port.')))),
  lease_ttl_s: onRestart(v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(300), v.description('Seconds of the instance\'s ' +
    'etcd lease: a dead or paused instance leaves the registry, and a dead or paused leader is replaced, within this time.')), 10)),
  evidence_quorum_pct: onRestart(v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100), v.description('Share of registered ' +
    'instances whose evidence must be read for an evaluation to decide; with fewer, the window is inconclusive (no promotion, no rollback) and the ' +
    'instances not read are named in the history.')), 50)),
  evidence_timeout_ms: onRestart(v.optional(v.pipe(v.number(), v.integer(), v.minValue(50), v.maxValue(60_000), v.description('How long the ' +
    'leader waits for one instance\'s evidence before counting it as not read.')), 2000)),
  fail_safe_after: onRestart(v.optional(expects(v.pipe(v.string(), v.regex(CANARY_DURATION_PATTERN, `expected a ${CANARY_DURATION_PHRASE}`),
    v.description('After the store has been unreachable this long, the instance sends all traffic of every canary to the baseline and says so ' +
    '(an error in its log; `fail_safe: true` in GET /api/v1/fleet); when the store is back, the store\'s weights apply again. Absent or "0": off ' +
    '(the last applied weights stay).')), CANARY_DURATION_PHRASE))),
  tls: onRestart(v.optional(v.pipe(v.strictObject({
    ca_file: onRestart(v.pipe(v.string(), v.minLength(1), v.description('PEM authorities that sign etcd\'s server certificate.'))),
    cert_file: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('PEM client certificate (etcd --client-cert-auth).')))),
    key_file: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('PEM private key of cert_file.')))),
  }), v.description('TLS to etcd (https:// endpoints).')))),
  username: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('etcd user (etcd auth enabled); with `password` or ' +
    '`password_env`.')))),
  password: onRestart(v.optional(v.pipe(v.string(), v.description('etcd password of `username`.')))),
  password_env: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('Environment variable holding the etcd password (read at ' +
    'start; preferred over `password` in a file).')))),
  artifact_max_bytes: onRestart(v.optional(v.pipe(v.number(), v.integer(), v.minValue(1024), v.maxValue(1_000_000), v.description('Largest ' +
    'candidate module (.wasm) kept in etcd by its SHA-256 when a canary is created (etcd refuses requests above 1.5 MiB by default); a larger ' +
    'one goes to `artifact_dir`.')), 512 * 1024)),
  artifact_dir: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('A directory every instance reads (a shared mount) where ' +
    'candidate modules larger than artifact_max_bytes are kept as `<sha256>.wasm`. Absent: a larger module fails the create.')))),
  artifact_grace: onRestart(v.optional(expects(v.pipe(v.string(), v.regex(CANARY_DURATION_PATTERN, `expected a ${CANARY_DURATION_PHRASE}`),
    v.check((s) => canaryDurationMs(s) >= 1000, 'expected at least 1s'), v.description('How long a candidate module that no active or paused ' +
    'canary names is kept before it is removed: from etcd and `artifact_dir` by the leader, from each instance\'s cache (canary.data_dir/' +
    'artifacts, except the modules its promoted baselines run) by that instance. Counted from when the module is found unneeded; a new ' +
    'publication (for a cached copy, a new use) starts it again. A create under way holds its modules whatever this is.')),
  'duration of at least 1s like "10m" or "1h30m" (ms, s, m, h)'),
  '10m')),
});
