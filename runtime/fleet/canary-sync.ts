// The canary on a fleet: the controller's records live in the fleet store, every transition is one
// store transaction, and every instance serves what the store says.
//
// - **Transactions.** A control-plane write (on any instance) or a scheduled evaluation (on the
//   leader) runs through transact(): the canary is read from the store and, if another instance
//   changed it, adopted first; the controller then runs the transition as on one instance, but its
//   writes (record and history entries) and its notification events are held; one compare-and-set
//   writes them at the revision read (and, for an evaluation, only while this instance holds the
//   leadership: fencing). Won: the events go out — once for the fleet, from the writer. Lost: the
//   events are dropped, the winner's state is adopted, and the caller gets 409.
// - **Followers.** A watch on the canaries adopts each new revision (weights, stage, rollback,
//   completion), so every instance applies a change within the watch's delay; a periodic resync
//   covers a watch that was cut.
// - **One evaluator.** Only the leader schedules evaluations (controller.setEvaluating), on windows
//   merged from every instance (evidence.ts); it starts the moment the store reports the leadership
//   won, and stops when it is lost or its lease may have expired.
// - **The fleet's evaluation, on every instance.** An evaluation's sample (the merged window's
//   figures: GET …/metrics) and its view (rules, result, the stage's figures: the status) are
//   written in the evaluation's own transaction — so a fenced-off evaluation leaves neither.
//   Samples are a ring of `canary.max_samples` keys per canary (`samples/<id>/<slot>`, each with
//   its sequence number), read from the store when asked; the view (`evaluations/<id>`) is watched,
//   and every instance that does not evaluate shows it (controller.adoptEvaluation).
// - **The store unreachable.** Instances keep the weights they last applied; writes are refused
//   (503) and no evaluation decides; with fleet.fail_safe_after, an instance that could not reach
//   the store that long sends everything to the baseline and says so (its log, GET /api/v1/fleet).
// - **Artifacts.** The tick also removes candidate modules no active or paused canary names any more
//   (artifacts.ts): the leader from etcd and fleet.artifact_dir, every instance from its cache.
import type { Log } from '../log/index.ts';
import { CanaryError } from '../canary/errors.ts';
import { fleetWants, type CanaryController, type FleetHooks, type FleetWants, type FleetWindows } from '../canary/controller.ts';
import type { ShadowFigures } from '../canary/shadow.ts';
import type { CanaryEvent, CanaryEventSink, NotificationChannel } from '../canary/events.ts';
import type { CanaryRecord, CanaryRecords, EvaluationView, HistoryEntry, Sample } from '../canary/store.ts';
import { fleetKeys, type FleetStore } from './store.ts';
import type { FleetEvidence } from './evidence.ts';
import { namedModules, type FleetArtifacts } from './artifacts.ts';
import type { CandidateConfig } from '../canary/spec.ts';

interface Capture {
  saves: Array<{ record: CanaryRecord; entries: HistoryEntry[] }>;
  events: Array<{ event: CanaryEvent; channels: NotificationChannel[] | null }>;
  /** An evaluation's sample and view, by canary. */
  samples: Map<string, Sample>;
  views: Map<string, EvaluationView>;
}

/** `samples/<id>/<slot>`: one evaluation sample, its sequence number (slot = seq mod canary.max_samples) and the instance that made it. */
interface StoredSample { seq: number; sample: Sample; by: string }
/** `evaluations/<id>`: the last evaluation's view, and the sequence number of its sample. */
interface StoredEvaluation { sample_seq: number; view: EvaluationView }

const samplesOf = (id: string) => `samples/${id}/`;
const evaluationKey = (id: string) => `evaluations/${id}`;

