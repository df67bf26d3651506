// Candidate modules by content hash, so every instance of a fleet runs the same bytes. When a canary
// is created, each `.wasm` plugin_id of its candidate (a path the receiving instance allows and
// loads) is published under its SHA-256: in etcd (`artifacts/<sha256>`, base64) when it is at most
// fleet.artifact_max_bytes, else as `<sha256>.wasm` in fleet.artifact_dir (a directory every instance
// reads) — and the canary's record names it `sha256:<hex>.wasm` instead of the path. Before an
// instance loads such a candidate it copies the module into its own cache (canary.data_dir/
// artifacts), verifying the hash; a module that cannot be fetched or does not match fails the load —
// on any instance, that is a create failure before any traffic moves (POST /api/v1/fleet/check).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CandidateConfig } from '../canary/spec.ts';
import type { FleetStore } from './store.ts';

/** A content-addressed plugin_id. */
const CONTENT_ID = /^sha256:([0-9a-f]{64})\.wasm$/;

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

export class ArtifactError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArtifactError';
  }
}

export class FleetArtifacts {
  /** Where this instance keeps verified copies; allowed as a plugin directory. */
  readonly cacheDir: string;
  private readonly store: FleetStore;
  private readonly sharedDir: string | null;
  private readonly maxBytes: number;

  constructor(o: { store: FleetStore; cacheDir: string; sharedDir: string | null; maxBytes: number }) {
    this.store = o.store;
    this.cacheDir = resolve(o.cacheDir);
    this.sharedDir = o.sharedDir === null ? null : resolve(o.sharedDir);
    this.maxBytes = o.maxBytes;
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
    for (const s of out.candidate_config!.steps!) {
      const id = s.plugin_id;
      if (typeof id !== 'string' || !id.endsWith('.wasm') || CONTENT_ID.test(id)) continue;
      const bytes = readFileSync(resolve(id));
      const hex = sha256(bytes);
      if (bytes.length <= this.maxBytes) {
        await this.store.cas(`artifacts/${hex}`, bytes.toString('base64'), 0); // a conflict: already there
      } else if (this.sharedDir !== null) {
        const file = join(this.sharedDir, `${hex}.wasm`);
        if (!existsSync(file)) this.write(file, bytes);
      } else {
        throw new ArtifactError(`step ${String(s.type)}: module ${id} is ${bytes.length} bytes, over fleet.artifact_max_bytes (${this.maxBytes}), ` +
          'and no fleet.artifact_dir is set to keep it');
      }
      this.write(join(this.cacheDir, `${hex}.wasm`), bytes);
      s.plugin_id = `sha256:${hex}.wasm`;
    }
    return out;
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
    if (existsSync(file) && sha256(readFileSync(file)) === hex) return file;
    let bytes: Buffer | null = null;
    const kept = await this.store.get<string>(`artifacts/${hex}`);
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

  /** Written whole or not at all (a temporary file renamed). */
  private write(file: string, bytes: Buffer): void {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
  }
}
