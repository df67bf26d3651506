// A host emulator for plugin tests (like proxy-wasm-go-sdk's proxytest): load one plugin .wasm
// with a config, push commands (JS objects, encoded with `bson`) through the request and response
// phases of the real executor, and observe verdicts, replaced documents, logs, metrics, kv and
// sub-operations. No proxy, no sockets.
import { serialize, deserialize, type Document } from 'bson';
import { PipelineManager, Exchange, Verdict, type Pipeline, type StepSettings, type ConnectionInfo, type StepRecorder, type DocSequence,
  callbackRecorder } from '../../runtime/pipeline/index.ts';
import type { KvStore, HostLog } from '../../runtime/wasm/index.ts';
import type { LogLevel } from '../../runtime/log/levels.ts';

export interface LogLine { level: string; msg: string; fields: Record<string, unknown> }
export interface StepRecord { step: string; phase: 0 | 1; durationNs: number; error: boolean }
export interface SubopRecord { step: string; phase: 0 | 1; name: string; durationNs: number }

export interface HarnessOptions extends Partial<StepSettings> {
  /** Step name (default: the file name without .wasm). */
  name?: string;
  /** Record step timings and sub-operations (default true). */
  record?: boolean;
  pipelineId?: string;
  /**
   * The lowest level the harness's logger says it writes (what plugins read as Property.LogLevel,
   * `log.enabled`; default: every level). Lines are recorded in `logs` whatever their level, so a
   * test sees what a plugin sends.
   */
  logLevel?: LogLevel;
}

export interface CallOptions {
  op?: string; db?: string; collection?: string;
  conn?: Partial<ConnectionInfo>;
  sequences?: { id: string; docs: Document[] }[];
  requestId?: number;
}

export interface Outcome {
  readonly exchange: Exchange;
  readonly verdict: Verdict;
  readonly reject: { code: number; codeName: string; message: string } | null;
  /** Decoded replacement command, if a step replaced it. */
  readonly newRequest: Document | null;
  readonly localReply: Document | null;
  readonly newReply: Document | null;
  readonly route: string | null;
}

export class PluginHarness {
  readonly name: string;
  readonly logs: LogLine[] = [];
  readonly records: StepRecord[] = [];
  readonly subops: SubopRecord[] = [];
  readonly manager: PipelineManager;
  pipeline!: Pipeline;
  private readonly pipelineId: string;
  private nextRequestId = 1;

  private constructor(name: string, pipelineId: string, record: boolean, logLevel: HarnessOptions['logLevel']) {
    this.name = name;
    this.pipelineId = pipelineId;
    const logs = this.logs;
    const line = (level: string) => (msg: string, fields?: Record<string, unknown>) => { logs.push({ level, msg, fields: fields ?? {} }); };
    // Structured records (proxy_log_fields) arrive as JSON members: kept as one JSON object text in
    // `msg` (what the proxy's json log format would write) and parsed in `fields`.
    const structured = (level: string, prefix: string, members: Uint8Array) => {
      const msg = `{${prefix}${new TextDecoder().decode(members)}}`;
      logs.push({ level, msg, fields: JSON.parse(msg) as Record<string, unknown> });
    };
    const logger: HostLog = { trace: line('trace'), debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error'), record: structured,
      ...(logLevel === undefined ? {} : { level: logLevel }) };
    const recorder: StepRecorder = callbackRecorder(record,
      (_p, step, phase, durationNs, error) => { this.records.push({ step, phase, durationNs, error }); },
      (_p, step, phase, name, durationNs) => { this.subops.push({ step, phase, name, durationNs }); });
    this.manager = new PipelineManager({ recorder, logger });
  }

