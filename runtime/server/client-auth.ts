// Client authentication (config `auth`): the proxy's users, stored as SCRAM-SHA-256 credentials,
// and the MongoDB command shapes around a conversation (client-auth-scram.ts):
//   saslStart    { saslStart: 1, mechanism: "SCRAM-SHA-256", payload, options: { skipEmptyExchange } }
//                → { conversationId: 1, done: false, payload: server-first, ok: 1 }
//   saslContinue { saslContinue: 1, conversationId: 1, payload: client-final }
//                → { conversationId: 1, done: true|false, payload: server-final, ok: 1 }
//   (without skipEmptyExchange one more saslContinue with an empty payload → done: true)
//   hello        { …, saslSupportedMechs: "<db>.<user>", speculativeAuthenticate: { saslStart: 1, …, db } }
//                → { …, saslSupportedMechs: ["SCRAM-SHA-256"], speculativeAuthenticate: { conversationId, done, payload } }
// Spec: github.com/mongodb/specifications source/auth/auth.md. One ClientAuth per configuration;
// a reload builds a new one, and connections read the current one from their ServerContext.
import { createHmac, randomBytes } from 'node:crypto';
import { Binary, type Document } from 'bson';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import { ConfigError } from '../config/index.ts';
import { readRegularFileStatSync } from '../fs/index.ts';
import { ScramRefusal, ScramServerConversation, parseClientFirst, type ScramCredential } from './client-auth-scram.ts';
import { deriveCursorSeal, type CursorSeal } from './cursor-seal.ts';

export const SCRAM_SHA_256 = 'SCRAM-SHA-256';
/** Iterations of the decoy credential answered for unknown users (mongod's default for SCRAM-SHA-256). */
const DECOY_ITERATIONS = 15000;

/** What config `auth` becomes (app/serve.ts decodes the base64). */
export interface ClientAuthSettings {
  /** true: every command but the handshake, authentication, ping and buildInfo needs a logged-in connection. */
  readonly required: boolean;
  readonly users: readonly ScramCredential[];
}

/** Commands an unauthenticated connection may run when authentication is required (as mongod). */
export const OPEN_COMMANDS: ReadonlySet<string> = new Set([
  'hello', 'isMaster', 'ismaster', 'saslStart', 'saslContinue', 'logout', 'ping', 'buildInfo', 'buildinfo',
]);

/** Commands the proxy answers itself when client authentication is on (never forwarded). */
export const AUTH_COMMANDS: ReadonlySet<string> = new Set(['saslStart', 'saslContinue', 'authenticate', 'getnonce', 'logout']);

/** The one reply a client gets for an unknown user or a wrong password (as mongod: no difference). */
const FAILED = 'Authentication failed.';

export class ClientAuth {
  readonly required: boolean;
  private readonly users = new Map<string, ScramCredential>();
  /**
   * Key of the decoy salts: the same unknown name gets the same salt for as long as the process
   * tree runs, from every worker — with auth.secret_file, from every instance and across restarts
   * (a salt that changed between workers or restarts would tell unknown users from real ones).
   */
  private readonly decoyKey: Buffer;
  /** The process tree's secret the decoy key and the cursor seals (cursor-seal.ts) are derived from. */
  private readonly authSecret: Buffer;
  /** Seals by credential (a connection's login), made at a login's first cursor command. */
  private readonly seals = new Map<ScramCredential, CursorSeal>();
  private anonymousSeal: CursorSeal | null = null;

  constructor(settings: ClientAuthSettings, authSecret: Buffer) {
    this.required = settings.required;
    this.decoyKey = createHmac('sha256', authSecret).update('pipeline-proxy decoy salt v1').digest();
    this.authSecret = authSecret;
    for (const u of settings.users) this.users.set(key(u.db, u.name), u);
  }

  get size(): number {
    return this.users.size;
  }

  lookup(db: string, name: string): ScramCredential | null {
    return this.users.get(key(db, name)) ?? null;
  }

  /** Whether a connection logged in as `c` still may be (the user exists with the same keys). */
  stillValid(c: ScramCredential): boolean {
    const now = this.lookup(c.db, c.name);
    return now !== null && now.storedKey.equals(c.storedKey) && now.serverKey.equals(c.serverKey);
  }

  /**
   * The cursor seal of a connection logged in with `c` (null: not logged in, auth.mode optional).
   * A credential of an earlier configuration still valid here gets the same seal as this one's.
   */
  cursorSeal(c: ScramCredential | null): CursorSeal {
    if (c === null) return this.anonymousSeal ??= deriveCursorSeal(this.authSecret, null);
    let s = this.seals.get(c);
    if (s === undefined) this.seals.set(c, s = deriveCursorSeal(this.authSecret, c));
    return s;
  }

