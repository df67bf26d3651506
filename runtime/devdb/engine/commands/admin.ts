// Handshake, diagnostics and server-information commands. devdb answers as a
// standalone mongod 7.0.
import { hostname } from 'node:os';
import { Long, type Document } from 'bson';
import type { Ctx, Handler } from '../context.ts';
import { fail } from '../errors.ts';

export const DEVDB_VERSION = '7.0.0-devdb';
const MAX_WIRE_VERSION = 21;

function handshake(ctx: Ctx, legacy: boolean, cmd: Document): Document {
  const reply: Document = {};
  if (cmd.helloOk === true) reply.helloOk = true;
  if (legacy) reply.ismaster = true;
  else reply.isWritablePrimary = true;
  Object.assign(reply, {
    topologyVersion: undefined,
    maxBsonObjectSize: 16777216,
    maxMessageSizeBytes: 48000000,
    maxWriteBatchSize: 100000,
    localTime: new Date(ctx.now()),
    logicalSessionTimeoutMinutes: 30,
    connectionId: ctx.connectionId,
    minWireVersion: 0,
    maxWireVersion: MAX_WIRE_VERSION,
    readOnly: false,
    ok: 1,
  });
  delete reply.topologyVersion;
  return reply;
}

const hello: Handler = (cmd, ctx) => handshake(ctx, false, cmd);
const isMaster: Handler = (cmd, ctx) => handshake(ctx, true, cmd);

const buildInfo: Handler = () => ({
  version: DEVDB_VERSION,
  gitVersion: 'devdb',
  versionArray: [7, 0, 0, 0],
  bits: 64,
  debug: false,
  maxBsonObjectSize: 16777216,
  storageEngines: ['devdb-memory'],
  javascriptEngine: 'none',
  modules: [],
  openssl: { running: 'disabled' },
  buildEnvironment: {},
  devdb: true,
  note: 'pipeline-proxy devdb: an in-memory development upstream, not a MongoDB server (no durability, no isolation, single node)',
  ok: 1,
});

const PARAMS: Record<string, unknown> = {
  featureCompatibilityVersion: { version: '7.0' },
  authenticationMechanisms: [],
  logLevel: 0,
  maxBSONDepth: 100,
  transactionLifetimeLimitSeconds: 60,
};

const getParameter: Handler = (cmd) => {
  const reply: Document = {};
  if (cmd.getParameter === '*' || (typeof cmd.getParameter === 'object' && cmd.getParameter !== null && (cmd.getParameter as Document).allParameters)) {
    Object.assign(reply, PARAMS);
  } else {
    for (const k of Object.keys(cmd)) {
      if (k === 'getParameter' || k.startsWith('$') || k === 'lsid' || k === 'comment') continue;
      if (!(k in PARAMS)) fail('InvalidOptions', `no option found to get`);
      reply[k] = PARAMS[k];
    }
    if (Object.keys(reply).length === 0) fail('InvalidOptions', 'no option found to get');
  }
  reply.ok = 1;
  return reply;
};

const hostInfo: Handler = (_cmd, ctx) => ({
  system: { currentTime: new Date(ctx.now()), hostname: hostname(), cpuAddrSize: 64, numCores: 1, cpuArch: process.arch },
  os: { type: process.platform, name: 'devdb', version: process.version },
  extra: { note: 'devdb development upstream' },
  ok: 1,
});

const whatsmyuri: Handler = (_cmd, ctx) => ({ you: `devdb-connection:${ctx.connectionId}`, ok: 1 });

const getLog: Handler = (cmd) => {
  if (cmd.getLog === '*') return { names: ['global', 'startupWarnings'], ok: 1 };
  if (cmd.getLog === 'global' || cmd.getLog === 'startupWarnings') return { totalLinesWritten: 0, log: [], ok: 1 };
  fail('InvalidOptions', `No log named '${String(cmd.getLog)}'`);
};

const connectionStatus: Handler = () => ({
  authInfo: { authenticatedUsers: [], authenticatedUserRoles: [] },
  ok: 1,
});

const serverStatus: Handler = (_cmd, ctx) => {
  const uptimeMillis = ctx.now() - ctx.startedAt;
  return {
    host: hostname(),
    version: DEVDB_VERSION,
    process: 'devdb',
    pid: Long.fromNumber(process.pid),
    uptime: Math.floor(uptimeMillis / 1000),
    uptimeMillis: Long.fromNumber(uptimeMillis),
    uptimeEstimate: Long.fromNumber(Math.floor(uptimeMillis / 1000)),
    localTime: new Date(ctx.now()),
    metrics: { cursor: { open: { total: Long.fromNumber(ctx.cursors.size) } } },
    ok: 1,
  };
};

const ping: Handler = () => ({ ok: 1 });

export const adminCommands: Record<string, Handler> = {
  hello,
  isMaster,
  ismaster: isMaster,
  ping,
  buildInfo,
  buildinfo: buildInfo,
  getParameter,
  hostInfo,
  whatsmyuri,
  getLog,
  connectionStatus,
  serverStatus,
};
