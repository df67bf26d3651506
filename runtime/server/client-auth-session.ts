// One client connection's login: the SCRAM conversation in progress (if any) and the credential
// the connection logged in with. The connection hands it the authentication commands and the
// authentication fields of hello; it reports logins and refusals to its owner (stats, logs, the
// `user` request property).
import type { Document } from 'bson';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import { ScramRefusal, ScramState, type ScramCredential, type ScramServerConversation } from './client-auth-scram.ts';
import { SCRAM_SHA_256, failed, payloadBytes, refusalError, saslReply, type ClientAuth } from './client-auth.ts';

export interface LoginOwner {
  onLogin(c: ScramCredential): void;
  /** `user` as the client named it ('' when it never got that far); `reason` is for the log only. */
  onLoginFailed(user: string, reason: string): void;
}

export class ClientAuthSession {
  /** The credential this connection logged in with; null: not logged in. */
  credential: ScramCredential | null = null;
  private readonly owner: LoginOwner;
  private conversation: ScramServerConversation | null = null;
  /** The client asked to skip the empty final exchange (done: true with server-final). */
  private skipEmpty = false;

  constructor(owner: LoginOwner) {
    this.owner = owner;
  }

  /**
   * The authentication fields of a hello reply: saslSupportedMechs (for any name, so it tells
   * nothing about which users exist) and the first step of a speculativeAuthenticate. A
   * speculative start that cannot begin is left out of the reply, as mongod does; the driver then
   * runs saslStart and gets the error there.
   */
  helloFields(request: Document, auth: ClientAuth): Document | null {
    let out: Document | null = null;
    if (typeof request.saslSupportedMechs === 'string') out = { saslSupportedMechs: [SCRAM_SHA_256] };
    const spec = request.speculativeAuthenticate;
    if (typeof spec === 'object' && spec !== null && !Array.isArray(spec) && (spec as Document).saslStart !== undefined) {
      try {
        const reply = this.start(spec as Document, typeof (spec as Document).db === 'string' ? (spec as Document).db as string : 'admin', auth, true);
        (out ??= {}).speculativeAuthenticate = reply;
      } catch (err) {
        if (!(err instanceof ProxyError)) throw err;
      }
    }
    return out;
  }

  /** Answers saslStart, saslContinue, logout, authenticate, getnonce (auth on). Throws ProxyError. */
  command(op: string, cmd: Document, db: string, auth: ClientAuth): Document {
    switch (op) {
      case 'saslStart':
        return this.start(cmd, db, auth, false);
      case 'saslContinue':
        return this.continue(cmd, auth);
      case 'logout':
        this.conversation = null;
        this.credential = null;
        return { ok: 1 };
      case 'getnonce':
        throw new ProxyError(ErrorCodes.CommandNotFound, 'no such command: \'getnonce\' (MONGODB-CR is not supported; use SCRAM-SHA-256)');
      default: // authenticate: MONGODB-X509 and MONGODB-CR
        this.owner.onLoginFailed('', `mechanism ${String(cmd.mechanism ?? 'MONGODB-CR')} via authenticate`);
        throw new ProxyError(ErrorCodes.MechanismUnavailable,
          `Received authentication for mechanism ${String(cmd.mechanism ?? 'MONGODB-CR')} which is not enabled: the proxy accepts ${SCRAM_SHA_256} only`);
    }
  }

  /** A speculative start that fails is not reported: the driver follows with saslStart, which is. */
  private start(cmd: Document, db: string, auth: ClientAuth, speculative: boolean): Document {
    this.conversation = null;
    let conv: ScramServerConversation;
    try {
      conv = auth.start(cmd, db);
    } catch (err) {
      if (err instanceof ScramRefusal) {
        if (!speculative) this.owner.onLoginFailed('', err.message);
        throw refusalError(err);
      }
      if (err instanceof ProxyError && !speculative) this.owner.onLoginFailed('', err.message);
      throw err;
    }
    const options = cmd.options as Document | undefined;
    this.skipEmpty = typeof options === 'object' && options !== null && options.skipEmptyExchange === true;
    this.conversation = conv;
    return saslReply(false, conv.serverFirst);
  }

  private continue(cmd: Document, auth: ClientAuth): Document {
    const conv = this.conversation;
    if (conv === null) {
      this.owner.onLoginFailed('', 'saslContinue without a conversation');
      throw new ProxyError(ErrorCodes.AuthenticationFailed, 'Authentication failed. No SASL session state found (send saslStart first)');
    }
    if (Number(cmd.conversationId) !== 1) {
      this.conversation = null;
      this.owner.onLoginFailed(conv.user, `saslContinue for conversationId ${String(cmd.conversationId)}`);
      throw new ProxyError(ErrorCodes.AuthenticationFailed, `Authentication failed. Unknown conversationId ${String(cmd.conversationId)}`);
    }
    if (conv.state === ScramState.ServerFinalSent) {
      // The empty exchange of a client that did not ask to skip it (RFC 5802 §5: the server's last word).
      this.conversation = null;
      if (payloadBytes(cmd.payload).length !== 0) {
        this.owner.onLoginFailed(conv.user, 'non-empty final SCRAM message');
        throw failed();
      }
      return this.finish(conv, auth, '');
    }
    let serverFinal: string;
    try {
      serverFinal = conv.verify(payloadBytes(cmd.payload));
    } catch (err) {
      this.conversation = null;
      if (err instanceof ScramRefusal) {
        this.owner.onLoginFailed(conv.user, err.message);
        throw refusalError(err);
      }
      throw err;
    }
    if (!this.skipEmpty) return saslReply(false, serverFinal);
    this.conversation = null;
    return this.finish(conv, auth, serverFinal);
  }

  /** Logs the connection in, unless a reload removed or changed the user during the conversation. */
  private finish(conv: ScramServerConversation, auth: ClientAuth, serverFinal: string): Document {
    if (!auth.stillValid(conv.credential)) {
      this.owner.onLoginFailed(conv.user, 'the user was removed or changed by a reload during the conversation');
      throw failed();
    }
    this.credential = conv.credential;
    this.owner.onLogin(conv.credential);
    return saslReply(true, serverFinal);
  }
}
