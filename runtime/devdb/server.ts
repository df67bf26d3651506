// The development upstream's wire-protocol server: OP_MSG (and the legacy OP_QUERY handshake) over
// TCP, compression included, answering from the in-memory DevEngine. This is a development
// upstream for demos, tests and benchmarks — not a database: no durability, no isolation, one node.
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { deserialize, serialize, type Document } from 'bson';
import {
  Framer, type FrameSink, WireError, parseOpMsg, parseOpQuery, encodeOpMsg, encodeOpReply, decompressFrame,
  compressFrame, initCompression, OP_MSG, OP_QUERY, OP_COMPRESSED, MSG_MORE_TO_COME, UNCOMPRESSIBLE_COMMANDS,
  COMPRESSOR_IDS, REPLY_QUERY_FAILURE, type CompressorName,
} from '../wire/index.ts';
import { formatHostPort } from '../config/index.ts';
import { DevEngine } from './engine/index.ts';
import { DevAuth, OPEN_COMMANDS, type DevAuthSession } from './auth.ts';

const OFFERED: CompressorName[] = ['snappy', 'zlib', 'zstd'];

let nextId = 1;

class DevConnection implements FrameSink {
  private readonly socket: Socket;
  private readonly engine: DevEngine;
  private readonly connId: number;
  private compressors: number[] = [];
  /** null when the server runs without users (no authentication). */
  private readonly auth: DevAuthSession | null;
  private readonly member: DevMember | null;

  constructor(socket: Socket, engine: DevEngine, connId: number, auth: DevAuth, member: DevMember | null) {
    this.socket = socket;
    this.engine = engine;
    this.connId = connId;
    this.member = member;
    this.auth = auth.enabled ? auth.session() : null;
    const framer = new Framer(this);
    socket.setNoDelay(true);
    socket.on('data', (c: Buffer) => framer.push(c));
    socket.on('error', () => socket.destroy());
  }

  onFrameError(err: WireError, requestId: number): void {
    this.socket.end(encodeOpMsg(nextId++, requestId, 0, serialize({ ok: 0, errmsg: err.message, code: 17, codeName: 'ProtocolError' })));
  }

  onFrame(frame: Buffer): void {
    if (this.socket.destroyed) return; // frames that followed one we closed the connection on
    if (this.member?.silent === true) return;
    let f = frame;
    let compressor = -1;
    const requestId = f.readInt32LE(4);
    // Whether the client expects no reply. Read from the flag bits directly (offset 16) so that it
    // is known even when parseOpMsg throws; for OP_COMPRESSED, from the frame inside once decompressed.
    let moreToCome = opMsgMoreToCome(f);
    try {
      if (f.readInt32LE(12) === OP_COMPRESSED) {
        const d = decompressFrame(f);
        f = d.frame;
        compressor = d.compressorId;
        moreToCome = opMsgMoreToCome(f);
      }
      const op = f.readInt32LE(12);
      if (op === OP_QUERY) {
        const q = parseOpQuery(f);
        let cmd = deserialize(q.query) as Document;
        if (cmd.$query !== undefined) cmd = cmd.$query as Document;
        cmd.$db = q.db;
        const reply = this.run(cmd, undefined);
        this.socket.write(encodeOpReply(nextId++, requestId, reply.ok === 1 ? 0 : REPLY_QUERY_FAILURE, [serialize(reply)]));
        return;
      }
      if (op !== OP_MSG) {
        this.socket.write(encodeOpMsg(nextId++, requestId, 0, serialize({ ok: 0, errmsg: `unsupported opcode ${op}`, code: 352,
          codeName: 'UnsupportedOpQueryCommand' })));
        return;
      }
      const msg = parseOpMsg(f);
      const cmd = deserialize(msg.body) as Document;
      let sequences: Record<string, Document[]> | undefined;
      if (msg.sequences !== null) {
        sequences = {};
        for (const s of msg.sequences) sequences[s.id] = readDocs(s.payload);
      }
      const reply = databaseRefusal(cmd.$db) ?? this.run(cmd, sequences);
      if (moreToCome) return;
      let out = encodeOpMsg(nextId++, requestId, 0, serialize(reply));
      const name = Object.keys(cmd)[0] ?? '';
      if (compressor > 0 && !UNCOMPRESSIBLE_COMMANDS.has(name)) out = compressFrame(out, compressor);
      this.socket.write(out);
    } catch (err) {
      // A moreToCome request never gets a reply, not even an error: an unsolicited frame would
      // desynchronise the client's connection (the proxy pools its upstream connections). As
      // mongod does with a moreToCome message it cannot process, close the connection instead.
      if (moreToCome) {
        this.socket.destroy();
        return;
      }
      const message = err instanceof Error ? err.message : String(err);
      this.socket.write(encodeOpMsg(nextId++, requestId, 0, serialize({ ok: 0, errmsg: message, code: err instanceof WireError ? 17 : 22,
        codeName: err instanceof WireError ? 'ProtocolError' : 'InvalidBSON' })));
    }
  }

