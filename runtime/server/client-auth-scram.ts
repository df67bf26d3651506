// The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as MongoDB speaks it
// (github.com/mongodb/specifications source/auth/auth.md), for clients logging in to the proxy:
//   client-first  "n,,n=<user>,r=<client nonce>"          (saslStart payload)
//   server-first  "r=<client nonce><server nonce>,s=<salt b64>,i=<iterations>"
//   client-final  "c=biws,r=<nonce>,p=<proof b64>"          (saslContinue payload)
//   server-final  "v=<server signature b64>"
// The proxy holds only StoredKey and ServerKey (never a password): the proof is checked by
// recovering ClientKey = proof XOR HMAC(StoredKey, AuthMessage) and comparing H(ClientKey) with
// StoredKey in constant time.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** One user's SCRAM-SHA-256 credential (what mongod keeps in admin.system.users). */
export interface ScramCredential {
  readonly name: string;
  /** The authentication database (the client's authSource). */
  readonly db: string;
  readonly salt: Buffer;
  readonly iterations: number;
  readonly storedKey: Buffer;
  readonly serverKey: Buffer;
}

/** Why a conversation was refused: `reason` is for the proxy's log, never for the client. */
export class ScramRefusal extends Error {
  /** True when the message says nothing about which users exist (safe to show the client). */
  readonly protocol: boolean;
  constructor(reason: string, protocol: boolean) {
    super(reason);
    this.name = 'ScramRefusal';
    this.protocol = protocol;
  }
}

/** RFC 5802 §5.1: printable ASCII except ",". */
const NONCE = /^[\x21-\x2b\x2d-\x7e]+$/;
const MAX_MESSAGE_BYTES = 4096;

/** RFC 5802 §5.1 saslname: "=2C" → ",", "=3D" → "="; any other "=" is malformed. */
function unescapeName(s: string): string | null {
  if (/=(?!2C|3D)/.test(s)) return null;
  return s.replace(/=2C/g, ',').replace(/=3D/g, '=');
}

function attributes(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of text.split(',')) {
    if (part.length < 2 || part[1] !== '=') continue;
    if (!out.has(part[0])) out.set(part[0], part.slice(2));
  }
  return out;
}

/** The parts of a client-first message the server needs. */
export interface ClientFirst {
  /** GS2 header ("n,," or "y,,"), echoed back base64-encoded in client-final's c= attribute. */
  gs2Header: string;
  bare: string;
  user: string;
  nonce: string;
}

export function parseClientFirst(payload: Buffer): ClientFirst {
  if (payload.length > MAX_MESSAGE_BYTES) throw new ScramRefusal('SCRAM client-first message is too long', true);
  const text = payload.toString('utf8');
  // Channel binding ("p=") and authorization identities ("n,a=…,") are not supported.
  let gs2Header: string;
  if (text.startsWith('n,,')) gs2Header = 'n,,';
  else if (text.startsWith('y,,')) gs2Header = 'y,,';
  else throw new ScramRefusal('SCRAM client-first message must start with "n,," (no channel binding, no authorization identity)', true);
  const bare = text.slice(3);
  if (!bare.startsWith('n=')) throw new ScramRefusal('SCRAM client-first message has no user name', true);
  const f = attributes(bare);
  const user = unescapeName(f.get('n') ?? '');
  const nonce = f.get('r');
  if (user === null || user.length === 0) throw new ScramRefusal('SCRAM client-first message has a malformed user name', true);
  if (nonce === undefined || !NONCE.test(nonce)) throw new ScramRefusal('SCRAM client-first message has no valid nonce', true);
  if (f.has('m')) throw new ScramRefusal('SCRAM extensions (m=) are not supported', true);
  return { gs2Header, bare, user, nonce };
}

export const enum ScramState { ServerFirstSent = 0, ServerFinalSent = 1 }

/**
 * One conversation. `credential` is the user's, or — for a name the proxy does not know — a
 * decoy with a deterministic salt and random keys, so an unknown user gets the same answers as a
 * wrong password (no user enumeration) and fails at the proof.
 */
export class ScramServerConversation {
  readonly credential: ScramCredential;
  /** False for a decoy (unknown user): the proof can never verify. */
  readonly known: boolean;
  readonly serverFirst: string;
  state = ScramState.ServerFirstSent;
  private readonly first: ClientFirst;
  private readonly nonce: string;

  /** `serverNonce`: the server's part of the nonce (random; fixed only by test vectors). */
  constructor(first: ClientFirst, credential: ScramCredential, known: boolean, serverNonce = randomBytes(24).toString('base64')) {
    this.first = first;
    this.credential = credential;
    this.known = known;
    this.nonce = first.nonce + serverNonce;
    this.serverFirst = `r=${this.nonce},s=${credential.salt.toString('base64')},i=${credential.iterations}`;
  }

  get user(): string {
    return this.first.user;
  }

  /** Checks client-final; returns server-final. Throws ScramRefusal on any mismatch. */
  verify(payload: Buffer): string {
    if (payload.length > MAX_MESSAGE_BYTES) throw new ScramRefusal('SCRAM client-final message is too long', true);
    const text = payload.toString('utf8');
    const cut = text.lastIndexOf(',p=');
    if (cut < 0) throw new ScramRefusal('SCRAM client-final message has no proof', true);
    const withoutProof = text.slice(0, cut);
    const f = attributes(withoutProof);
    if (f.get('c') !== Buffer.from(this.first.gs2Header).toString('base64')) {
      throw new ScramRefusal('SCRAM client-final channel binding (c=) does not match the client-first header', true);
    }
    if (f.get('r') !== this.nonce) throw new ScramRefusal('SCRAM client-final nonce does not match the conversation', true);
    const proof = Buffer.from(text.slice(cut + 3), 'base64');
    if (proof.length !== 32) throw new ScramRefusal('SCRAM client proof is not 32 bytes', true);
    const c = this.credential;
    const authMessage = `${this.first.bare},${this.serverFirst},${withoutProof}`;
    const clientSignature = createHmac('sha256', c.storedKey).update(authMessage).digest();
    for (let i = 0; i < 32; i++) proof[i] ^= clientSignature[i];
    const recovered = createHash('sha256').update(proof).digest();
    // Compared in constant time, and for decoys too, so timing tells nothing about the user.
    const match = timingSafeEqual(recovered, c.storedKey);
    if (!match || !this.known) throw new ScramRefusal(this.known ? 'wrong password (the client proof does not verify)' : 'unknown user', false);
    this.state = ScramState.ServerFinalSent;
    return `v=${createHmac('sha256', c.serverKey).update(authMessage).digest('base64')}`;
  }
}

/** SCRAM-SHA-256 keys for a salted password (RFC 5802 §3): StoredKey = H(HMAC(SaltedPassword, "Client Key")). */
export function scramKeysFromSaltedPassword(salted: Buffer): { storedKey: Buffer; serverKey: Buffer } {
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  return {
    storedKey: createHash('sha256').update(clientKey).digest(),
    serverKey: createHmac('sha256', salted).update('Server Key').digest(),
  };
}
