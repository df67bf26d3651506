// Candidate modules by content hash, so every instance of a fleet runs the same bytes. When a canary
// is created, each `.wasm` plugin_id of its candidate (a path the receiving instance allows and
// loads) is published under its SHA-256: in etcd (`artifacts/<sha256>`, base64) when it is at most
// fleet.artifact_max_bytes, else as `<sha256>.wasm` in fleet.artifact_dir (a directory every instance
// reads) — and the canary's record names it `sha256:<hex>.wasm` instead of the path. Before an
// instance loads such a candidate it copies the module into its own cache (canary.data_dir/
// artifacts), verifying the hash; a module that cannot be fetched or does not match fails the load —
// on any instance, that is a create failure before any traffic moves (POST /api/v1/fleet/check).
//
// Removal (collect / prune): a module is needed while an active or paused canary names it (a
// rolled-back or completed canary is never loaded again from the store: an instance that joins later
// does not apply it), and while a create is under way: publishing pins it (`pins/<sha256>/<instance>-
// <n>`), until the canary's record is written or the create fails (release()), at the latest until
// the pin's own lease expires (PIN_TTL_S: longer than a create's checks can take).
// The leader removes an etcd artifact once it has been neither named nor pinned for
// fleet.artifact_grace, in a transaction fenced by its leadership that also requires the artifact
// unchanged (every publication rewrites it after pinning it, restarting its grace) and no canary
// written since the canaries were read; it removes fleet.artifact_dir files the same way, by their
// modification time (every publication touches the file). Every instance removes its cached copies
// on the same rule, keeping those its own promoted baselines run from (loaded from there at a restart).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CandidateConfig } from '../canary/spec.ts';
import type { CanaryRecord } from '../canary/store.ts';
import type { Log } from '../log/index.ts';
import { fleetKeys, type FleetStore } from './store.ts';

/** A content-addressed plugin_id. */
const CONTENT_ID = /^sha256:([0-9a-f]{64})\.wasm$/;
/** A module's hash wherever it is named: a content id, or a path to a copy (`…/<hex>.wasm`). */
const NAMED = /([0-9a-f]{64})\.wasm/g;
/** A cached or shared copy's file name. */
const FILE = /^([0-9a-f]{64})\.wasm$/;

/** The module hashes named anywhere in `x` (a candidate, a promoted configuration), added to `into`. */
export function namedModules(x: unknown, into = new Set<string>()): Set<string> {
  for (const m of JSON.stringify(x ?? null).matchAll(NAMED)) into.add(m[1]);
  return into;
}

/** s a publication pins its modules: a create's checks of the other instances time out after 30 s. */
export const PIN_TTL_S = 120;

/** Is a canary in this state still loaded from its artifacts (by an instance applying it)? */
const live = (r: CanaryRecord) => r.status === 'active' || r.status === 'paused';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

export class ArtifactError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArtifactError';
  }
}

export interface FleetArtifactsOptions {
  store: FleetStore;
  cacheDir: string;
  sharedDir: string | null;
  maxBytes: number;
  /** ms a module no active or paused canary names is kept (fleet.artifact_grace). */
  graceMs: number;
  /** What this instance's promoted baselines run (their cached modules are kept). */
  pinned?: () => unknown;
  log?: Pick<Log, 'info' | 'warn'>;
}

export class FleetArtifacts {
  /** Where this instance keeps verified copies; allowed as a plugin directory. */
  readonly cacheDir: string;
  readonly graceMs: number;
  private readonly store: FleetStore;
  private readonly sharedDir: string | null;
  private readonly maxBytes: number;
  private readonly pinned: () => unknown;
  private readonly log: Pick<Log, 'info' | 'warn'>;
  /** The pins this instance's creates under way hold, by module (oldest first). */
  private readonly held = new Map<string, string[]>();
  private pinSeq = 0;
  /**
   * The modules this instance found unneeded, by place (`artifacts/<hex>` in etcd, or a file's path):
   * the version seen (etcd's mod revision, a file's modification time) and since when (ms). A new
   * version (a publication, a use) starts the grace again.
   */
  private readonly unreferenced = new Map<string, { revision: number; since: number }>();