  private run(cmd: Document, sequences: Record<string, Document[]> | undefined): Document {
    const name = Object.keys(cmd)[0] ?? '';
    const auth = this.auth;
    if (auth !== null) {
      if (name === 'saslStart') return auth.saslStart(cmd);
      if (name === 'saslContinue') return auth.saslContinue(cmd);
      if (name === 'logout') {
        // As in mongod: the connection's login ends; later commands need a new one.
        auth.logout();
        return { ok: 1 };
      }
      if (auth.user === null && !OPEN_COMMANDS.has(name)) {
        return { ok: 0, errmsg: `command ${name} requires authentication`, code: 13, codeName: 'Unauthorized' };
      }
    }
    const member = this.member;
    if (member !== null) {
      const refused = member.before(name, cmd);
      if (refused !== null) return refused;
    }
    const reply = this.engine.run(cmd, sequences, this.connId);
    if (member !== null) member.after(name, cmd, reply);
    if ((name === 'hello' || name === 'isMaster' || name === 'ismaster') && reply.ok === 1 && Array.isArray(cmd.compression)) {
      const names = (cmd.compression as unknown[]).filter((c): c is CompressorName => typeof c === 'string' && (OFFERED as string[]).includes(c));
      this.compressors = names.map((n) => COMPRESSOR_IDS[n]);
      if (names.length > 0) reply.compression = names;
    }
    return reply;
  }
}

/**
 * mongod's answer to an OP_MSG command whose `$db` is absent, not a string, or empty (every OP_MSG
 * command names its database; only the legacy OP_QUERY carries it in the namespace), else null.
 */
function databaseRefusal(db: unknown): Document | null {
  if (db === undefined) return { ok: 0, errmsg: 'OP_MSG requests require a $db argument', code: 40571, codeName: 'Location40571' };
  if (typeof db !== 'string') return { ok: 0, errmsg: `BSON field '$db' is the wrong type, expected type 'string'`, code: 14, codeName: 'TypeMismatch' };
  if (db === '') return { ok: 0, errmsg: `Invalid database name: ''`, code: 73, codeName: 'InvalidNamespace' };
  return null;
}

/** True when `f` is an OP_MSG long enough to hold flag bits and has moreToCome set. */
function opMsgMoreToCome(f: Buffer): boolean {
  return f.length >= 20 && f.readInt32LE(12) === OP_MSG && (f.readUInt32LE(16) & MSG_MORE_TO_COME) !== 0;
}

function readDocs(payload: Buffer): Document[] {
  const out: Document[] = [];
  let off = 0;
  while (off < payload.length) {
    const n = payload.readInt32LE(off);
    out.push(deserialize(payload.subarray(off, off + n)));
    off += n;
  }
  return out;
}

/**
 * A role the server plays besides the engine's standalone one (a replica-set member, a mongos; see
 * replica-set.ts): it sees every command first (and may answer it instead of the engine) and every
 * reply after (hello replies get its topology fields there).
 */
export interface DevMember {
  /** A network partition seen from outside: every frame is dropped unanswered, connections stay open. */
  readonly silent?: boolean;
  before(name: string, cmd: Document): Document | null;
  after(name: string, cmd: Document, reply: Document): void;
}

export interface DevDbOptions {
  /** A replica-set member's or a mongos's behaviour (replica-set.ts). */
  member?: DevMember;
  /** SCRAM-SHA-256 users (name → password). Empty: no authentication, as a default mongod. */
  users?: Record<string, string>;
  /** The database `users` are defined in (the authSource clients must use); default "admin". */
  authDb?: string;
  /** Listen with TLS (PEM certificate and key; `ca` + `requestCert` to ask clients for certificates). */
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer; requestCert?: boolean };
}

export class DevDbServer {
  readonly engine: DevEngine;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly auth: DevAuth;
  private readonly member: DevMember | null;

  constructor(engine = new DevEngine(), opts: DevDbOptions = {}) {
    this.engine = engine;
    this.auth = new DevAuth(opts.users ?? {}, opts.authDb);
    this.member = opts.member ?? null;
    const accept = (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      new DevConnection(socket, this.engine, nextId++, this.auth, this.member);
    };
    const t = opts.tls;
    this.server = t === undefined ? createServer(accept)
      : createTlsServer({ cert: t.cert, key: t.key, ca: t.ca, requestCert: t.requestCert ?? false, rejectUnauthorized: t.requestCert ?? false }, accept);
    // A failed TLS handshake is the client's problem, not the server's.
    this.server.on('tlsClientError', () => {});
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<{ host: string; port: number; uri: string }> {
    await initCompression();
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve());
    });
    const a = this.server.address();
    const p = typeof a === 'object' && a !== null ? a.port : port;
    return { host, port: p, uri: `mongodb://${formatHostPort(host, p)}` };
  }

  /** Drops every client connection (used by fault tests to simulate an upstream crash). */
  dropConnections(): void {
    for (const s of this.sockets) s.destroy();
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.dropConnections();
    });
  }
}