/** How long the store must stay unreachable before the canaries' channels are told (a blip is only logged). */
export const STORE_UNREACHABLE_NOTICE_MS = 3000;
export interface FleetCanariesOptions {
  store: FleetStore;
  evidence: FleetEvidence;
  artifacts: FleetArtifacts;
  sink: CanaryEventSink;
  log: Pick<Log, 'info' | 'warn' | 'error'>;
  maxSamples: number;
  /** ms of the resync (and leadership check) period. */
  resyncMs?: number;
  /** ms the store may be unreachable before every canary goes to the baseline; 0: never. */
  failSafeAfterMs?: number;
}

export class FleetCanaries implements FleetHooks, CanaryRecords {
  readonly sink: CanaryEventSink;
  private readonly store: FleetStore;
  private readonly evidence: FleetEvidence;
  readonly artifacts: FleetArtifacts;
  private readonly realSink: CanaryEventSink;
  private readonly log: Pick<Log, 'info' | 'warn' | 'error'>;
  private readonly maxSamples: number;
  private readonly resyncMs: number;
  private readonly failSafeAfterMs: number;
  private controller: CanaryController | null = null;
  private capture: Capture | null = null;
  /** One transaction or adoption at a time in this process. */
  private chain: Promise<unknown> = Promise.resolve();
  /** The store revision of each canary this instance serves. */
  private readonly revisions = new Map<string, number>();
  private readonly histories = new Map<string, Array<{ key: string; entry: HistoryEntry }>>();
  /** The sequence number of each canary's latest sample in the store (from its evaluation view). */
  private readonly sampleSeq = new Map<string, number>();
  private seq = 0;
  private evaluating = false;
  private unreachableSince: number | null = null;
  /** The current outage has been announced to the canaries' channels (canary.store_unreachable). */
  private unreachableAnnounced = false;
  /** Whether the fail-safe sent everything to the baseline (cleared when the store is back). */
  failSafe = false;
  private timer: NodeJS.Timeout | null = null;
  /** When the next artifact collection may run (ms), and whether one is running. */
  private nextCollect = 0;
  private collecting = false;
  private readonly stops: Array<() => void> = [];

  constructor(o: FleetCanariesOptions) {
    this.store = o.store;
    this.evidence = o.evidence;
    this.artifacts = o.artifacts;
    this.realSink = o.sink;
    this.log = o.log;
    this.maxSamples = o.maxSamples;
    this.resyncMs = o.resyncMs ?? 1000;
    this.failSafeAfterMs = o.failSafeAfterMs ?? 0;
    this.sink = {
      emit: (event, channels) => {
        if (this.capture !== null) this.capture.events.push({ event, channels });
        else this.realSink.emit(event, channels);
      },
      close: () => this.realSink.close(),
    };
  }

  /** Loads every canary of the store, then follows changes (watches, resync, leadership). */
  async attach(controller: CanaryController): Promise<void> {
    this.controller = controller;
    await this.serial(() => this.loadAll());
    this.stops.push(this.store.watch<CanaryRecord>(fleetKeys.canaries, (e) => {
      if (e.value !== null) void this.serial(() => this.adoptAt(e.value!, e.revision));
    }));
    this.stops.push(this.store.watch<StoredEvaluation>('evaluations/', (e) => {
      if (e.value !== null) this.adoptEvaluation(e.key.slice('evaluations/'.length), e.value);
    }));
    this.stops.push(this.store.watch<HistoryEntry>('history/', (e) => {
      if (e.value === null) return;
      const fresh = this.addHistory(e.key, e.value);
      // A restore-baseline made on another instance: the record does not change, its history says it.
      if (fresh && e.value.event === 'baseline_restored') this.controller!.restoreRetained(e.key.split('/')[1]);
    }));
    // Leadership won or lost acts at once (a takeover is the lease's expiry plus milliseconds); the
    // tick's check covers a leader whose keep-alive went stale without any event.
    this.stops.push(this.store.onLeader(() => this.checkLeadership()));
    this.timer = setInterval(() => { void this.tick(); }, this.resyncMs);
    this.timer.unref();
  }

