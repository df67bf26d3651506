// The proxy answers hello / isMaster / ismaster itself, as a mongos (`msg: "isdbgrid"`), so
// drivers treat it as a router and never learn (or bypass to) the upstream topology.
// Spec: github.com/mongodb/specifications source/mongodb-handshake/handshake.md.
import { calculateObjectSize, serialize, type Document, type ObjectId } from 'bson';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import { COMPRESSOR_IDS, type CompressorName } from '../wire/index.ts';
import type { UpstreamInfo } from '../upstream/index.ts';

export const HELLO_COMMANDS: ReadonlySet<string> = new Set(['hello', 'isMaster', 'ismaster']);

/** The current Node driver refuses servers whose maxWireVersion is below this. */
export const MIN_DRIVER_WIRE_VERSION = 9;
/** What we advertise before the upstream has told us its own (MongoDB 7.0). */
export const DEFAULT_WIRE_VERSION = 21;

export interface ClientMetadata {
  appName: string;
  /** Query parameters carried inside appName, e.g. `app?proxy_profile=true`. */
  appParams: Record<string, string>;
  driver: string;
  platform: string;
  os: string;
}

export function emptyMetadata(): ClientMetadata {
  return { appName: '', appParams: {}, driver: '', platform: '', os: '' };
}

/** Splits `name?k=v&k2=v2` into the name and its parameters. */
export function parseAppName(raw: string): { appName: string; appParams: Record<string, string> } {
  const q = raw.indexOf('?');
  if (q < 0) return { appName: raw, appParams: {} };
  const appParams: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(raw.slice(q + 1))) appParams[k] = v;
  return { appName: raw.slice(0, q), appParams };
}

/** The largest client metadata document a mongos accepts in a hello, in bytes (mongod: 1,024). */
export const MAX_CLIENT_METADATA_BYTES = 512;
/** The longest `application.name` accepted, in bytes (UTF-8). */
export const MAX_APP_NAME_BYTES = 128;

/**
 * A hello's client metadata, refused as a mongos refuses it when larger than it allows: the
 * connection keeps its metadata for its life, so a client cannot make it hold more than that.
 */
export function readClientMetadata(client: Document): ClientMetadata {
  const size = calculateObjectSize(client);
  if (size > MAX_CLIENT_METADATA_BYTES) {
    throw new ProxyError(ErrorCodes.ClientMetadataDocumentTooLarge,
      `The client metadata document must be less than or equal to ${MAX_CLIENT_METADATA_BYTES} bytes (this one is ${size})`);
  }
  const app = client.application as Document | undefined;
  const rawName = typeof app?.name === 'string' ? app.name : '';
  if (Buffer.byteLength(rawName) > MAX_APP_NAME_BYTES) {
    throw new ProxyError(ErrorCodes.ClientMetadataAppNameTooLarge,
      `The 'application.name' field must be less than or equal to ${MAX_APP_NAME_BYTES} bytes in the client metadata document`);
  }
  const { appName, appParams } = parseAppName(rawName);
  const driver = client.driver as Document | undefined;
  const os = client.os as Document | undefined;
  return {
    appName,
    appParams,
    driver: driver ? `${driver.name ?? ''} ${driver.version ?? ''}`.trim() : '',
    platform: typeof client.platform === 'string' ? client.platform : '',
    os: os ? String(os.type ?? '') : '',
  };
}

/** Compressor ids both sides support, in the client's order of preference. */
export function negotiateCompression(clientList: unknown, offered: readonly CompressorName[]): { names: CompressorName[]; ids: number[] } {
  const names: CompressorName[] = [];
  const ids: number[] = [];
  if (!Array.isArray(clientList)) return { names, ids };
  for (const c of clientList) {
    if (typeof c === 'string' && (offered as readonly string[]).includes(c) && !names.includes(c as CompressorName)) {
      names.push(c as CompressorName);
      ids.push(COMPRESSOR_IDS[c as CompressorName]);
    }
  }
  return { names, ids };
}

/** `auth`: the authentication fields of the reply (saslSupportedMechs, speculativeAuthenticate), or null. */
export function helloReply(
  command: string, request: Document, info: UpstreamInfo | null, connectionId: number, compression: readonly CompressorName[],
  serviceId: ObjectId | null = null,
  auth: Document | null = null,
): Uint8Array {
  const upstreamMax = info?.maxWireVersion ?? DEFAULT_WIRE_VERSION;
  const reply: Document = {};
  if (request.helloOk === true) reply.helloOk = true;
  if (command === 'hello') reply.isWritablePrimary = true;
  else reply.ismaster = true;
  reply.msg = 'isdbgrid';
  reply.maxBsonObjectSize = info?.maxBsonObjectSize ?? 16777216;
  reply.maxMessageSizeBytes = info?.maxMessageSizeBytes ?? 48000000;
  reply.maxWriteBatchSize = info?.maxWriteBatchSize ?? 100000;
  reply.localTime = new Date();
  reply.logicalSessionTimeoutMinutes = info?.logicalSessionTimeoutMinutes ?? 30;
  reply.connectionId = connectionId;
  reply.minWireVersion = 0;
  reply.maxWireVersion = Math.max(upstreamMax, MIN_DRIVER_WIRE_VERSION);
  reply.readOnly = false;
  if (compression.length > 0) reply.compression = compression.slice();
  // Load-balanced clients (hello with loadBalanced: true) require a serviceId, as a mongos behind a
  // load balancer sends: one per proxy process, since every connection reaches the same upstream.
  if (serviceId !== null) reply.serviceId = serviceId;
  if (auth !== null) Object.assign(reply, auth);
  reply.ok = 1;
  return serialize(reply);
}
