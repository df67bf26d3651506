// devdb as a small replica set, or a set of mongos routers, in one process — for tests and demos of
// multi-host upstreams. NOT REPLICATION: every member serves the same in-memory DevEngine, so a
// write is visible on all members at once. What is real is what a client or proxy sees on the wire:
// each member listens on its own port and answers hello with setName, setVersion, hosts, primary,
// me, isWritablePrimary/secondary, electionId (primary), lastWrite and tags; secondaries refuse
// writes (NotWritablePrimary, 10107, labelled RetryableWriteError for retryable writes) and reads
// without a non-primary $readPreference (NotPrimaryNoSecondaryOk, 13435); `replSetStepDown` (or
// stepDown()) makes another member primary with a newer electionId; kill() stops a member; a
// member made `silent` answers nothing but keeps its connections open (a network partition).
// Each member also counts the commands it served and refuses a getMore for a cursor it did not open
// (CursorNotFound), as separate servers would: tests read both to see where requests went.
import { ObjectId, type Document } from 'bson';
import { DevEngine } from './engine/index.ts';
import { ErrorCodes, codeName } from './engine/errors.ts';
import { DevDbServer, type DevMember } from './server.ts';

const WRITE_COMMANDS: ReadonlySet<string> = new Set([
  'insert', 'update', 'delete', 'findAndModify', 'findandmodify', 'create', 'drop', 'createIndexes',
  'dropIndexes', 'dropDatabase', 'renameCollection', 'collMod', 'commitTransaction', 'abortTransaction',
]);
const READ_COMMANDS: ReadonlySet<string> = new Set([
  'find', 'aggregate', 'count', 'distinct', 'listCollections', 'listIndexes', 'dbStats', 'collStats',
]);
const HELLO: ReadonlySet<string> = new Set(['hello', 'isMaster', 'ismaster']);

function refusal(code: number, errmsg: string, labels?: string[]): Document {
  const d: Document = { ok: 0, errmsg, code, codeName: codeName(code) };
  if (labels !== undefined) d.errorLabels = labels;
  return d;
}

/** What every devdb member keeps: command counts and the cursors it opened. */
abstract class CountingMember implements DevMember {
  /** Commands served, by name (hello included). */
  readonly ops = new Map<string, number>();
  private readonly cursors = new Set<string>();
  /** While true the member answers nothing and keeps its connections open (a network partition). */
  silent = false;
  server: DevDbServer | null = null;
  port = 0;

  /** How many `name` commands this member served. */
  count(name: string): number {
    return this.ops.get(name) ?? 0;
  }

  resetCounts(): void {
    this.ops.clear();
  }

  before(name: string, cmd: Document): Document | null {
    this.ops.set(name, (this.ops.get(name) ?? 0) + 1);
    if (name === 'getMore' && !this.cursors.has(String(cmd.getMore))) {
      return refusal(ErrorCodes.CursorNotFound, `cursor id ${String(cmd.getMore)} not found on this server`);
    }
    return this.check(name, cmd);
  }

  after(name: string, cmd: Document, reply: Document): void {
    const id = (reply.cursor as Document | undefined)?.id;
    if (id !== undefined && String(id) !== '0') this.cursors.add(String(id));
    if (name === 'killCursors' && Array.isArray(cmd.cursors)) for (const c of cmd.cursors) this.cursors.delete(String(c));
    if (HELLO.has(name) && reply.ok === 1) this.hello(reply, name !== 'hello');
  }

  protected abstract check(name: string, cmd: Document): Document | null;
  protected abstract hello(reply: Document, legacy: boolean): void;
}

export class DevReplicaMember extends CountingMember {
  readonly index: number;
  private readonly set: DevReplicaSet;
  /** Server tags in hello (read preference tag sets match these). */
  tags: Record<string, string> = {};
  /** Reported replication lag: lastWrite.lastWriteDate is this many ms behind now. */
  lagMs = 0;
  down = false;

  constructor(set: DevReplicaSet, index: number) {
    super();
    this.set = set;
    this.index = index;
  }

