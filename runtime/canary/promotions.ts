// Durable promotion: when a canary completes, its graph becomes the pipeline's baseline for good —
// kept in the canary store and chosen over the file's configuration at every start and reload —
// until the file changes that pipeline's steps. Then the file wins and a warning says so; a file
// that now says what the promotion runs (after `proxy canary adopt --write`) retires it quietly.
// Never a silent revert: every time the file's steps are not what runs, a log line says which.
//
// Two steps per start or reload, so a refused reload changes nothing: choose() decides (pure),
// the caller builds and publishes that configuration, then settle() records the decision.
import type { Log } from '../log/index.ts';
import { createHash } from 'node:crypto';
import { stepName, type PipelineConfig } from '../pipeline/index.ts';
import type { CanaryStore, PromotionRecord } from './store.ts';

/** What a pipeline's steps are: order per phase and each listed step's settings, key order ignored. */
export function stepsFingerprint(config: PipelineConfig): string {
  const request = config.pipeline.request.map(stepName);
  const response = config.pipeline.response.map(stepName);
  const names = [...new Set([...request, ...response])].sort();
  const steps: Record<string, unknown> = {};
  for (const n of names) steps[n] = config.steps?.[n] ?? config.steps?.[`wasm:${n}`] ?? null;
  return `sha256:${createHash('sha256').update(canonical({ request, response, steps })).digest('hex').slice(0, 16)}`;
}

