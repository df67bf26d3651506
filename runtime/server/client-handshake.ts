// One client connection's handshake and who the client is: the proxy answers hello (as a mongos,
// handshake.ts builds the reply) and the authentication commands (SCRAM, client-auth*.ts) itself,
// and keeps what they settled — the client metadata, the compressors negotiated, load-balanced
// mode, the login. It is the connection's ConnectionInfo for plugins (id, appName, client address,
// user) and the LoginOwner its login reports to.
import { serialize, type Document } from 'bson';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import type { ConnectionInfo } from '../pipeline/index.ts';
import { emptyMetadata, helloReply, negotiateCompression, readClientMetadata, type ClientMetadata } from './handshake.ts';
import { OPEN_COMMANDS, type ClientAuth } from './client-auth.ts';
import { ClientAuthSession, type LoginOwner } from './client-auth-session.ts';
import type { ScramCredential } from './client-auth-scram.ts';
import type { CursorSeal } from './cursor-seal.ts';
import type { ServerContext } from './context.ts';

/** Who is told that a connection's identity (appName, user) changed. */
export interface IdentityOwner {
  identityChanged(): void;
}

export class ClientHandshake implements ConnectionInfo, LoginOwner {
  /** The connection's id (hello's connectionId). */
  readonly id: number;
  readonly clientAddress: string;
  /** Client application name from the first hello (without its `?params`). */
  appName = '';
  /** Identity: see `user`. */
  private userName = '';
  metadata: ClientMetadata = emptyMetadata();
  /** The client asked for per-request profiles (appName `?proxy_profile=true`). */
  wantsProfile = false;
  /** The first hello said loadBalanced: true (see load-balanced.ts). */
  loadBalanced = false;
  /** Compressor ids this client negotiated. */
  compressors: number[] = [];
  private negotiatedNames: ('snappy' | 'zlib' | 'zstd')[] = [];
  private helloSeen = false;
  /** Client authentication state, made at the first authentication command or hello field (auth on). */
  private login: ClientAuthSession | null = null;
  private readonly ctx: ServerContext;
  /** Told when the appName or the user changes (the connection settles its pipeline again). */
  private readonly owner: IdentityOwner | null;

  constructor(id: number, clientAddress: string, ctx: ServerContext, owner: IdentityOwner | null = null) {
    this.id = id;
    this.clientAddress = clientAddress;
    this.ctx = ctx;
    this.owner = owner;
  }

  /** Identity: the user this connection logged in as (config `auth`), or one an auth step set; '' when anonymous. */
  get user(): string {
    return this.userName;
  }

  set user(name: string) {
    if (name === this.userName) return;
    this.userName = name;
    this.owner?.identityChanged();
  }

  /** Reads a hello: the client metadata and, from the first hello only, compression and load-balanced mode. */
  readHello(request: Document): void {
    if (request.client !== undefined) {
      if (this.helloSeen && this.metadata.driver !== '') {
        throw new ProxyError(ErrorCodes.ClientMetadataCannotBeMutated, 'The client metadata document may only be sent in the first hello');
      }
      if (typeof request.client === 'object' && request.client !== null) {
        this.metadata = readClientMetadata(request.client as Document);
        this.appName = this.metadata.appName;
        this.owner?.identityChanged();
        this.wantsProfile = this.metadata.appParams.proxy_profile === 'true';
      }
    }
    if (!this.helloSeen) {
      this.helloSeen = true;
      if (request.loadBalanced === true) this.loadBalanced = true;
      const neg = negotiateCompression(request.compression, this.ctx.compression);
      this.compressors = neg.ids;
      this.negotiatedNames = neg.names;
    }
  }

  /** The reply to the hello `request` (command `op`) that readHello read. */
  helloReply(op: string, request: Document): Uint8Array {
    const auth = this.ctx.clientAuth;
    const authFields = auth === null ? null : (this.login ??= new ClientAuthSession(this)).helloFields(request, auth);
    return helloReply(op, request, this.ctx.upstreamInfo(), this.id, this.negotiatedNames,
      this.loadBalanced ? this.ctx.serviceId : null, authFields);
  }

  // ---- client authentication (config `auth`; client-auth*.ts) -----------------------------------

  private get loggedIn(): boolean {
    return this.login !== null && this.login.credential !== null;
  }

  /** The reply to saslStart, saslContinue, logout, authenticate, getnonce: answered here, never forwarded upstream. */
  authReply(op: string, cmd: Document, db: string): Uint8Array {
    const auth = this.ctx.clientAuth;
    if (auth === null) {
      throw new ProxyError(ErrorCodes.AuthenticationFailed,
        `client authentication is not enabled on this proxy (no \`auth\` in its configuration), so ${op} cannot succeed; connect without ` +
          `credentials (the proxy authenticates to the upstream with its own)`);
    }
    const reply = (this.login ??= new ClientAuthSession(this)).command(op, cmd, db, auth);
    if (op === 'logout') this.user = '';
    return serialize(reply);
  }

  /**
   * The seal of the cursor ids this connection sees (cursor-seal.ts): its login's, or the
   * anonymous one when it has none; null when client authentication is off (ids pass unchanged).
   */
  get cursorSeal(): CursorSeal | null {
    const auth = this.ctx.clientAuth;
    if (auth === null) return null;
    const login = this.login;
    return auth.cursorSeal(login === null ? null : login.credential);
  }

  /** With auth.mode required, an unauthenticated connection runs only the commands a login needs (as mongod: 13 Unauthorized). */
  authorize(op: string): void {
    const auth = this.ctx.clientAuth;
    if (auth !== null && auth.required && !this.loggedIn && !OPEN_COMMANDS.has(op)) {
      throw new ProxyError(ErrorCodes.Unauthorized, `Command ${op} requires authentication`);
    }
  }

  onLogin(c: ScramCredential): void {
    this.user = c.name;
    this.ctx.stats.authSucceeded++;
    this.ctx.log.debug('client logged in', { conn: this.id, client: this.clientAddress, user: c.name, db: c.db });
  }

  onLoginFailed(user: string, reason: string): void {
    this.ctx.stats.authFailed++;
    const suppressed = this.ctx.inputLogThrottle.take();
    if (suppressed < 0) return;
    const fields: Record<string, unknown> = { conn: this.id, client: this.clientAddress, user, reason };
    if (suppressed > 0) fields.suppressed = suppressed;
    this.ctx.log.warn('client authentication failed', fields);
  }

  /** Reload: drops this connection's login unless `next` still has its user with the same keys. True when dropped. */
  revalidateLogin(next: ClientAuth | null): boolean {
    const login = this.login;
    if (login === null || login.credential === null) return false;
    if (next !== null && next.stillValid(login.credential)) return false;
    login.credential = null;
    this.user = '';
    return true;
  }
}
