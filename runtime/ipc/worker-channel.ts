// The one channel between the primary and its workers (node:cluster IPC, `serialization:
// 'advanced'`): requests with ids, answered or failed within a timeout, and a broadcast that waits
// for every worker. Never on the request path: workers hold their graphs and weights locally; the
// primary asks for their statistics at scrape time and tells them about reloads and shutdowns.
// runtime/ipc/ holds what both app/ (which builds a proxy) and cluster/ (which forks workers
// running it) use — this channel and the canary's fan-out over it — so app/ never imports cluster/.
import type { Worker } from 'node:cluster';

/** A request from the primary to a worker. */
export interface IpcRequest { kind: 'proxy:req'; id: number; op: string; body?: unknown }
/** A worker's answer to one request. */
export interface IpcReply { kind: 'proxy:res'; id: number; ok: boolean; body?: unknown; error?: IpcErrorBody }
/** Something a worker says unasked (ready, failed to start, a cursor pinned). */
export interface IpcEvent { kind: 'proxy:evt'; op: string; body?: unknown }
/** A question a worker asks the primary (where another worker's cursor lives), and its answer. */
export interface IpcAsk { kind: 'proxy:ask'; id: number; op: string; body?: unknown }
export interface IpcAnswer { kind: 'proxy:ans'; id: number; ok: boolean; body?: unknown; error?: IpcErrorBody }

export interface IpcErrorBody { name: string; message: string }

/** A worker failed (or did not answer) a request; `worker` is its index. */
export class WorkerRequestError extends Error {
  readonly worker: number;
  readonly op: string;
  constructor(worker: number, op: string, message: string) {
    super(`worker ${worker}: ${op}: ${message}`);
    this.name = 'WorkerRequestError';
    this.worker = worker;
    this.op = op;
  }
}

function isMessage(m: unknown, kind: string): boolean {
  return typeof m === 'object' && m !== null && (m as { kind?: unknown }).kind === kind;
}