function canonical(x: unknown): string {
  if (Array.isArray(x)) return `[${x.map(canonical).join(',')}]`;
  if (x !== null && typeof x === 'object') {
    return `{${Object.keys(x).filter((k) => (x as Record<string, unknown>)[k] !== undefined).sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((x as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(x) ?? 'null';
}

/** What runs for one pipeline, and why. */
export interface BaselineChoice {
  readonly pipelineId: string;
  /** The configuration to build as the baseline. */
  readonly config: PipelineConfig;
  /** The file's configuration of the pipeline. */
  readonly file: PipelineConfig;
  /** The promotion that runs instead of the file's steps, or null. */
  readonly promotion: PromotionRecord | null;
  /** A promotion the file's changed steps replace (a warning at settle), or null. */
  readonly superseded: PromotionRecord | null;
  /** A promotion the file now matches (retired at settle), or null. */
  readonly adopted: PromotionRecord | null;
}

export class Promotions {
  private readonly store: CanaryStore;
  private readonly log: Pick<Log, 'info' | 'warn' | 'error'>;
  /** The file's configuration of each pipeline at the last settled start or reload. */
  private readonly files = new Map<string, PipelineConfig>();

  constructor(store: CanaryStore, log: Pick<Log, 'info' | 'warn' | 'error'>) {
    this.store = store;
    this.log = log;
  }

  /** Decides what pipeline `file.pipeline.id` runs; changes nothing (see settle). */
  choose(file: PipelineConfig): BaselineChoice {
    const pipelineId = file.pipeline.id;
    const p = this.store.promotion(pipelineId);
    const none = { pipelineId, config: file, file, promotion: null, superseded: null, adopted: null };
    if (p === null) return none;
    const fp = stepsFingerprint(file);
    if (fp === p.file_fingerprint) return { ...none, config: { pipeline: { ...p.config.pipeline, id: pipelineId }, steps: p.config.steps }, promotion: p };
    if (fp === stepsFingerprint(p.config)) return { ...none, adopted: p };
    return { ...none, superseded: p };
  }

  /** Records a choice once its configuration runs: a superseded promotion is dropped with a warning. */
  settle(choice: BaselineChoice, when: 'start' | 'reload'): void {
    this.files.set(choice.pipelineId, choice.file);
    const pid = choice.pipelineId;
    const now = this.store.promotion(pid);
    const seen = choice.promotion ?? choice.superseded ?? choice.adopted;
    if (now !== null && now.canary_id !== seen?.canary_id) {
      // A canary completed while this reload built its graphs: the reload published what it chose
      // before. Not silent: the next reload (or restart) applies the promotion again.
      this.log.warn(`canary ${now.canary_id} completed on pipeline "${pid}" while the configuration was being reloaded: the reload's graph runs ` +
        `until the next reload or restart, which applies the promotion`, {
        pipeline_id: pid, canary_id: now.canary_id, at: when,
      });
      return;
    }
    if (choice.superseded !== null) {
      const p = choice.superseded;
      this.store.setPromotion(pid, null);
      this.log.warn(`the configuration file changed the steps of pipeline "${pid}": they replace the baseline promoted by canary ${p.canary_id}`, {
        pipeline_id: pid, canary_id: p.canary_id, promoted_version: p.version, at: when,
        promoted: { request: p.config.pipeline.request, response: p.config.pipeline.response },
        file: { request: choice.file.pipeline.request, response: choice.file.pipeline.response },
      });
    } else if (choice.adopted !== null) {
      this.store.setPromotion(pid, null);
      this.log.info(`the configuration file of pipeline "${pid}" now has the steps canary ${choice.adopted.canary_id} promoted; the file is the ` +
        `baseline again`, { pipeline_id: pid, canary_id: choice.adopted.canary_id, at: when });
    } else if (choice.promotion !== null) {
      const p = choice.promotion;
      this.log.warn(`pipeline "${pid}" runs the baseline promoted by canary ${p.canary_id}, not the steps of the configuration file (proxy canary ` +
        `adopt ${pid} prints the file's fragment)`, {
        pipeline_id: pid, canary_id: p.canary_id, promoted_version: p.version, promoted_at: new Date(p.promoted_at).toISOString(), at: when,
      });
    }
  }

  /**
   * At start, once the file's graph is loaded: builds the promoted graph in its place when a
   * promotion holds. One that fails to build leaves the file's graph running, says so, and stays
   * in the store (a later reload or restart tries it again). Returns the configuration that runs.
   */
  async start(file: PipelineConfig, load: (config: PipelineConfig) => Promise<unknown>): Promise<PipelineConfig> {
    let choice = this.choose(file);
    if (choice.promotion !== null) {
      try {
        await load(choice.config);
      } catch (err) {
        this.log.error(`the baseline promoted by canary ${choice.promotion.canary_id} failed to build; pipeline "${choice.pipelineId}" runs the ` +
          `steps of the configuration file`, {
          pipeline_id: choice.pipelineId, canary_id: choice.promotion.canary_id, error: (err as Error).message,
        });
        choice = { ...choice, config: file, promotion: null };
      }
    }
    this.settle(choice, 'start');
    return choice.config;
  }

  /** A canary completed: `config` is the pipeline's baseline from now on. Returns what it replaces (for restore). */
  promote(pipelineId: string, canaryId: string, config: PipelineConfig, version: string, at: number): PromotionRecord | null {
    const before = this.store.promotion(pipelineId);
    const file = this.files.get(pipelineId);
    // Without a settled file configuration (a controller without a file: tests) the promotion
    // holds until any file is applied.
    const record: PromotionRecord = {
      pipeline_id: pipelineId, canary_id: canaryId, promoted_at: at, config, version,
      file_fingerprint: file === undefined ? '' : stepsFingerprint(file),
    };
    this.store.setPromotion(pipelineId, record);
    return before;
  }

  /** restore-baseline: the promotion a completion replaced is put back (null: the file's steps again). */
  restore(pipelineId: string, previous: PromotionRecord | null): void {
    this.store.setPromotion(pipelineId, previous);
  }

  /** The promotion in force for a pipeline, or null. */
  current(pipelineId: string): PromotionRecord | null {
    return this.store.promotion(pipelineId);
  }

  /** The file's configuration of a pipeline as last applied, or undefined. */
  fileConfig(pipelineId: string): PipelineConfig | undefined {
    return this.files.get(pipelineId);
  }
}