  constructor(o: FleetArtifactsOptions) {
    this.store = o.store;
    this.cacheDir = resolve(o.cacheDir);
    this.sharedDir = o.sharedDir === null ? null : resolve(o.sharedDir);
    this.maxBytes = o.maxBytes;
    this.graceMs = o.graceMs;
    this.pinned = o.pinned ?? (() => null);
    this.log = o.log ?? { info() {}, warn() {} };
    mkdirSync(this.cacheDir, { recursive: true });
  }

  /**
   * Publishes the `.wasm` modules of a start request's candidate (paths this instance has already
   * checked and loaded) and returns the request with their plugin_ids replaced by content ids.
   */
  async publish(body: unknown): Promise<unknown> {
    const b = body as { candidate_config?: { steps?: Array<Record<string, unknown>> } };
    const steps = b?.candidate_config?.steps;
    if (!Array.isArray(steps)) return body;
    const out = structuredClone(b);
    const pinned: Array<{ hex: string; pin: string }> = [];
    try {
      for (const s of out.candidate_config!.steps!) {
        const id = s.plugin_id;
        if (typeof id !== 'string' || !id.endsWith('.wasm') || CONTENT_ID.test(id)) continue;
        const bytes = readFileSync(resolve(id));
        const hex = sha256(bytes);
        if (bytes.length > this.maxBytes && this.sharedDir === null) {
          throw new ArtifactError(`step ${String(s.type)}: module ${id} is ${bytes.length} bytes, over fleet.artifact_max_bytes (${this.maxBytes}), ` +
            'and no fleet.artifact_dir is set to keep it');
        }
        pinned.push({ hex, pin: await this.hold(hex) });
        if (bytes.length <= this.maxBytes) {
          // Written even when already there: its new revision restarts its grace (collect()).
          const value = bytes.toString('base64');
          const first = await this.store.cas(fleetKeys.artifact(hex), value, 0);
          if (!first.ok) await this.store.cas(fleetKeys.artifact(hex), value, first.revision);
        } else {
          const file = join(this.sharedDir!, `${hex}.wasm`);
          if (!existsSync(file)) this.write(file, bytes);
          else touch(file);
        }
        this.write(join(this.cacheDir, `${hex}.wasm`), bytes);
        s.plugin_id = `sha256:${hex}.wasm`;
      }
    } catch (err) {
      for (const p of pinned) await this.unhold(p.hex, p.pin);
      throw err;
    }
    return out;
  }

  /** Pins a module for a create under way (released when it is over, else its lease ends it). */
  private async hold(hex: string): Promise<string> {
    const pin = fleetKeys.pin(hex, this.store.instanceId, ++this.pinSeq);
    await this.store.pin(pin, PIN_TTL_S);
    let held = this.held.get(hex);
    if (held === undefined) this.held.set(hex, held = []);
    held.push(pin);
    return pin;
  }

  private async unhold(hex: string, pin: string): Promise<void> {
    const held = this.held.get(hex) ?? [];
    if (held.includes(pin)) held.splice(held.indexOf(pin), 1);
    if (held.length === 0) this.held.delete(hex);
    await this.store.unpin(pin).catch(() => {}); // else its lease ends it
  }

  /** A create that published these modules is over (its record written, or refused): their pins go. */
  async release(modules: Iterable<string>): Promise<void> {
    for (const hex of modules) {
      const pin = this.held.get(hex)?.[0];
      if (pin !== undefined) await this.unhold(hex, pin);
    }
  }

  /** The candidate with each content id replaced by this instance's verified copy of the module. */
  async localize(c: CandidateConfig): Promise<CandidateConfig> {
    if (!c.steps.some((s) => s.plugin_id !== undefined && CONTENT_ID.test(s.plugin_id))) return c;
    const steps = [];
    for (const s of c.steps) {
      const m = s.plugin_id === undefined ? null : CONTENT_ID.exec(s.plugin_id);
      steps.push(m === null ? s : { ...s, plugin_id: await this.fetch(s.type, m[1]) });
    }
    return { ...c, steps };
  }