  /** Is this instance the evaluator? (The leadership with a lease that cannot have expired.) */
  evaluates(): boolean {
    return this.store.isLeader() && !this.failSafe;
  }

  evaluation(id: string, run: () => Promise<unknown>): Promise<unknown> {
    if (!this.evaluates()) return Promise.resolve(null);
    return this.transact(id, 'automatic', run);
  }

  windows(canaryId: string, pipelineId: string, want: FleetWants): Promise<FleetWindows> {
    return this.evidence.windows(canaryId, pipelineId, want);
  }

  shadow(canaryId: string, pipelineId: string, maxDiffs: number): Promise<ShadowFigures | null> {
    return this.evidence.shadow(canaryId, pipelineId, maxDiffs);
  }

  candidate(c: CandidateConfig): Promise<CandidateConfig> {
    return this.artifacts.localize(c);
  }

  /**
   * Runs `fn` (a transition of canary `id`, or a start when null) as one fleet transaction; throws
   * PROXY_ERR_CANARY_CONFLICT (409) when another write won, PROXY_ERR_CANARY_STORE_UNREACHABLE (503)
   * when the store cannot be reached.
   */
  transact<T>(id: string | null, by: 'manual' | 'automatic', fn: () => T | Promise<T>): Promise<T> {
    return this.serial(async () => {
      if (!this.store.reachable()) throw new CanaryError('PROXY_ERR_CANARY_STORE_UNREACHABLE', 'the fleet store cannot be reached; no transition was made');
      if (id !== null) {
        let cur;
        try {
          cur = await this.store.get<CanaryRecord>(fleetKeys.canary(id));
        } catch (err) {
          throw new CanaryError('PROXY_ERR_CANARY_STORE_UNREACHABLE', `the fleet store cannot be reached: ${(err as Error).message}`);
        }
        if (cur !== null && cur.revision !== this.revisions.get(id)) await this.adoptAt(cur.value, cur.revision);
      }
      this.capture = { saves: [], events: [], samples: new Map(), views: new Map() };
      let result: T;
      try {
        result = await fn();
      } catch (err) {
        this.capture = null;
        // Whatever the failed transition changed here, the store's state is put back.
        if (id !== null) await this.resync(id).catch(() => {});
        throw err;
      }
      const cap = this.capture;
      this.capture = null;
      const byRecord = new Map<string, { record: CanaryRecord; entries: HistoryEntry[] }>();
      for (const s of cap.saves) {
        const cur = byRecord.get(s.record.id);
        if (cur === undefined) byRecord.set(s.record.id, { record: s.record, entries: [...s.entries] });
        else {
          cur.record = s.record;
          cur.entries.push(...s.entries);
        }
      }
      for (const [rid, w] of byRecord) {
        const also: Array<{ key: string; value: unknown }> = w.entries.map((entry) => ({ key: this.historyKey(rid, entry), value: entry }));
        const sample = cap.samples.get(rid);
        const view = cap.views.get(rid);
        let seq = this.sampleSeq.get(rid) ?? 0;
        if (sample !== undefined) {
          seq++;
          also.push({ key: `${samplesOf(rid)}${seq % this.maxSamples}`, value: { seq, sample, by: this.store.instanceId } satisfies StoredSample });
        }
        if (view !== undefined) also.push({ key: evaluationKey(rid), value: { sample_seq: seq, view } satisfies StoredEvaluation });
        const expected = this.revisions.get(rid) ?? 0;
        let res;
        try {
          // A new canary: no other canary may be running on its pipeline anywhere in the fleet.
          const guard = expected === 0 ? await this.claimPipeline(w.record, also) : undefined;
          res = await this.store.cas(fleetKeys.canary(rid), w.record, expected, { fenced: by === 'automatic', also, guard });
        } catch (err) {
          if (expected === 0) {
            void this.artifacts.release(namedModules(w.record.spec.candidate_config));
            this.controller!.discard(rid);
          } else await this.resync(rid).catch(() => {});
          if (err instanceof CanaryError) throw err;
          throw new CanaryError('PROXY_ERR_CANARY_STORE_UNREACHABLE', `the fleet store cannot be reached: ${(err as Error).message}`);
        }
        // A new canary's record names its modules now (or the create failed): the pins its publication took go.
        if (expected === 0) void this.artifacts.release(namedModules(w.record.spec.candidate_config));
        if (!res.ok && expected === 0) {
          this.controller!.discard(rid);
          throw new CanaryError('PROXY_ERR_CANARY_EXISTS', `another canary was started on pipeline "${w.record.pipeline_id}" at the same time`);
        }
        if (!res.ok) {
          if (res.reason === 'fenced') {
            this.log.warn('fleet write fenced off: this instance no longer leads; its evaluation is dropped', { canary_id: rid });
            this.checkLeadership();
          }
          await this.resync(rid).catch(() => {});
          throw new CanaryError('PROXY_ERR_CANARY_CONFLICT', res.reason === 'fenced' ? `canary ${rid}: this instance no longer leads the fleet; ` +
            'its write was refused' : `canary ${rid} was changed by another instance (revision ${res.revision}); retry on the current state`);
        }
        this.revisions.set(rid, res.revision);
        if (sample !== undefined) this.sampleSeq.set(rid, Math.max(seq, this.sampleSeq.get(rid) ?? 0));
        for (const a of also) if (a.key.startsWith('history/')) this.addHistory(a.key, a.value as HistoryEntry);
      }
      for (const e of cap.events) this.realSink.emit(e.event, e.channels);
      return result;
    });
  }

