// The differential flame graph (Gregg 2014; inferno's diff-folded): two folded profiles, widths
// from one of them (`after` by default), each frame coloured by how much its time changed — red
// grew, blue shrank, white unchanged, the intensity scaled by the largest change in the graph. A
// frame's change is inclusive (its children's too), like its width: a step is red when anything
// inside it grew, and its children show where. Stacks missing from the profile that gives the
// widths cannot be seen; `widthsFrom: 'before'` draws the other way round so that vanished stacks
// appear (still red = grew, blue = shrank). `proxy profile --compare` renders this.
import {
  addOther, buildStackTree, flameGraphDocument, formatPct, formatUs, layoutStackTree,
  type FlameFrame, type FlameGraphOptions, type FlameLayout,
} from './flamegraph-svg.ts';

export interface DiffFlameGraphOptions extends FlameGraphOptions {
  /** Scale `before` to `after`'s total first, so the colours show shares, not load (default false). */
  normalize?: boolean;
  /** Which profile gives the widths (default 'after'). */
  widthsFrom?: 'after' | 'before';
}

export interface DiffFrame extends FlameFrame {
  /** µs in `before` (normalised when asked), this frame and its children. */
  before: number;
  /** µs in `after`, this frame and its children. */
  after: number;
  /** after − before, µs. */
  delta: number;
}

export interface DiffLayout extends FlameLayout {
  frames: DiffFrame[];
  /** Largest |delta| among the frames below the root (the colour scale), µs. */
  maxDelta: number;
  /** Factor `before` was multiplied by (1 when not normalised). */
  scale: number;
}

function total(folded: ReadonlyMap<string, number>): number {
  let t = 0;
  for (const v of folded.values()) if (Number.isFinite(v) && v > 0) t += v;
  return t;
}

function scaled(folded: ReadonlyMap<string, number>, k: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const [s, v] of folded) out.set(s, v * k);
  return out;
}

/** The differential graph's geometry and values, without drawing it. */
export function layoutDiffFlameGraph(
  before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>,
  opts: { minWidthPct?: number; normalize?: boolean; widthsFrom?: 'after' | 'before' } = {},
): DiffLayout {
  const beforeTotal = total(before);
  const scale = opts.normalize === true && beforeTotal > 0 ? total(after) / beforeTotal : 1;
  const b = scale === 1 ? before : scaled(before, scale);
  const fromBefore = opts.widthsFrom === 'before';
  const tree = buildStackTree(fromBefore ? b : after);
  addOther(tree, fromBefore ? after : b);
  const { layout, nodes } = layoutStackTree(tree, opts.minWidthPct ?? 0);
  let maxDelta = 0;
  const frames = layout.frames.map((f, i): DiffFrame => {
    const mine = nodes[i].total;
    const other = nodes[i].other;
    const bv = fromBefore ? mine : other;
    const av = fromBefore ? other : mine;
    const delta = av - bv;
    if (f.depth > 0) maxDelta = Math.max(maxDelta, Math.abs(delta));
    return { ...f, before: bv, after: av, delta };
  });
  return { total: layout.total, maxDepth: layout.maxDepth, frames, maxDelta, scale };
}

/** Red for growth, blue for shrinkage, white for no change; full intensity at `maxDelta`. */
export function diffColour(delta: number, maxDelta: number): string {
  if (delta === 0 || maxDelta <= 0) return 'rgb(255,255,255)';
  const ratio = Math.min(1, Math.abs(delta) / maxDelta);
  const c = Math.round(255 - 215 * ratio);
  return delta > 0 ? `rgb(255,${c},${c})` : `rgb(${c},${c},255)`;
}

/** "+25.0%" relative to before; "new" when there was nothing before. */
export function formatDelta(before: number, after: number): string {
  if (before <= 0) return after > 0 ? 'new' : '0.0%';
  const pct = ((after - before) / before) * 100;
  return `${pct >= 0 ? '+' : ''}${pct.toFixed(1)}%`;
}

/** The differential flame graph as a standalone SVG document (same interactivity as renderFlameGraph). */
export function renderDiffFlameGraph(
  before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>, opts: DiffFlameGraphOptions,
): string {
  const layout = layoutDiffFlameGraph(before, after, opts);
  const widths = opts.widthsFrom === 'before' ? 'before' : 'after';
  const subtitle = opts.subtitle ??
    `Widths: ${widths}. Red grew, blue shrank (strongest at ${formatUs(layout.maxDelta)}).` +
      (layout.scale !== 1 ? ` Before normalised to after's total (×${layout.scale.toPrecision(3)}).` : '');
  return flameGraphDocument(layout, { ...opts, subtitle, background: ['#eeeeee', '#e0e0e0'] }, {
    fill: (i) => diffColour(layout.frames[i].delta, layout.maxDelta),
    tooltip: (i) => {
      const f = layout.frames[i];
      return `${f.name} (before ${formatUs(f.before)}, after ${formatUs(f.after)}, ${formatDelta(f.before, f.after)}; ` +
        `${formatPct(opts.widthsFrom === 'before' ? f.before : f.after, layout.total)} of ${widths})`;
    },
  });
}