/** The primary's end of one worker's channel. */
export class WorkerChannel {
  readonly index: number;
  readonly worker: Worker;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout; op: string }>();
  private readonly events = new Map<string, (body: unknown) => void>();
  private readonly questions = new Map<string, (body: unknown) => Promise<unknown>>();

  constructor(index: number, worker: Worker) {
    this.index = index;
    this.worker = worker;
    worker.on('message', (m: unknown) => {
      if (isMessage(m, 'proxy:res')) this.settle(m as IpcReply);
      else if (isMessage(m, 'proxy:evt')) this.events.get((m as IpcEvent).op)?.((m as IpcEvent).body);
      else if (isMessage(m, 'proxy:ask')) this.answer(m as IpcAsk);
    });
    // A worker that exits fails what it was asked.
    worker.on('exit', () => {
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        this.pending.delete(id);
        p.reject(new WorkerRequestError(this.index, p.op, 'the worker exited'));
      }
    });
  }

  /** Calls `fn` with the body of each event `op` the worker sends. */
  on(op: string, fn: (body: unknown) => void): void {
    this.events.set(op, fn);
  }

  /** Answers the worker's questions `op` with `fn`. */
  handle(op: string, fn: (body: unknown) => Promise<unknown>): void {
    this.questions.set(op, fn);
  }

  private answer(q: IpcAsk): void {
    const fn = this.questions.get(q.op);
    const send = (a: Omit<IpcAnswer, 'kind' | 'id'>) => {
      if (this.worker.isConnected()) this.worker.send({ kind: 'proxy:ans', id: q.id, ...a } satisfies IpcAnswer);
    };
    if (fn === undefined) {
      send({ ok: false, error: { name: 'Error', message: `unknown question "${q.op}"` } });
      return;
    }
    fn(q.body).then((body) => send({ ok: true, body }), (err: Error) => send({ ok: false, error: { name: err.name, message: err.message } }));
  }

  /** Asks the worker; rejects with a WorkerRequestError when it fails, exits or does not answer within `timeoutMs`. */
  request<T = unknown>(op: string, body: unknown, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (!this.worker.isConnected()) {
        reject(new WorkerRequestError(this.index, op, 'the worker is not connected'));
        return;
      }
      const id = this.nextId++;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new WorkerRequestError(this.index, op, `no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer, op });
      const msg: IpcRequest = { kind: 'proxy:req', id, op, body };
      this.worker.send(msg, (err: Error | null) => {
        if (err === null) return;
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new WorkerRequestError(this.index, op, err.message));
      });
    });
  }

  private settle(r: IpcReply): void {
    const p = this.pending.get(r.id);
    if (p === undefined) return; // answered after its timeout
    clearTimeout(p.timer);
    this.pending.delete(r.id);
    if (r.ok) p.resolve(r.body);
    else p.reject(new WorkerRequestError(this.index, p.op, r.error?.message ?? 'failed'));
  }
}

/**
 * Asks every channel and waits for all: the answers in channel order, or the first failure (after
 * every request has settled, so none is left running unobserved).
 */
export async function broadcast<T = unknown>(channels: readonly WorkerChannel[], op: string, body: unknown, timeoutMs: number): Promise<T[]> {
  const settled = await Promise.allSettled(channels.map((c) => c.request<T>(op, body, timeoutMs)));
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

/** The worker's end: answers the primary's requests with `handlers` (an unknown op fails). */
export function serveRequests(handlers: Readonly<Record<string, (body: unknown) => Promise<unknown> | unknown>>): void {
  process.on('message', (m: unknown) => {
    if (!isMessage(m, 'proxy:req')) return;
    const req = m as IpcRequest;
    const handler = handlers[req.op];
    const answer = (r: Omit<IpcReply, 'kind' | 'id'>) => {
      if (!process.connected) return;
      try {
        process.send!({ kind: 'proxy:res', id: req.id, ...r } satisfies IpcReply);
      } catch (err) {
        process.send!({ kind: 'proxy:res', id: req.id, ok: false, error: { name: 'Error', message: `answer not sendable: ${(err as Error).message}` } });
      }
    };
    if (handler === undefined) {
      answer({ ok: false, error: { name: 'Error', message: `unknown request "${req.op}"` } });
      return;
    }
    Promise.resolve().then(() => handler(req.body)).then(
      (body) => answer({ ok: true, body }),
      (err: Error) => answer({ ok: false, error: { name: err.name, message: err.message } }),
    );
  });
}

const asked = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
let nextAsk = 1;
let listening = false;

/** The worker asks the primary; rejects when it does not answer within `timeoutMs` or is gone. */
export function askPrimary<T = unknown>(op: string, body: unknown, timeoutMs: number): Promise<T> {
  if (!listening) {
    listening = true;
    process.on('message', (m: unknown) => {
      if (!isMessage(m, 'proxy:ans')) return;
      const a = m as IpcAnswer;
      const p = asked.get(a.id);
      if (p === undefined) return;
      clearTimeout(p.timer);
      asked.delete(a.id);
      if (a.ok) p.resolve(a.body);
      else p.reject(new Error(a.error?.message ?? 'failed'));
    });
  }
  return new Promise<T>((resolve, reject) => {
    if (!process.connected) {
      reject(new Error('the primary is gone'));
      return;
    }
    const id = nextAsk++;
    const timer = setTimeout(() => {
      asked.delete(id);
      reject(new Error(`the primary did not answer ${op} within ${timeoutMs} ms`));
    }, timeoutMs);
    asked.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
    process.send!({ kind: 'proxy:ask', id, op, body } satisfies IpcAsk);
  });
}

/** The worker tells the primary something unasked. */
export function sendEvent(op: string, body?: unknown): void {
  if (process.connected) process.send!({ kind: 'proxy:evt', op, body } satisfies IpcEvent);
}