  /**
   * The guard of a new canary: the pipeline's `running/` key at the revision read, refused when it
   * names a canary still active or paused; the new canary's id is written there in the same transaction.
   */
  private async claimPipeline(r: CanaryRecord, also: Array<{ key: string; value: unknown }>): Promise<{ key: string; revision: number }> {
    const key = `running/${r.pipeline_id}`;
    const cur = await this.store.get<string>(key);
    if (cur !== null && cur.value !== r.id) {
      const other = await this.store.get<CanaryRecord>(fleetKeys.canary(cur.value));
      if (other !== null && (other.value.status === 'active' || other.value.status === 'paused')) {
        throw new CanaryError('PROXY_ERR_CANARY_EXISTS', `canary ${cur.value} is already ${other.value.status} on pipeline "${r.pipeline_id}"`,
          { canary_id: cur.value });
      }
    }
    also.push({ key, value: r.id });
    return { key, revision: cur?.revision ?? 0 };
  }

  // ---- CanaryRecords: the controller's view --------------------------------------------------

  save(r: CanaryRecord, entries: HistoryEntry[] = []): void {
    if (this.capture !== null) {
      this.capture.saves.push({ record: structuredClone(r), entries: structuredClone(entries) });
      return;
    }
    // Outside a transaction (a grace period ending on this instance): history kept here only.
    for (const e of entries) this.addHistory(this.historyKey(r.id, e), e);
  }

  all(): CanaryRecord[] {
    return [];
  }

  history(id: string): HistoryEntry[] {
    return (this.histories.get(id) ?? []).map((h) => h.entry);
  }

  /** An evaluation's sample: written with its transaction (in a fleet every evaluation is one: evaluation()). */
  addSample(id: string, s: Sample): void {
    if (this.capture !== null) this.capture.samples.set(id, structuredClone(s));
  }

  evaluated(id: string, view: EvaluationView): void {
    if (this.capture !== null) this.capture.views.set(id, structuredClone(view));
  }

