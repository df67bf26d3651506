// Optional SCRAM-SHA-256 logins for the development upstream, so the proxy's upstream
// authentication can be exercised end to end. Users are given at start (`proxy devdb --user
// name:password`); an unauthenticated connection may only run the handshake, ping, buildInfo,
// endSessions, logout and the SASL commands, everything else gets code 13 as from mongod with
// authorization enabled; logout ends a connection's login.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Binary, type Document } from 'bson';
import { scramServerKeys } from '../upstream/index.ts';

const ITERATIONS = 15000;

interface UserKeys { salt: Buffer; storedKey: Buffer; serverKey: Buffer }

export const OPEN_COMMANDS: ReadonlySet<string> = new Set([
  'hello', 'isMaster', 'ismaster', 'ping', 'buildInfo', 'buildinfo', 'saslStart', 'saslContinue', 'endSessions', 'logout',
]);

export class DevAuth {
  private readonly users = new Map<string, UserKeys>();
  /** The database the users are defined in: a login against another one fails, as in mongod. */
  readonly db: string;

  constructor(users: Record<string, string>, db = 'admin') {
    this.db = db;
    for (const [name, password] of Object.entries(users)) {
      const salt = randomBytes(16);
      this.users.set(name, { salt, ...scramServerKeys(password, salt, ITERATIONS) });
    }
  }

  get enabled(): boolean {
    return this.users.size > 0;
  }

  /** A per-connection conversation. */
  session(): DevAuthSession {
    return new DevAuthSession(this.users, this.db);
  }
}

function fields(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of text.split(',')) {
    const i = part.indexOf('=');
    if (i > 0) out.set(part.slice(0, i), part.slice(i + 1));
  }
  return out;
}

const FAILED = { ok: 0, errmsg: 'Authentication failed.', code: 18, codeName: 'AuthenticationFailed' };

export class DevAuthSession {
  private readonly users: Map<string, UserKeys>;
  private readonly db: string;
  user: string | null = null;
  private pending: { user: string; keys: UserKeys; clientFirstBare: string; serverFirst: string; nonce: string } | null = null;

  constructor(users: Map<string, UserKeys>, db: string) {
    this.users = users;
    this.db = db;
  }

  /** Ends the connection's login (the `logout` command) and any conversation under way. */
  logout(): void {
    this.user = null;
    this.pending = null;
  }

  saslStart(cmd: Document): Document {
    if (cmd.mechanism !== 'SCRAM-SHA-256') {
      return { ok: 0, errmsg: `Received authentication for mechanism ${String(cmd.mechanism)} which is not enabled`, code: 334,
        codeName: 'MechanismUnavailable' };
    }
    const text = Buffer.from((cmd.payload as Binary).buffer).toString('utf8');
    if (!text.startsWith('n,,')) return FAILED;
    const clientFirstBare = text.slice(3);
    const f = fields(clientFirstBare);
    const user = (f.get('n') ?? '').replace(/=2C/g, ',').replace(/=3D/g, '=');
    // A user exists in one database only (the authSource must name it).
    const keys = cmd.$db === this.db ? this.users.get(user) : undefined;
    const cnonce = f.get('r');
    if (keys === undefined || cnonce === undefined) return FAILED;
    const nonce = cnonce + randomBytes(18).toString('base64');
    const serverFirst = `r=${nonce},s=${keys.salt.toString('base64')},i=${ITERATIONS}`;
    this.pending = { user, keys, clientFirstBare, serverFirst, nonce };
    return { conversationId: 1, done: false, payload: new Binary(Buffer.from(serverFirst)), ok: 1 };
  }

  saslContinue(cmd: Document): Document {
    const p = this.pending;
    this.pending = null;
    if (p === null) return FAILED;
    const text = Buffer.from((cmd.payload as Binary).buffer).toString('utf8');
    const f = fields(text);
    const proof = Buffer.from(f.get('p') ?? '', 'base64');
    if (f.get('r') !== p.nonce || proof.length !== 32) return FAILED;
    const authMessage = `${p.clientFirstBare},${p.serverFirst},${text.slice(0, text.lastIndexOf(',p='))}`;
    const clientSignature = createHmac('sha256', p.keys.storedKey).update(authMessage).digest();
    const clientKey = Buffer.alloc(32);
    for (let i = 0; i < 32; i++) clientKey[i] = proof[i] ^ clientSignature[i];
    if (!timingSafeEqual(createHash('sha256').update(clientKey).digest(), p.keys.storedKey)) return FAILED;
    this.user = p.user;
    const serverSignature = createHmac('sha256', p.keys.serverKey).update(authMessage).digest();
    return { conversationId: 1, done: true, payload: new Binary(Buffer.from(`v=${serverSignature.toString('base64')}`)), ok: 1 };
  }
}
