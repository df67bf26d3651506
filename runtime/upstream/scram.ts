// SCRAM client (RFC 5802 / RFC 7677) for authenticating the proxy's upstream connections, as
// MongoDB's SCRAM-SHA-256 and SCRAM-SHA-1 mechanisms define it
// (github.com/mongodb/specifications source/auth/auth.md):
//   saslStart  { mechanism, payload: "n,,n=<user>,r=<client nonce>", autoAuthorize: 1, options: { skipEmptyExchange: true } }
//   server-first "r=<nonce>,s=<salt b64>,i=<iterations>"
//   saslContinue { conversationId, payload: "c=biws,r=<nonce>,p=<client proof b64>" }
//   server-final "v=<server signature b64>" — verified, so a server that does not know the
//   password cannot impersonate the upstream.
// SCRAM-SHA-1 hashes the password as MongoDB does (hex MD5 of "<user>:mongo:<password>");
// SCRAM-SHA-256 uses the password itself (SASLprep is the identity for ASCII passwords; others are
// normalised NFKC, which covers the common cases).
import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';

export type ScramMechanism = 'SCRAM-SHA-256' | 'SCRAM-SHA-1';

export interface Credentials {
  username: string;
  password: string;
  source: string;
  mechanism: ScramMechanism;
}

/** Derived keys are expensive (PBKDF2 with thousands of iterations): cache them per salt. */
const keyCache = new Map<string, Buffer>();

function escapeName(name: string): string {
  return name.replace(/=/g, '=3D').replace(/,/g, '=2C');
}

function saltedPassword(c: Credentials, salt: Buffer, iterations: number): Buffer {
  const hash = c.mechanism === 'SCRAM-SHA-256' ? 'sha256' : 'sha1';
  const password = c.mechanism === 'SCRAM-SHA-256'
    ? c.password.normalize('NFKC')
    : createHash('md5').update(`${c.username}:mongo:${c.password}`).digest('hex');
  // The key covers everything the result depends on — the password included (as a digest, so the
  // map holds no plaintext): a cache keyed without it would accept a wrong password.
  const key = `${c.mechanism}:${salt.toString('base64')}:${iterations}:${createHash('sha256').update(password).digest('base64')}`;
  let v = keyCache.get(key);
  if (v === undefined) {
    v = pbkdf2Sync(password, salt, iterations, hash === 'sha256' ? 32 : 20, hash);
    if (keyCache.size > 64) keyCache.clear();
    keyCache.set(key, v);
  }
  return v;
}

function parse(payload: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of payload.split(',')) {
    const i = part.indexOf('=');
    if (i > 0) out.set(part.slice(0, i), part.slice(i + 1));
  }
  return out;
}

/** One authentication conversation: first(), then next(serverFirst), then finish(serverFinal). */
export class ScramClient {
  private readonly c: Credentials;
  private readonly nonce: string;
  private readonly clientFirstBare: string;
  private expectedServerSignature: Buffer | null = null;

  constructor(c: Credentials, nonce = randomBytes(24).toString('base64')) {
    this.c = c;
    this.nonce = nonce;
    this.clientFirstBare = `n=${escapeName(c.username)},r=${nonce}`;
  }

  first(): Buffer {
    return Buffer.from(`n,,${this.clientFirstBare}`);
  }

  /** Client-final message for the server-first message; throws on a malformed or hostile one. */
  next(serverFirst: Buffer): Buffer {
    const text = serverFirst.toString('utf8');
    const f = parse(text);
    const r = f.get('r');
    const s = f.get('s');
    const i = Number(f.get('i'));
    if (r === undefined || s === undefined || !Number.isInteger(i)) throw new Error('malformed SCRAM server-first message');
    if (!r.startsWith(this.nonce)) throw new Error('SCRAM server nonce does not extend the client nonce');
    if (i < 4096) throw new Error(`SCRAM iteration count ${i} is below the minimum of 4096`);
    const hash = this.c.mechanism === 'SCRAM-SHA-256' ? 'sha256' : 'sha1';
    const salted = saltedPassword(this.c, Buffer.from(s, 'base64'), i);
    const clientKey = createHmac(hash, salted).update('Client Key').digest();
    const storedKey = createHash(hash).update(clientKey).digest();
    const withoutProof = `c=biws,r=${r}`;
    const authMessage = `${this.clientFirstBare},${text},${withoutProof}`;
    const clientSignature = createHmac(hash, storedKey).update(authMessage).digest();
    const proof = Buffer.alloc(clientKey.length);
    for (let k = 0; k < proof.length; k++) proof[k] = clientKey[k] ^ clientSignature[k];
    const serverKey = createHmac(hash, salted).update('Server Key').digest();
    this.expectedServerSignature = createHmac(hash, serverKey).update(authMessage).digest();
    return Buffer.from(`${withoutProof},p=${proof.toString('base64')}`);
  }

  /** Verifies the server's signature (mutual authentication). */
  finish(serverFinal: Buffer): void {
    const f = parse(serverFinal.toString('utf8'));
    const e = f.get('e');
    if (e !== undefined) throw new Error(`SCRAM server error: ${e}`);
    const v = f.get('v');
    const want = this.expectedServerSignature;
    if (v === undefined || want === null) throw new Error('malformed SCRAM server-final message');
    const got = Buffer.from(v, 'base64');
    if (got.length !== want.length || !timingSafeEqual(got, want)) throw new Error('SCRAM server signature does not match: the upstream does not ' +
      'know this password');
  }
}

/** Server-side helpers (used by the development upstream to accept SCRAM-SHA-256 logins). */
export function scramServerKeys(password: string, salt: Buffer, iterations: number): { storedKey: Buffer; serverKey: Buffer } {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  return {
    storedKey: createHash('sha256').update(clientKey).digest(),
    serverKey: createHmac('sha256', salted).update('Server Key').digest(),
  };
}
