// Which database attribute names the spans carry (docs/tracing.md, "Attribute names"): the contract's
// (db.system, db.operation, db.upstream.collection, net.peer.*) always; the stable OpenTelemetry
// database conventions' (db.system.name, db.operation.name, db.namespace, db.collection.name,
// server.*) as well only when `OTEL_SEMCONV_STABILITY_OPT_IN` opts in to them, OpenTelemetry's own
// migration switch. Sending both names on every span cost about a quarter of a sampled request's
// bytes, and the bytes are most of what tracing costs the running proxy (the export).
//
// The variable is a comma-separated list read as OpenTelemetry's instrumentations read it: entries
// trimmed, empty ones skipped, compared without regard to case; `database` and `database/dup` opt
// in, anything else (`http`, `messaging/dup`, …) is another instrumentation's and ignored. The two
// mean the same here: OpenTelemetry's `database` drops the old names, but the proxy's old names are
// its documented interface, so they stay in both cases.

/** The environment variable (OpenTelemetry's name). */
export const SEMCONV_OPT_IN_ENV = 'OTEL_SEMCONV_STABILITY_OPT_IN';

/** True when `list` (the variable's value; undefined: unset) opts in to the stable database names. */
export function stableDatabaseNames(list: string | undefined): boolean {
  if (list === undefined) return false;
  for (const entry of list.split(',')) {
    const e = entry.trim().toLowerCase();
    if (e === 'database' || e === 'database/dup') return true;
  }
  return false;
}