  get isPrimary(): boolean {
    return this.set.primaryIndex === this.index;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  protected check(name: string, cmd: Document): Document | null {
    if (name === 'replSetStepDown') {
      if (!this.isPrimary) return refusal(ErrorCodes.NotWritablePrimary, 'not primary so can\'t step down');
      this.set.stepDown();
      return { ok: 1 };
    }
    if (this.isPrimary) return null;
    if (WRITE_COMMANDS.has(name)) {
      const retryable = cmd.txnNumber !== undefined && cmd.autocommit === undefined;
      return refusal(ErrorCodes.NotWritablePrimary, 'not primary', retryable ? ['RetryableWriteError']
        : cmd.autocommit === false ? ['TransientTransactionError'] : undefined);
    }
    if (READ_COMMANDS.has(name)) {
      const mode = (cmd.$readPreference as Document | undefined)?.mode;
      if (mode === undefined || mode === 'primary') return refusal(ErrorCodes.NotPrimaryNoSecondaryOk, 'not primary and secondaryOk=false');
    }
    return null;
  }

  protected hello(reply: Document, legacy: boolean): void {
    const primary = this.set.primary;
    reply.setName = this.set.setName;
    reply.setVersion = this.set.setVersion;
    reply.hosts = this.set.members.map((m) => m.address);
    if (primary !== null) reply.primary = primary.address;
    reply.me = this.address;
    if (legacy) reply.ismaster = this.isPrimary;
    else reply.isWritablePrimary = this.isPrimary;
    reply.secondary = !this.isPrimary;
    if (this.isPrimary) reply.electionId = this.set.electionId;
    reply.lastWrite = { lastWriteDate: new Date(Date.now() - this.lagMs) };
    if (Object.keys(this.tags).length > 0) reply.tags = this.tags;
  }
}

/** A replica set of `size` members on 127.0.0.1, member 0 primary. */
export class DevReplicaSet {
  readonly engine: DevEngine;
  readonly setName: string;
  readonly members: DevReplicaMember[] = [];
  primaryIndex = 0;
  setVersion = 1;
  private term = 1;

  private constructor(size: number, setName: string, engine: DevEngine) {
    this.engine = engine;
    this.setName = setName;
    for (let i = 0; i < size; i++) this.members.push(new DevReplicaMember(this, i));
  }

  /** `basePort` 0: free ports; else members listen on basePort, basePort + 1, … */
  static async start(size = 3, setName = 'rs0', engine = new DevEngine(), basePort = 0): Promise<DevReplicaSet> {
    if (!(size >= 1 && size <= 50)) throw new Error(`a replica set has 1 to 50 members, not ${size}`);
    if (basePort !== 0 && basePort + size - 1 > 65535) {
      throw new Error(`${size} members need ports ${basePort}..${basePort + size - 1}, past 65535: give a lower port (or 0 for free ones)`);
    }
    const rs = new DevReplicaSet(size, setName, engine);
    for (const m of rs.members) {
      m.server = new DevDbServer(engine, { member: m });
      m.port = (await m.server.listen(basePort === 0 ? 0 : basePort + m.index)).port;
    }
    return rs;
  }

  get primary(): DevReplicaMember | null {
    const p = this.members[this.primaryIndex];
    return p === undefined || p.down ? null : p;
  }

  /** The electionId of the current term (newer terms compare greater, as ObjectIds do). */
  get electionId(): ObjectId {
    return ObjectId.createFromHexString(`7fffffff${this.term.toString(16).padStart(16, '0')}`);
  }

  /** A mongodb:// URI naming the given members (default: all) with replicaSet=. */
  uri(seeds: number[] = this.members.map((m) => m.index)): string {
    return `mongodb://${seeds.map((i) => this.members[i].address).join(',')}/?replicaSet=${this.setName}`;
  }

  /** The primary steps down; the next live member (or `to`) becomes primary in a new term. */
  stepDown(to?: number): DevReplicaMember {
    const n = this.members.length;
    let next = to ?? -1;
    if (next < 0) {
      for (let k = 1; k <= n; k++) {
        const c = (this.primaryIndex + k) % n;
        if (!this.members[c].down && c !== this.primaryIndex) {
          next = c;
          break;
        }
      }
    }
    if (next < 0) throw new Error('no other live member to become primary');
    this.primaryIndex = next;
    this.term++;
    return this.members[next];
  }

  /** Stops a member (its port refuses connections; open ones are dropped). */
  async kill(i: number): Promise<void> {
    const m = this.members[i];
    m.down = true;
    await m.server!.close();
  }

  resetCounts(): void {
    for (const m of this.members) m.resetCounts();
  }

  async close(): Promise<void> {
    await Promise.all(this.members.filter((m) => !m.down).map((m) => m.server!.close()));
  }
}

/** A devdb answering as a mongos (hello says msg: "isdbgrid"). */
export class DevMongos extends CountingMember {
  protected check(): Document | null {
    return null;
  }

  protected hello(reply: Document): void {
    reply.msg = 'isdbgrid';
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** `count` routers on 127.0.0.1 over one engine. */
  static async startMany(count: number, engine = new DevEngine()): Promise<DevMongos[]> {
    const out: DevMongos[] = [];
    for (let i = 0; i < count; i++) {
      const m = new DevMongos();
      m.server = new DevDbServer(engine, { member: m });
      m.port = (await m.server.listen(0)).port;
      out.push(m);
    }
    return out;
  }
}