  /** The fleet's samples of canary `id`, oldest first, read from the store (503 when it cannot be reached). */
  async samples(id: string): Promise<Sample[]> {
    let stored;
    try {
      stored = await this.store.list<StoredSample>(samplesOf(id));
    } catch (err) {
      throw new CanaryError('PROXY_ERR_CANARY_STORE_UNREACHABLE', `the fleet store cannot be reached: ${(err as Error).message}`);
    }
    return stored.map((e) => e.value).sort((a, b) => a.seq - b.seq).map((x) => ({ ...x.sample, evaluated_by: x.by }));
  }

  // ---- helpers --------------------------------------------------------------------------------

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private historyKey(id: string, e: HistoryEntry): string {
    return `history/${id}/${String(e.at).padStart(15, '0')}-${this.store.instanceId}-${String(++this.seq).padStart(6, '0')}`;
  }

  /** Adds a history entry once; false when it was already there (this instance wrote it). */
  private addHistory(key: string, entry: HistoryEntry): boolean {
    const id = key.split('/')[1];
    let list = this.histories.get(id);
    if (list === undefined) this.histories.set(id, list = []);
    if (list.some((h) => h.key === key)) return false;
    list.push({ key, entry });
    if (list.length > 1 && list[list.length - 2].key > key) list.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return true;
  }

  private async loadAll(): Promise<void> {
    for (const h of await this.store.list<HistoryEntry>('history/')) this.addHistory(h.key, h.value);
    const all = await this.store.list<CanaryRecord>(fleetKeys.canaries);
    all.sort((a, b) => a.value.created_at - b.value.created_at);
    for (const e of all) await this.adoptAt(e.value, e.revision, false);
    for (const e of await this.store.list<StoredEvaluation>('evaluations/')) this.adoptEvaluation(e.key.slice('evaluations/'.length), e.value);
  }

  /** Another instance's evaluation: its sample's sequence number, and its view shown here (the evaluator shows its own). */
  private adoptEvaluation(id: string, e: StoredEvaluation): void {
    if (e.sample_seq > (this.sampleSeq.get(id) ?? 0)) this.sampleSeq.set(id, e.sample_seq);
    if (!this.evaluating) this.controller?.adoptEvaluation(id, e.view);
  }

  /** `live`: a change as it happens (false: the state found when this instance joined). */
  private async adoptAt(record: CanaryRecord, revision: number, live = true): Promise<void> {
    if (revision <= (this.revisions.get(record.id) ?? 0)) return;
    this.revisions.set(record.id, revision);
    try {
      await this.controller!.adopt(record, live);
      if (this.failSafe) this.controller!.toBaseline(record.id);
    } catch (err) {
      this.log.error('fleet canary could not be applied on this instance (its traffic stays on the baseline)',
        { canary_id: record.id, status: record.status, error: (err as Error).message });
    }
  }

  private async resync(id: string): Promise<void> {
    const cur = await this.store.get<CanaryRecord>(fleetKeys.canary(id));
    if (cur !== null) {
      this.revisions.delete(id);
      await this.adoptAt(cur.value, cur.revision);
    }
  }

  /** Starts or stops evaluating as the leadership comes and goes. */
  private checkLeadership(): void {
    const on = this.evaluates();
    if (on === this.evaluating || this.controller === null) return;
    this.evaluating = on;
    this.log.info(on ? 'this instance evaluates the fleet\'s canaries (leader)' : 'this instance follows (another instance evaluates)',
      { instance_id: this.store.instanceId, leader: this.store.leader() });
    if (on) {
      for (const id of this.controller.ids()) {
        const r = this.controller.record(id);
        if (r.status === 'active' || r.status === 'paused') void this.evidence.prime(id, r.pipeline_id, fleetWants(r.spec)).catch(() => {});
      }
    }
    this.controller.setEvaluating(on);
  }

