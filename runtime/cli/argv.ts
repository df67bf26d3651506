// What the CLI commands share about reading their options.

/**
 * The value of `--<name>` exactly as typed, or undefined when it is not on the command line.
 * cac (mri) turns number-looking values into numbers ("007" → 7; a long digit token loses
 * digits), which a token or an id must not become.
 */
export function typedOption(name: string): string | undefined {
  const argv = process.argv;
  for (let i = argv.length - 1; i >= 0; i--) {
    if (argv[i] === `--${name}` && i + 1 < argv.length) return argv[i + 1];
    if (argv[i].startsWith(`--${name}=`)) return argv[i].slice(name.length + 3);
  }
  return undefined;
}

/** The highest TCP port. */
export const MAX_PORT = 65535;

/** `host:port` or an http(s) URL → `http(s)://host:port[/path]` without a trailing slash; or why not. */
export function httpBaseUrl(text: string, what: string): { url: string } | { problem: string } {
  const t = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  // A port the URL parser would refuse (99999) or keep (0, which nothing listens on): said as such, not "not a URL".
  const port = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(?:\[[^\]/?#]*\]|[^:/?#]*):(\d+)(?:[/?#]|$)/i.exec(t)?.[1];
  if (port !== undefined && !(Number(port) >= 1 && Number(port) <= MAX_PORT)) {
    return { problem: `${what} "${text}": the port must be 1..${MAX_PORT}, got ${port}` };
  }
  let u: URL;
  try { u = new URL(t); } catch { return { problem: `${what} "${text}" is not a URL (use http://host:port)` }; }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return { problem: `${what} "${text}" must be http:// or https://` };
  return { url: `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}` };
}

/**
 * The base URL an option names (`given`: the option as typed, when on the command line), else the
 * environment variable's, else `fallback`; or why not, naming where the bad value came from (the
 * option, the variable or the default).
 */
export function endpointUrl(option: string, given: string | undefined, env: string, fallback: string): { url: string } | { problem: string } {
  if (given !== undefined) return httpBaseUrl(given, `--${option}`);
  const fromEnv = process.env[env];
  return fromEnv !== undefined ? httpBaseUrl(fromEnv, `$${env}`) : httpBaseUrl(fallback, `the default --${option}`);
}

/**
 * An integer option as typed, digits only, as the HTTP APIs take their integer parameters: cac
 * (mri) turns "1e3" into 1000 and "0x10" into 16 before the command sees them. `{ value: undefined }`
 * when the option is absent; `{ problem }` (naming the option and the value) when it is not digits.
 */
export function digitsOption(name: string, parsed: unknown): { value: number | undefined } | { problem: string } {
  if (parsed === undefined) return { value: undefined };
  const text = typedOption(name) ?? (typeof parsed === 'boolean' ? '' : String(parsed));
  if (!/^\d+$/.test(text)) return { problem: `--${name} must be digits only (a whole number), got "${text}"` };
  return { value: Number(text) };
}

/**
 * A port option (`--port`): digits only (digitsOption), 0..65535; 0, "any free port", only where
 * `anyFree` says the command documents it, else 1..65535.
 */
export function portOption(name: string, parsed: unknown, anyFree: boolean): { value: number | undefined } | { problem: string } {
  const r = digitsOption(name, parsed);
  const min = anyFree ? 0 : 1;
  if ('problem' in r || r.value === undefined || (r.value >= min && r.value <= MAX_PORT)) return r;
  return { problem: `--${name} must be a port number ${min}..${MAX_PORT}${anyFree ? ' (0: any free port)' : ''}, got ` +
    `${typedOption(name) ?? String(parsed)}` };
}