  private async fetch(step: string, hex: string): Promise<string> {
    const file = join(this.cacheDir, `${hex}.wasm`);
    if (existsSync(file) && sha256(readFileSync(file)) === hex) {
      touch(file);
      return file;
    }
    let bytes: Buffer | null = null;
    const kept = await this.store.get<string>(fleetKeys.artifact(hex));
    if (kept !== null) bytes = Buffer.from(kept.value, 'base64');
    else if (this.sharedDir !== null && existsSync(join(this.sharedDir, `${hex}.wasm`))) bytes = readFileSync(join(this.sharedDir, `${hex}.wasm`));
    if (bytes === null) {
      throw new ArtifactError(`step ${step}: module sha256:${hex} is neither in the fleet store nor in ` +
        `${this.sharedDir === null ? 'a fleet.artifact_dir (none is set here)' : `fleet.artifact_dir ${this.sharedDir}`}`);
    }
    if (sha256(bytes) !== hex) throw new ArtifactError(`step ${step}: the module fetched for sha256:${hex} does not match its hash`);
    this.write(file, bytes);
    return file;
  }

  /**
   * The leader's pass: removes the etcd artifacts and fleet.artifact_dir modules that no active or
   * paused canary has named for the grace period. Returns the hashes removed from etcd.
   */
  async collect(now = Date.now()): Promise<string[]> {
    const canaries = await this.store.list<CanaryRecord>(fleetKeys.canaries);
    const needed = await this.pinnedNow();
    let newest = 0;
    for (const e of canaries) {
      newest = Math.max(newest, e.revision);
      if (live(e.value)) namedModules(e.value.spec.candidate_config, needed);
    }
    const removed: string[] = [];
    const listed = new Set<string>();
    for (const a of await this.store.revisions(fleetKeys.artifacts)) {
      listed.add(a.key);
      const hex = a.key.slice(fleetKeys.artifacts.length);
      if (this.graceRunning(a.key, a.revision, needed.has(hex), now)) continue;
      // Only while leading, only that publication, and only if no canary was written since they were read.
      const res = await this.store.cas(a.key, null, a.revision, { fenced: true, unchanged: { prefix: fleetKeys.canaries, revision: newest } });
      if (res.ok) {
        removed.push(hex);
        this.unreferenced.delete(a.key);
        this.log.info('fleet artifact removed: no active or paused canary has named it for fleet.artifact_grace', { sha256: hex });
      }
    }
    for (const key of this.unreferenced.keys()) if (key.startsWith(fleetKeys.artifacts) && !listed.has(key)) this.unreferenced.delete(key);
    if (this.sharedDir !== null) this.removeFiles(this.sharedDir, needed, now, 'fleet.artifact_dir');
    return removed;
  }

  /** Every instance's pass over its cache: `needed` are the modules of the canaries it serves that are active or paused. */
  async prune(needed: Set<string>, now = Date.now()): Promise<void> {
    const keep = await this.pinnedNow();
    for (const hex of needed) keep.add(hex);
    this.removeFiles(this.cacheDir, namedModules(this.pinned(), keep), now, 'cache');
  }

  /** The modules a create under way has pinned. */
  private async pinnedNow(): Promise<Set<string>> {
    return new Set((await this.store.revisions(fleetKeys.pins)).map((p) => p.key.split('/')[1]));
  }

  /** Is `place` needed, or within its grace? (Starts or restarts the grace as the module becomes unneeded or changes.) */
  private graceRunning(place: string, revision: number, needed: boolean, now: number): boolean {
    const seen = this.unreferenced.get(place);
    if (needed) {
      this.unreferenced.delete(place);
      return true;
    }
    if (seen === undefined || seen.revision !== revision) {
      this.unreferenced.set(place, { revision, since: now });
      return true;
    }
    return now - seen.since < this.graceMs;
  }

  private removeFiles(dir: string, keep: Set<string>, now: number, where: string): void {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    const listed = new Set(names.map((n) => join(dir, n)));
    for (const place of this.unreferenced.keys()) if (place.startsWith(`${dir}/`) && !listed.has(place)) this.unreferenced.delete(place);
    for (const name of names) {
      const m = FILE.exec(name);
      if (m === null) continue;
      const file = join(dir, name);
      try {
        if (this.graceRunning(file, statSync(file).mtimeMs, keep.has(m[1]), now)) continue;
        unlinkSync(file);
        this.unreferenced.delete(file);
        this.log.info(`fleet artifact removed from the ${where}: no active or paused canary has named it for fleet.artifact_grace`,
          { sha256: m[1], file });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn('fleet artifact not removed', { file, error: (err as Error).message });
      }
    }
  }

  /** Written whole or not at all (a temporary file renamed). */
  private write(file: string, bytes: Buffer): void {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
  }
}

/** A copy's modification time is when it was last published or used. */
function touch(file: string): void {
  const now = new Date();
  utimesSync(file, now, now);
}