  private async tick(): Promise<void> {
    this.checkFailSafe();
    this.checkLeadership();
    if (!this.store.reachable()) return;
    try {
      const all = await this.store.list<CanaryRecord>(fleetKeys.canaries);
      for (const e of all) if (e.revision > (this.revisions.get(e.value.id) ?? 0)) void this.serial(() => this.adoptAt(e.value, e.revision));
    } catch {
      // unreachable: the next tick tries again
    }
    if (Date.now() >= this.nextCollect && !this.collecting) void this.collect();
  }

  /** Removes the modules no active or paused canary names any more (artifacts.ts): the leader from the fleet, each instance from its cache. */
  private async collect(): Promise<void> {
    this.collecting = true;
    this.nextCollect = Date.now() + Math.min(60_000, Math.max(1000, this.artifacts.graceMs / 4));
    try {
      const needed = new Set<string>();
      for (const id of this.controller?.ids() ?? []) {
        const r = this.controller!.record(id);
        if (r.status === 'active' || r.status === 'paused') namedModules(r.spec.candidate_config, needed);
      }
      await this.artifacts.prune(needed);
      if (this.evaluates()) await this.artifacts.collect();
    } catch (err) {
      this.log.warn('fleet artifacts not collected; tried again later', { error: (err as Error).message });
    } finally {
      this.collecting = false;
    }
  }

  private checkFailSafe(): void {
    const now = Date.now();
    if (this.store.reachable()) {
      this.unreachableSince = null;
      this.unreachableAnnounced = false;
      if (this.failSafe) {
        this.failSafe = false;
        this.log.warn('fleet store reachable again: the fail-safe is lifted; the store\'s weights apply again', {});
        for (const id of this.revisions.keys()) void this.serial(() => this.resync(id));
      }
      return;
    }
    if (this.unreachableSince === null) {
      this.unreachableSince = now;
      this.log.warn('fleet store unreachable: serving with the last applied weights; no promotion or rollback is made until it is back',
        { instance_id: this.store.instanceId });
    }
    const since = this.unreachableSince;
    if (!this.unreachableAnnounced && now - since >= STORE_UNREACHABLE_NOTICE_MS) {
      this.unreachableAnnounced = true;
      this.announce('canary.store_unreachable', since, `the fleet store has been unreachable for ${Math.round((now - since) / 1000)} s: ` +
        'this instance keeps the weights it last applied; no promotion or rollback is made until it is back' +
        (this.failSafeAfterMs > 0 ? `; after ${Math.round(this.failSafeAfterMs / 1000)} s its traffic goes to the baseline (fleet.fail_safe_after)` : ''));
    }
    if (this.failSafeAfterMs > 0 && !this.failSafe && now - since >= this.failSafeAfterMs) {
      this.failSafe = true;
      const detail = `the fleet store has been unreachable for ${Math.round((now - since) / 1000)} s: every canary's traffic ` +
        'goes to the baseline (fleet.fail_safe_after)';
      this.log.error(detail, { instance_id: this.store.instanceId });
      for (const id of this.controller?.ids() ?? []) this.controller!.toBaseline(id);
      this.announce('canary.fail_safe', since, detail);
    }
  }

  /** Tells the channels of every canary running here (the local sink: the store cannot carry it). */
  private announce(type: 'canary.store_unreachable' | 'canary.fail_safe', since: number, detail: string): void {
    const fleet = { instance_id: this.store.instanceId, unreachable_since: new Date(since).toISOString(), fail_safe: type === 'canary.fail_safe', detail };
    for (const id of this.controller?.ids() ?? []) this.controller!.announceFleet(id, type, fleet, this.realSink);
  }

  /** For GET /api/v1/fleet. */
  state(): { evaluating: boolean; fail_safe: boolean; store_unreachable_since: string | null } {
    return { evaluating: this.evaluating, fail_safe: this.failSafe,
      store_unreachable_since: this.unreachableSince === null ? null : new Date(this.unreachableSince).toISOString() };
  }

  close(): void {
    for (const s of this.stops) s();
    if (this.timer !== null) clearInterval(this.timer);
  }
}