  /** Loads `wasmPath` as the only step of both phases. Rejects when the plugin refuses its config. */
  static async load(wasmPath: string, opts: HarnessOptions = {}): Promise<PluginHarness> {
    const name = opts.name ?? wasmPath.replace(/^.*\//, '').replace(/\.wasm$/, '');
    const h = new PluginHarness(name, opts.pipelineId ?? 'default', opts.record ?? true, opts.logLevel);
    await h.reload(wasmPath, opts);
    return h;
  }

  /** Loads a new version/config; on failure the previous one stays. */
  async reload(wasmPath: string, opts: HarnessOptions = {}): Promise<void> {
    const settings: StepSettings = {
      module: wasmPath,
      config: opts.config ?? {},
      max_memory_pages: opts.max_memory_pages ?? 64,
      ...(opts.on_error !== undefined ? { on_error: opts.on_error } : {}),
      ...(opts.fuel !== undefined ? { fuel: opts.fuel } : {}),
      ...(opts.kv_max_bytes !== undefined ? { kv_max_bytes: opts.kv_max_bytes } : {}),
    };
    this.pipeline = await this.manager.load({
      pipeline: { id: this.pipelineId, request: [this.name], response: [this.name] },
      steps: { [this.name]: settings },
    });
  }

  /** The plugin's key/value store (shared with the running instance; a reload with a changed config starts a new one, as in the proxy). */
  get kv(): KvStore { return this.pipeline.steps.get(this.name)!.slot.kv; }

  /** Prometheus text of this harness's plugin host: plugin metrics, step errors, rebuilds. */
  metrics(): Promise<string> { return this.manager.host.registry.metrics(); }

  /** Runs the request phase over `command`. */
  request(command: Document, opts: CallOptions = {}): Outcome {
    const ex = makeExchange(command, this.pipelineId, opts, this.nextRequestId++);
    this.manager.get(this.pipelineId).runRequest(ex);
    return outcome(ex);
  }

  /** Runs the response phase of `ex` (from request()) with `reply` as the upstream reply. */
  response(ex: Exchange, reply: Document | null): Outcome {
    ex.replyBody = reply === null ? null : serialize(reply);
    this.manager.get(this.pipelineId).runResponse(ex);
    return outcome(ex);
  }

  /** request() then, unless rejected, response() with `reply` (or the local reply). */
  roundTrip(command: Document, reply: Document, opts: CallOptions = {}): Outcome {
    const r = this.request(command, opts);
    if (r.verdict === Verdict.Reject) return r;
    return this.response(r.exchange, r.verdict === Verdict.LocalReply ? null : reply);
  }
}

export function makeExchange(command: Document, pipelineId: string, opts: CallOptions = {}, requestId = 1): Exchange {
  const op = opts.op ?? Object.keys(command)[0] ?? '';
  const first = command[op];
  const conn: ConnectionInfo = { id: opts.conn?.id ?? 1, appName: opts.conn?.appName ?? 'harness',
    clientAddress: opts.conn?.clientAddress ?? '127.0.0.1:50000', user: opts.conn?.user ?? '' };
  const seqs: DocSequence[] | null = opts.sequences === undefined ? null
    : opts.sequences.map((s) => ({ id: s.id, payload: Buffer.concat(s.docs.map((d) => serialize(d))) }));
  const ex = new Exchange(conn, pipelineId, op, opts.db ?? String(command.$db ?? 'test'),
    opts.collection ?? (typeof first === 'string' ? first : ''), serialize(command), seqs);
  ex.requestId = opts.requestId ?? requestId;
  return ex;
}

function decode(b: Uint8Array | null): Document | null {
  return b === null ? null : deserialize(b);
}

function outcome(ex: Exchange): Outcome {
  return {
    exchange: ex,
    verdict: ex.verdict,
    reject: ex.verdict === Verdict.Reject ? { code: ex.rejectCode, codeName: ex.rejectCodeName, message: ex.rejectMessage } : null,
    newRequest: decode(ex.newRequest),
    localReply: decode(ex.localReply),
    newReply: decode(ex.newReply),
    route: ex.route,
  };
}

export { Verdict };