  /**
   * Starts a conversation for a saslStart (or hello's speculativeAuthenticate) on database `db`.
   * Throws ProxyError (MechanismUnavailable, AuthenticationFailed) for what cannot start.
   */
  start(cmd: Document, db: string): ScramServerConversation {
    if (cmd.mechanism !== SCRAM_SHA_256) {
      throw new ProxyError(ErrorCodes.MechanismUnavailable,
        `Received authentication for mechanism ${String(cmd.mechanism)} which is not enabled: the proxy accepts ${SCRAM_SHA_256} only`);
    }
    const first = parseClientFirst(payloadBytes(cmd.payload));
    const c = this.lookup(db, first.user);
    return new ScramServerConversation(first, c ?? this.decoy(db, first.user), c !== null);
  }

  /** An unknown user's stand-in: a stable salt, keys nobody knows. */
  private decoy(db: string, name: string): ScramCredential {
    const salt = createHmac('sha256', this.decoyKey).update(key(db, name)).digest().subarray(0, 28);
    return { name, db, salt, iterations: DECOY_ITERATIONS, storedKey: randomBytes(32), serverKey: randomBytes(32) };
  }
}

function key(db: string, name: string): string {
  return `${db}\u0000${name}`;
}

/** A SASL payload as bytes: BSON binary (drivers) or a string (some shells). */
export function payloadBytes(p: unknown): Buffer {
  if (p instanceof Binary) return Buffer.from(p.buffer.buffer, p.buffer.byteOffset, p.position);
  if (p instanceof Uint8Array) return Buffer.from(p.buffer, p.byteOffset, p.byteLength);
  if (typeof p === 'string') return Buffer.from(p, 'utf8');
  throw new ProxyError(ErrorCodes.BadValue, 'SASL payload must be binary data');
}

/** The client-facing error for a refused conversation: details only for protocol errors. */
export function refusalError(err: ScramRefusal): ProxyError {
  return new ProxyError(ErrorCodes.AuthenticationFailed, err.protocol ? `${FAILED} ${err.message}` : FAILED);
}

export function failed(): ProxyError {
  return new ProxyError(ErrorCodes.AuthenticationFailed, FAILED);
}

export function saslReply(done: boolean, payload: string): Document {
  return { conversationId: 1, done, payload: new Binary(Buffer.from(payload, 'utf8')), ok: 1 };
}

/** A new secret for client authentication's keys: one per process tree (with workers, the primary's, handed to each). */
export function newAuthSecret(): Buffer {
  return randomBytes(32);
}

/** The fewest characters auth.secret_file holds (surrounding whitespace trimmed): `openssl rand -base64 48` gives 64. */
export const SECRET_FILE_MIN_CHARS = 32;
/** The largest auth.secret_file read (as mongod's keyFile): one secret, not a data file. */
export const SECRET_FILE_MAX_BYTES = 1024;

/**
 * The process tree's secret (the decoy salts, the cursor seals) as the configuration gives it:
 * with auth.secret_file, HMAC-SHA256 of the file's content (surrounding whitespace trimmed) over a
 * fixed label — every instance given the same file, and the same instance after a restart, seals
 * cursor ids and answers unknown users alike; without it, a new random one (newAuthSecret). Read
 * when the proxy starts. Throws a ConfigError on `auth.secret_file` for a file that cannot be read,
 * holds fewer than SECRET_FILE_MIN_CHARS characters, or (POSIX, as mongod's keyFile) gives its
 * group or others any permission.
 */
export function configuredAuthSecret(auth: { secret_file?: string } | undefined, source: string | null): Buffer {
  const path = auth?.secret_file;
  if (path === undefined) return newAuthSecret();
  const refuse = (message: string) => new ConfigError(source, [{ path: 'auth.secret_file', message }]);
  let read: ReturnType<typeof readRegularFileStatSync>;
  try {
    read = readRegularFileStatSync(path, SECRET_FILE_MAX_BYTES);
  } catch (err) {
    throw refuse(`cannot read ${path}: ${(err as Error).message}`);
  }
  const mode = read.stat.mode & 0o777;
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    throw refuse(`permissions on ${path} are too open (mode ${mode.toString(8).padStart(4, '0')}): its group and others must have no ` +
      `access (chmod 600 ${path})`);
  }
  const content = read.bytes.toString('utf8').trim();
  if (content.length < SECRET_FILE_MIN_CHARS) {
    throw refuse(`${path} holds ${content.length} characters (surrounding whitespace not counted); at least ${SECRET_FILE_MIN_CHARS} are ` +
      'needed (e.g. openssl rand -base64 48)');
  }
  return createHmac('sha256', content).update('pipeline-proxy auth secret v1').digest();
}
