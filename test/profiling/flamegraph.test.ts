// The flame graph renderer: layout (widths, nesting, min_width, self time), colours per SPEC §2.9,
// a well-formed and escaped SVG document, its script (zoom, search, URL state) run against a small
// DOM built from the document itself, and the differential graph.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  layoutFlameGraph, renderFlameGraph, frameCategory, frameColour, fitLabel, type FlameLayout,
} from '../../runtime/profiling/flamegraph-svg.ts';
import {
  renderDiffFlameGraph, layoutDiffFlameGraph, diffColour,
} from '../../runtime/profiling/flamegraph-diff.ts';
import { foldFrames, type RequestFrame } from '../../runtime/profiling/index.ts';
import { FrameRing } from '../../runtime/profiling/frames.ts';
import { RequestTimings } from '../../runtime/pipeline/index.ts';

// ---- A tiny XML parser: throws on anything malformed; the tree doubles as a DOM for the script ----

type Listener = (e: FakeEvent) => void;
interface FakeEvent { type: string; target: El; key?: string; ctrlKey?: boolean; defaultPrevented?: boolean; preventDefault(): void }

class El {
  readonly attrs = new Map<string, string>();
  childNodes: (El | string)[] = [];
  parentNode: El | null = null;
  private readonly listeners = new Map<string, Listener[]>();
  constructor(readonly localName: string) {}
  get children(): El[] { return this.childNodes.filter((c): c is El => c instanceof El); }
  get textContent(): string { return this.childNodes.map((c) => (typeof c === 'string' ? c : c.textContent)).join(''); }
  set textContent(s: string) { this.childNodes = [String(s)]; }
  getAttribute(n: string): string | null { return this.attrs.get(n) ?? null; }
  setAttribute(n: string, v: string): void { this.attrs.set(n, String(v)); }
  hasAttribute(n: string): boolean { return this.attrs.has(n); }
  get classes(): string[] { return (this.attrs.get('class') ?? '').split(/\s+/).filter(Boolean); }
  readonly classList = {
    add: (c: string) => { if (!this.classes.includes(c)) this.attrs.set('class', [...this.classes, c].join(' ')); },
    remove: (c: string) => { this.attrs.set('class', this.classes.filter((x) => x !== c).join(' ')); },
    contains: (c: string) => this.classes.includes(c),
  };
  addEventListener(type: string, fn: Listener): void { this.listeners.set(type, [...(this.listeners.get(type) ?? []), fn]); }
  /** Dispatches on this element and bubbles up. */
  fire(type: string, extra: Partial<FakeEvent> = {}): FakeEvent {
    const e: FakeEvent = { type, target: this, preventDefault() { e.defaultPrevented = true; }, ...extra };
    for (let n: El | null = this; n !== null; n = n.parentNode) for (const fn of n.listeners.get(type) ?? []) fn(e);
    return e;
  }
  *all(): Generator<El> { yield this; for (const c of this.children) yield* c.all(); }
}

const ENTITY: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
function decode(s: string, at: number): string {
  return s.replace(/&([^;]*);?/g, (m, name: string) => {
    if (!m.endsWith(';')) throw new Error(`bare & at ${at}`);
    if (name in ENTITY) return ENTITY[name];
    const num = /^#x([0-9a-f]+)$/i.exec(name) ?? /^#([0-9]+)$/.exec(name);
    if (num === null) throw new Error(`unknown entity &${name}; at ${at}`);
    return String.fromCodePoint(parseInt(num[1], name[1] === 'x' ? 16 : 10));
  });
}

function parseXml(src: string): El {
  let i = 0;
  const stack: El[] = [];
  let root: El | null = null;
  const NAME = /[A-Za-z_:][\w.:-]*/y;
  const name = () => { NAME.lastIndex = i; const m = NAME.exec(src); if (m === null) throw new Error(`name expected at ${i}`); i += m[0].length; return m[0]; };
  const ws = () => { while (/\s/.test(src[i] ?? '')) i++; };
  const until = (end: string) => { const j = src.indexOf(end, i); if (j < 0) throw new Error(`unterminated, expected ${end} after ${i}`);
    const s = src.slice(i, j); i = j + end.length; return s; };
  while (i < src.length) {
    const top = stack[stack.length - 1];
    if (src.startsWith('<?', i)) { i += 2; until('?>'); continue; }
    if (src.startsWith('<!--', i)) { i += 4; until('-->'); continue; }
    if (src.startsWith('<![CDATA[', i)) {
      if (top === undefined) throw new Error('CDATA outside the root');
      i += 9; top.childNodes.push(until(']]>')); continue;
    }
    if (src.startsWith('</', i)) {
      i += 2; const n = name(); ws();
      if (src[i++] !== '>') throw new Error(`> expected at ${i}`);
      const open = stack.pop();
      if (open === undefined || open.localName !== n) throw new Error(`</${n}> closes <${open?.localName}> at ${i}`);
      continue;
    }
    if (src[i] === '<') {
      i++;
      const el = new El(name());
      for (;;) {
        ws();
        if (src.startsWith('/>', i) || src[i] === '>') break;
        const a = name(); ws();
        if (src[i++] !== '=') throw new Error(`= expected at ${i}`);
        ws();
        const q = src[i++];
        if (q !== '"' && q !== "'") throw new Error(`quote expected at ${i}`);
        const raw = until(q);
        if (raw.includes('<')) throw new Error(`< in attribute at ${i}`);
        if (el.attrs.has(a)) throw new Error(`duplicate attribute ${a} at ${i}`);
        el.attrs.set(a, decode(raw, i));
      }
      if (top === undefined) { if (root !== null) throw new Error('second root element'); root = el; } else { el.parentNode = top; top.childNodes.push(el); }
      if (src.startsWith('/>', i)) i += 2; else { i++; stack.push(el); }
      continue;
    }
    const j = src.indexOf('<', i);
    const text = src.slice(i, j < 0 ? src.length : j);
    if (text.includes(']]>')) throw new Error(`]]> in text at ${i}`);
    if (top === undefined) { if (text.trim() !== '') throw new Error(`text outside the root at ${i}`); } else top.childNodes.push(decode(text, i));
    i = j < 0 ? src.length : j;
  }
  if (stack.length > 0) throw new Error(`<${stack[stack.length - 1].localName}> not closed`);
  if (root === null) throw new Error('no root element');
  return root;
}

// ---- The embedded script, run against the parsed document ----

interface Page { root: El; byId(id: string): El; frame(stack: string): El; location: { hash: string; search: string; pathname: string };
  window: El & { prompt?: (m: string, d: string) => string | null } }

function load(svg: string, url: { hash?: string; search?: string } = {}, answer: string | null = null): Page {
  const root = parseXml(svg);
  const ids = new Map<string, El>();
  for (const e of root.all()) { const id = e.getAttribute('id'); if (id !== null) ids.set(id, e); }
  const location = { hash: url.hash ?? '', search: url.search ?? '', pathname: '/api/profile/flamegraph' };
  const history = { state: null, replaceState(_s: unknown, _t: string, u: string) { location.hash = u.startsWith('#') ? u : ''; } };
  const window = Object.assign(new El('window'), { prompt: () => answer });
  const document = { getElementById: (id: string) => ids.get(id) ?? null };
  const script = [...root.all()].find((e) => e.localName === 'script');
  assert.ok(script, 'the document has a script');
  new Function('document', 'window', 'location', 'history', script.textContent)(document, window, location, history);
  const byId = (id: string) => { const e = ids.get(`fg-${id}`); assert.ok(e, `#fg-${id}`); return e; };
  const frame = (stack: string) => {
    const names = stack === '' ? ['all'] : stack.split(';');
    const name = names[names.length - 1];
    const g = byId('frames').children.find((c) => c.children[0].textContent.startsWith(`${name} (`));
    assert.ok(g, `frame ${stack}`);
    return g;
  };
  return { root, byId, frame, location, window };
}

const rectOf = (g: El) => g.children.find((c) => c.localName === 'rect')!;
const widthOf = (g: El) => Number(rectOf(g).getAttribute('width'));
const hidden = (e: El) => e.classList.contains('fg-hidden');

// ---- Fixtures ----

const PIPELINE = new Map<string, number>([
  ['proxy', 40],
  ['response pipeline;wasm:redact;regex.eval', 30],
  ['response pipeline;wasm:redact', 10],
  ['request pipeline;wasm:auth', 100],
  ['request pipeline;wasm:cache;cache.lookup', 50],
  ['request pipeline;wasm:cache', 50],
  ['upstream;connection.acquire', 20],
  ['upstream', 300],
]); // total 600

const byStack = (l: FlameLayout) => new Map(l.frames.map((f) => [f.stack, f]));
const sumWithPrefix = (folded: Map<string, number>, stack: string) =>
  [...folded].filter(([s]) => s === stack || s.startsWith(`${stack};`)).reduce((a, [, v]) => a + v, 0);

// ---- Layout ----

test('layout: every stack and prefix is a frame, its width the sum of the stacks below it, children inside their parent', () => {
  const l = layoutFlameGraph(PIPELINE);
  assert.equal(l.total, 600);
  const frames = byStack(l);
  assert.equal(frames.get('')!.name, 'all');
  assert.equal(frames.get('')!.width, 600);
  for (const stack of PIPELINE.keys()) {
    const names = stack.split(';');
    for (let d = 1; d <= names.length; d++) {
      const prefix = names.slice(0, d).join(';');
      const f = frames.get(prefix);
      assert.ok(f, `frame ${prefix}`);
      assert.equal(f.depth, d);
      assert.equal(f.name, names[d - 1]);
      assert.equal(f.width, sumWithPrefix(PIPELINE, prefix));
    }
  }
  l.frames.forEach((f, i) => {
    if (f.parent < 0) { assert.equal(i, 0); return; }
    const p = l.frames[f.parent];
    assert.ok(f.parent < i, 'pre-order: parent first');
    assert.equal(f.depth, p.depth + 1);
    assert.ok(f.x >= p.x && f.x + f.width <= p.x + p.width + 1e-9, `${f.stack} inside ${p.stack}`);
    const kids = l.frames.filter((c) => c.parent === i);
    assert.equal(f.self, f.width - kids.reduce((a, c) => a + c.width, 0), `self time of ${f.stack}`);
    for (let k = 1; k < kids.length; k++) assert.equal(kids[k].x, kids[k - 1].x + kids[k - 1].width, 'siblings side by side');
  });
  assert.equal(frames.get('request pipeline;wasm:cache')!.self, 50);
  assert.equal(frames.get('upstream')!.self, 300);
  assert.equal(l.maxDepth, 3);
});

test('layout: top level in request order (request pipeline, upstream, response pipeline, proxy); steps keep input order', () => {
  const l = layoutFlameGraph(PIPELINE);
  assert.deepEqual(l.frames.filter((f) => f.depth === 1).map((f) => f.name), ['request pipeline', 'upstream', 'response pipeline', 'proxy']);
  assert.deepEqual(l.frames.filter((f) => f.depth === 2 && f.stack.startsWith('request')).map((f) => f.name), ['wasm:auth', 'wasm:cache']);
});

test('layout: min width hides frames narrower than the percentage, and everything inside them', () => {
  const folded = new Map([['a;b', 998.5], ['a;tiny;inner', 0.5], ['a;edge', 1]]); // total 1000
  const all = byStack(layoutFlameGraph(folded));
  assert.ok(all.has('a;tiny;inner'), 'min width 0: everything drawn');
  const l = byStack(layoutFlameGraph(folded, { minWidthPct: 0.1 }));
  assert.ok(!l.has('a;tiny') && !l.has('a;tiny;inner'), 'tiny (0.05%) hidden with its child');
  assert.ok(l.has('a;edge'), 'edge (exactly 0.1%) is not narrower, so drawn');
  assert.equal(l.get('a')!.width, 1000, 'a hidden child still counts in its parent');
  assert.equal(l.get('a')!.self, 0);
  const svg = renderFlameGraph(folded, { title: 't', minWidthPct: 0.1 });
  assert.ok(!svg.includes('>tiny') && !svg.includes('tiny ('));
});

test('layout: non-positive and non-finite values are ignored; an empty profile has no frames', () => {
  const l = layoutFlameGraph(new Map([['a', -5], ['b', NaN], ['c', Infinity], ['d', 0]]));
  assert.equal(l.total, 0);
  assert.deepEqual(l.frames, []);
});

test('layout of folded request frames: levels are top level → steps → sub-operations', () => {
  const frame = (over: Partial<RequestFrame>): RequestFrame => ({
    at: 0, pipelineId: 'p', variant: 'baseline', op: 'find', collection: 'c', totalNs: 1_000_000, acquireNs: 20_000,
    upstreamNs: 500_000, ok: true, weight: 1,
    steps: [
      { name: 'wasm:cache', phase: 0, ns: 200_000, subops: [{ name: 'cache.lookup', ns: 150_000 }], subCount: 1 },
      { name: 'wasm:redact', phase: 1, ns: 100_000, subops: [{ name: 'field.redact', ns: 60_000 }], subCount: 1 },
    ],
    ...over,
  });
  const folded = foldFrames([frame({}), frame({})]);
  const l = layoutFlameGraph(folded);
  const f = byStack(l);
  assert.equal(l.total, 2000);
  assert.deepEqual(l.frames.filter((x) => x.depth === 1).map((x) => x.name), ['request pipeline', 'upstream', 'response pipeline', 'proxy']);
  assert.equal(f.get('request pipeline;wasm:cache')!.width, 400);
  assert.equal(f.get('request pipeline;wasm:cache;cache.lookup')!.depth, 3);
  assert.equal(f.get('upstream;connection.acquire')!.width, 40);
  assert.equal(f.get('proxy')!.width, 2 * (1000 - 300 - 20 - 500));
});

test('a sampled frame counts for the requests it stands for: its weight scales every stack', () => {
  const frame = (weight: number): RequestFrame => ({
    at: 0, pipelineId: 'p', variant: 'baseline', op: 'find', collection: 'c', totalNs: 1_000_000, acquireNs: 0,
    upstreamNs: 600_000, ok: true, weight,
    steps: [{ name: 'wasm:cache', phase: 0, ns: 200_000, subops: [], subCount: 0 }],
  });
  const one = foldFrames([frame(1)]);
  const three = foldFrames([frame(3)]);
  for (const [stack, us] of one) assert.equal(three.get(stack), 3 * us, stack);
});

test('the frame ring samples above capacity per minute: a burst of capacity / 10 is kept whole, then frames carry the skipped requests as weight', () => {
  const ring = new FrameRing(1000);
  const timings = new RequestTimings();
  const r = { pipelineId: 'p', variant: 'baseline' as const, op: 'find', collection: 'c', totalNs: 1000, acquireNs: 0, upstreamNs: 500, ok: true, timings };
  let kept = 0;
  let skippedAtLastKept = 0;
  for (let i = 0; i < 5000; i++) {
    if (!ring.push(r)) continue;
    kept++;
    skippedAtLastKept = ring.skippedTotal;
  }
  // Within one millisecond or two only the burst (100) and the refill of that time (1000 per 60 s) are allowed.
  assert.ok(kept >= 100 && kept <= 110, `kept ${kept} of 5000`);
  assert.equal(ring.skippedTotal, 5000 - kept);
  const frames = ring.since(0, null, null);
  assert.equal(frames.length, kept);
  assert.ok(frames.slice(0, 100).every((f) => f.weight === 1), 'the burst: one request per frame');
  // The next kept frame stands for itself and every request skipped before it.
  const until = Date.now() + 200;
  while (!ring.push(r)) if (Date.now() > until) assert.fail('a token comes back within 200 ms (1000 per minute)');
  const last = ring.since(0, null, null).at(-1)!;
  assert.ok(ring.skippedTotal > skippedAtLastKept, 'requests were skipped since the previous kept frame');
  assert.equal(last.weight, 1 + ring.skippedTotal - skippedAtLastKept, 'weight = 1 + requests skipped since the previous kept frame');
});

test('the frame ring gives back each frame as recorded, across wrap-arounds, and drops the steps of a frame a later one overwrote', () => {
  // Capacity 2: the step ring holds 2 × 16 steps, the sub-operation ring 2 × 8.
  const ring = new FrameRing(2);
  const timer = (step: string, phase: 0 | 1) => ({ step, phase, record() {}, subop() {} });
  const [cacheReq, filter, cacheRes] = [timer('wasm:cache', 0), timer('wasm:filter', 0), timer('wasm:cache', 1)];
  const timings = (n: number, base: number): RequestTimings => {
    const t = new RequestTimings();
    for (let i = 0; i < n; i++) {
      if (i === 0) t.subop('cache.lookup', base + 0.5);
      if (i === n - 1) t.subop('cache.store', base + 0.25);
      t.step(i % 3 === 0 ? cacheReq : i % 3 === 1 ? filter : cacheRes, base + i, false);
    }
    return t;
  };
  const completed = (n: number, base: number, op: string) => ({
    pipelineId: 'p', variant: 'baseline' as const, op, collection: `c${base}`, totalNs: base * 10, acquireNs: base, upstreamNs: base * 2,
    ok: base % 2 === 0, timings: timings(n, base),
  });
  const check = (f: RequestFrame, n: number, base: number, op: string) => {
    assert.deepEqual([f.op, f.collection, f.totalNs, f.acquireNs, f.upstreamNs, f.ok, f.weight],
      [op, `c${base}`, base * 10, base, base * 2, base % 2 === 0, 1]);
    assert.deepEqual(f.steps.map((s) => [s.name, s.phase, s.ns]),
      Array.from({ length: n }, (_, i) => [i % 3 === 1 ? 'wasm:filter' : 'wasm:cache', i % 3 === 2 ? 1 : 0, base + i]));
    assert.deepEqual(f.steps[0]!.subops, [{ name: 'cache.lookup', ns: base + 0.5 }]);
    assert.deepEqual(f.steps[n - 1]!.subops.at(-1), { name: 'cache.store', ns: base + 0.25 });
  };
  // Frames of 7 steps and 2 sub-operations: the fifth and later wrap the step ring, the ninth the other.
  for (let k = 0; k < 7; k++) {
    ring.record(completed(7, 100 * k, `op${k}`));
    const frames = ring.since(0, null, null);
    assert.equal(frames.length, Math.min(k + 1, 2));
    check(frames.at(-1)!, 7, 100 * k, `op${k}`);
    if (k > 0) check(frames[0]!, 7, 100 * (k - 1), `op${k - 1}`);
  }
  // A frame of 30 steps overwrites most of its predecessor's steps: that one keeps its totals and
  // loses its steps; the new one is whole.
  ring.record(completed(30, 1000, 'big'));
  const [older, newer] = ring.since(0, null, null);
  assert.equal(older!.op, 'op6');
  assert.equal(older!.totalNs, 6000);
  assert.deepEqual(older!.steps, []);
  check(newer!, 30, 1000, 'big');
  // By graph.
  assert.equal(ring.since(0, 'p', 'baseline').length, 2);
  assert.equal(ring.since(0, 'q', null).length, 0);
  assert.equal(ring.since(0, null, 'candidate').length, 0);
});

// ---- Colours ----

function hsl(rgb: string): { h: number; s: number } {
  const m = /^rgb\((\d+),(\d+),(\d+)\)$/.exec(rgb);
  assert.ok(m, rgb);
  const [r, g, b] = [Number(m[1]) / 255, Number(m[2]) / 255, Number(m[3]) / 255];
  const max = Math.max(r, g, b), min = Math.min(r, g, b), d = max - min;
  if (d === 0) return { h: 0, s: 0 };
  const l = (max + min) / 2;
  const s = d / (1 - Math.abs(2 * l - 1));
  let h = max === r ? ((g - b) / d) % 6 : max === g ? (b - r) / d + 2 : (r - g) / d + 4;
  h *= 60;
  return { h: h < 0 ? h + 360 : h, s };
}

const CASES: [string[], string][] = [
  [[], 'idle'],
  [['request pipeline'], 'pipeline'],
  [['response pipeline'], 'pipeline'],
  [['request pipeline', 'wasm:auth'], 'pipeline'],
  [['request pipeline', 'wasm:queue_router'], 'pipeline'],
  [['upstream'], 'upstream'],
  [['upstream', 'connection.acquire'], 'upstream'],
  [['request pipeline', 'wasm:cache', 'cache.lookup'], 'cache'],
  [['response pipeline', 'wasm:cache', 'cache.store'], 'cache'],
  [['request pipeline', 'wasm:filter', 'bson.read'], 'serialisation'],
  [['request pipeline', 'wasm:transform', 'doc.deserialize'], 'serialisation'],
  [['response pipeline', 'wasm:x', 'reply.encode'], 'serialisation'],
  [['response pipeline', 'wasm:redact', 'regex.eval'], 'plugin'],
  [['response pipeline', 'wasm:redact', 'field.redact'], 'plugin'],
  [['proxy'], 'idle'],
  [['request pipeline', 'wasm:rate_limit', 'token.wait'], 'idle'],
];

const BANDS: Record<string, (c: { h: number; s: number }) => boolean> = {
  pipeline: (c) => c.s > 0.5 && c.h >= 0 && c.h <= 48,
  serialisation: (c) => c.s > 0.5 && c.h > 48 && c.h <= 66,
  cache: (c) => c.s > 0.3 && c.h >= 85 && c.h <= 160,
  upstream: (c) => c.s > 0.3 && c.h >= 195 && c.h <= 235,
  plugin: (c) => c.s > 0.3 && c.h >= 255 && c.h <= 310,
  idle: (c) => c.s < 0.05,
};

test('colours: category per SPEC §2.9 and a hue band per category, for any name', () => {
  for (const [path, cat] of CASES) {
    assert.equal(frameCategory(path), cat, path.join(';'));
    const c = hsl(frameColour(path));
    assert.ok(BANDS[cat](c), `${path.join(';')} → ${frameColour(path)} (h ${c.h.toFixed(0)}, s ${c.s.toFixed(2)}) in the ${cat} band`);
  }
  for (let i = 0; i < 300; i++) {
    for (const [path, cat] of CASES.filter(([p]) => p.length > 0)) {
      const p = [...path.slice(0, -1), path[path.length - 1] + i.toString(36)];
      if (frameCategory(p) !== cat) continue;
      assert.ok(BANDS[cat](hsl(frameColour(p))), `${p.join(';')} → ${frameColour(p)} in the ${cat} band`);
    }
  }
});

test('colours: deterministic per name, shades vary within a hue', () => {
  const a = frameColour(['request pipeline', 'wasm:auth']);
  assert.equal(frameColour(['request pipeline', 'wasm:auth']), a);
  assert.equal(frameColour(['response pipeline', 'wasm:auth']), a, 'same step, same colour in either phase');
  const shades = new Set(['auth', 'cache', 'filter', 'logging', 'metrics', 'route'].map((s) => frameColour(['request pipeline', `wasm:${s}`])));
  assert.ok(shades.size >= 5, `distinct shades: ${[...shades].join(' ')}`);
  assert.equal(renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0 }), renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0 }));
});

// ---- The SVG document ----

test('svg: well formed, unique ids, one <g> with <title>, <rect> and <text> per frame, widths proportional to values', () => {
  const svg = renderFlameGraph(PIPELINE, { title: 'Pipeline Proxy — p/baseline', minWidthPct: 0 });
  assert.ok(svg.startsWith('<?xml'));
  const root = parseXml(svg);
  assert.equal(root.localName, 'svg');
  assert.equal(root.getAttribute('xmlns'), 'http://www.w3.org/2000/svg');
  const ids = [...root.all()].map((e) => e.getAttribute('id')).filter((x) => x !== null);
  assert.equal(new Set(ids).size, ids.length, 'ids unique');
  for (const id of ['fg-title', 'fg-details', 'fg-unzoom', 'fg-search', 'fg-ic', 'fg-matched', 'fg-frames']) assert.ok(ids.includes(id), id);
  assert.equal([...root.all()].find((e) => e.getAttribute('id') === 'fg-title')!.textContent, 'Pipeline Proxy — p/baseline');
  assert.equal([...root.all()].find((e) => e.getAttribute('id') === 'fg-unzoom')!.textContent, 'Reset Zoom');
  const l = layoutFlameGraph(PIPELINE);
  const gs = [...root.all()].find((e) => e.getAttribute('id') === 'fg-frames')!.children;
  assert.equal(gs.length, l.frames.length);
  gs.forEach((g, i) => {
    const f = l.frames[i];
    assert.deepEqual(g.children.map((c) => c.localName), ['title', 'rect', 'text']);
    assert.equal(g.getAttribute('id'), `fg-f${i}`);
    assert.equal(g.getAttribute('data-p'), f.parent < 0 ? null : String(f.parent));
    const pct = ((100 * f.width) / 600).toFixed(2);
    assert.match(g.children[0].textContent, new RegExp(`^${f.name} \\([\\d,.]+ µs, ${pct.replace('.', '\\.')}%\\)$`));
    assert.ok(Math.abs(widthOf(g) - (1180 * f.width) / 600) < 0.01, `${f.stack} width`);
    assert.ok(Math.abs(Number(rectOf(g).getAttribute('x')) - (10 + (1180 * f.x) / 600)) < 0.01, `${f.stack} x`);
  });
  assert.equal(gs[0].children[0].textContent, 'all (600 µs, 100.00%)');
  const y = (stack: string) => Number(rectOf(gs[l.frames.findIndex((f) => f.stack === stack)]).getAttribute('y'));
  assert.ok(y('') > y('upstream') && y('upstream') > y('upstream;connection.acquire'), 'root at the bottom, children above');
});

test('svg: labels fit their frame and end in ".." when cut; tiny frames have none', () => {
  assert.equal(fitLabel('request pipeline', 1000), 'request pipeline');
  const cut = fitLabel('request pipeline', 60);
  assert.ok(cut.endsWith('..') && cut.length * 7.08 <= 60 - 6, cut);
  assert.equal(fitLabel('request pipeline', 20), '');
  const svg = renderFlameGraph(new Map([['a_rather_long_step_name', 10], ['b', 90]]), { title: 't', minWidthPct: 0 });
  assert.equal(fitLabel('a_rather_long_step_name', 118), 'a_rather_long..');
  assert.ok(svg.includes('>a_rather_long..</text>'));
});

test('svg: names and title with <, &, ", \' and control characters are escaped', () => {
  const nasty = `wasm:<b>&"x"'\u0001`;
  const svg = renderFlameGraph(new Map([[`request pipeline;${nasty}`, 10]]), { title: 'a <title> & "more"', minWidthPct: 0 });
  assert.ok(!svg.includes('<b>') && !svg.includes('&"'));
  const root = parseXml(svg);
  const g = [...root.all()].find((e) => e.localName === 'g' && e.children[0]?.textContent.startsWith('wasm:'))!;
  assert.ok(g.children[0].textContent.startsWith(`wasm:<b>&"x"'\ufffd (`));
  assert.equal(g.children[2].textContent, `wasm:<b>&"x"'\ufffd`);
  assert.equal([...root.all()].find((e) => e.getAttribute('id') === 'fg-title')!.textContent, 'a <title> & "more"');
});

test('svg: an empty profile is still a well-formed document saying so', () => {
  const svg = renderFlameGraph(new Map(), { title: 'empty', minWidthPct: 0.1 });
  assert.match(svg, /No samples in this window/);
  const page = load(svg);
  assert.equal(page.byId('frames').children.filter((c) => c.localName === 'g').length, 0);
});

test('svg: idPrefix renames every id; an invalid prefix is refused', () => {
  const svg = renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0, idPrefix: 'g2-' });
  const ids = [...parseXml(svg).all()].map((e) => e.getAttribute('id')).filter((x): x is string => x !== null);
  assert.ok(ids.every((id) => id.startsWith('g2-')), ids.join(' '));
  assert.throws(() => renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0, idPrefix: '"><x' }));
});

// ---- The script ----

test('script: present, parses, defines zoom, search, reset and URL state handling', () => {
  const svg = renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0 });
  const src = [...parseXml(svg).all()].find((e) => e.localName === 'script')!.textContent;
  assert.doesNotThrow(() => new Function(src));
  for (const fn of ['function zoom(', 'function resetZoom(', 'function search(', 'function clearSearch(', 'function saveUrl(', 'function ' +
    'restore(']) assert.ok(src.includes(fn), fn);
  for (const s of ['location.hash', 'history.replaceState', 'hashchange', "'Escape'", 'window.prompt']) assert.ok(src.includes(s), s);
});

test('script: click zooms (frame fills the width, ancestors dimmed, others hidden), the URL keeps it, Reset Zoom undoes it', () => {
  const page = load(renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0 }));
  const cache = page.frame('request pipeline;wasm:cache');
  page.frame('request pipeline;wasm:cache').children[2].fire('click'); // on the label, bubbles to the frame
  assert.equal(widthOf(cache), 1180);
  assert.equal(Number(rectOf(cache).getAttribute('x')), 10);
  assert.ok(Math.abs(widthOf(page.frame('request pipeline;wasm:cache;cache.lookup')) - 590) <= 0.01);
  assert.ok(page.frame('request pipeline').classList.contains('fg-dim'));
  assert.ok(page.frame('').classList.contains('fg-dim'));
  assert.equal(widthOf(page.frame('request pipeline')), 1180);
  assert.ok(hidden(page.frame('upstream')) && hidden(page.frame('request pipeline;wasm:auth')));
  assert.ok(!hidden(page.byId('unzoom')));
  assert.equal(page.location.hash, '#x=request%20pipeline%3Bwasm%3Acache');
  page.byId('unzoom').fire('click');
  assert.ok(Math.abs(widthOf(cache) - (1180 * 100) / 600) < 0.01);
  assert.ok(!hidden(page.frame('upstream')) && !page.frame('').classList.contains('fg-dim'));
  assert.ok(hidden(page.byId('unzoom')));
  assert.equal(page.location.hash, '');
});

test('script: hover writes the frame into the details line', () => {
  const page = load(renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0 }));
  rectOf(page.frame('upstream')).fire('mouseover');
  assert.equal(page.byId('details').textContent, 'upstream (320 µs, 53.33%)');
  rectOf(page.frame('upstream')).fire('mouseout');
  assert.equal(page.byId('details').textContent.trim(), '');
});

test('script: search highlights matches, "Matched" counts nested matches once, Escape clears, the URL keeps it', () => {
  const page = load(renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0 }), {}, 'cache');
  const lookup = page.frame('request pipeline;wasm:cache;cache.lookup');
  const before = rectOf(lookup).getAttribute('fill');
  page.byId('search').fire('click');
  assert.equal(page.byId('matched').textContent, `Matched: ${((100 * 100) / 600).toFixed(2)}%`, 'wasm:cache (100) contains cache.lookup');
  assert.ok(!hidden(page.byId('matched')));
  assert.equal(rectOf(lookup).getAttribute('fill'), 'rgb(230,0,230)');
  assert.equal(rectOf(page.frame('request pipeline;wasm:cache')).getAttribute('fill'), 'rgb(230,0,230)');
  assert.notEqual(rectOf(page.frame('upstream')).getAttribute('fill'), 'rgb(230,0,230)');
  assert.equal(page.location.hash, '#s=cache');
  page.window.fire('keydown', { key: 'Escape' });
  assert.equal(rectOf(lookup).getAttribute('fill'), before);
  assert.ok(hidden(page.byId('matched')));
  assert.equal(page.location.hash, '');
  page.window.prompt = () => '^wasm:';
  page.window.fire('keydown', { key: 'f', ctrlKey: true });
  assert.equal(page.byId('matched').textContent, 'Matched: 40.00%', 'wasm:auth + wasm:cache + wasm:redact = 240 of 600');
  page.window.prompt = () => '^WASM:';
  page.byId('search').fire('click');
  assert.equal(page.byId('matched').textContent, 'Matched: 0.00%', 'case-sensitive by default');
  page.byId('ic').fire('click');
  assert.equal(page.byId('matched').textContent, 'Matched: 40.00%', 'ic re-runs the search ignoring case');
  assert.equal(page.location.hash, '#s=%5EWASM%3A&i=1');
});

test('script: zoom and search are restored from the URL hash, or from the query string without a hash', () => {
  const svg = renderFlameGraph(PIPELINE, { title: 't', minWidthPct: 0 });
  const page = load(svg, { hash: '#x=upstream&s=CACHE&i=1' });
  assert.equal(widthOf(page.frame('upstream')), 1180);
  assert.ok(hidden(page.frame('request pipeline')));
  assert.equal(page.byId('matched').textContent, 'Matched: 16.67%');
  assert.equal(page.location.hash, '#x=upstream&s=CACHE&i=1', 'restoring leaves the URL as it was');
  const q = load(svg, { search: '?duration=60s&s=auth&title=x' });
  assert.equal(q.byId('matched').textContent, 'Matched: 16.67%');
  const bad = load(svg, { hash: '#x=no%20such%20frame&s=(' });
  assert.ok(hidden(bad.byId('unzoom')), 'unknown frame: not zoomed');
  assert.match(bad.byId('details').textContent, /Invalid regular expression/);
});

// ---- Differential ----

const BEFORE = new Map([['a;grew', 100], ['a;shrank', 100], ['same', 100], ['gone', 50]]);
const AFTER = new Map([['a;grew', 200], ['a;shrank', 50], ['same', 100], ['new', 10]]);

test('diff layout: widths from after, before/after/delta per frame, largest delta as the scale', () => {
  const l = layoutDiffFlameGraph(BEFORE, AFTER);
  const f = new Map(l.frames.map((x) => [x.stack, x]));
  assert.equal(l.total, 360);
  assert.ok(!f.has('gone'), 'a stack only in before has no width');
  assert.deepEqual([f.get('a;grew')!.before, f.get('a;grew')!.after, f.get('a;grew')!.delta], [100, 200, 100]);
  assert.equal(f.get('a;shrank')!.delta, -50);
  assert.equal(f.get('a')!.delta, 50);
  assert.equal(f.get('same')!.delta, 0);
  assert.equal(f.get('new')!.before, 0);
  assert.equal(l.maxDelta, 100);
  assert.equal(l.scale, 1);
});

test('diff colours: red grew, blue shrank, white unchanged, intensity scaled by the largest delta', () => {
  assert.equal(diffColour(100, 100), 'rgb(255,40,40)');
  assert.equal(diffColour(-100, 100), 'rgb(40,40,255)');
  assert.equal(diffColour(0, 100), 'rgb(255,255,255)');
  const half = /rgb\((\d+),(\d+),255\)/.exec(diffColour(-50, 100))!;
  assert.ok(Number(half[1]) > 40 && Number(half[1]) < 255);
  const root = parseXml(renderDiffFlameGraph(BEFORE, AFTER, { title: 'diff', minWidthPct: 0 }));
  const fill = (name: string) => {
    const g = [...root.all()].find((e) => e.localName === 'g' && e.children[0]?.textContent.startsWith(`${name} (`))!;
    return { fill: rectOf(g).getAttribute('fill'), tip: g.children[0].textContent };
  };
  assert.equal(fill('grew').fill, 'rgb(255,40,40)');
  assert.match(fill('shrank').fill!, /^rgb\((\d+),\1,255\)$/);
  assert.equal(fill('same').fill, 'rgb(255,255,255)');
  assert.equal(fill('grew').tip, 'grew (before 100 µs, after 200 µs, +100.0%; 55.56% of after)');
  assert.equal(fill('shrank').tip, 'shrank (before 100 µs, after 50 µs, -50.0%; 13.89% of after)');
  assert.match(fill('new').tip, /before 0 µs, after 10 µs, new/);
  assert.ok([...root.all()].some((e) => e.localName === 'script'));
});

test('diff: normalise scales before to after\'s total; widths from before show vanished stacks', () => {
  const n = layoutDiffFlameGraph(BEFORE, AFTER, { normalize: true });
  assert.ok(Math.abs(n.scale - 360 / 350) < 1e-12);
  const same = n.frames.find((f) => f.stack === 'same')!;
  assert.ok(Math.abs(same.before - (100 * 360) / 350) < 1e-9 && same.delta < 0, 'same µs, smaller share');
  assert.ok(Math.abs(n.frames[0].delta) < 1e-9, 'root unchanged after normalising');
  const svg = renderDiffFlameGraph(BEFORE, AFTER, { title: 'd', minWidthPct: 0, normalize: true });
  assert.match(parseXml(svg).children.find((e) => e.getAttribute('id') === 'fg-subtitle')!.textContent, /Before normalised to after's total \(×1\.03\)/);
  const neg = layoutDiffFlameGraph(BEFORE, AFTER, { widthsFrom: 'before' });
  const gone = neg.frames.find((f) => f.stack === 'gone')!;
  assert.deepEqual([gone.before, gone.after, gone.delta], [50, 0, -50]);
  assert.equal(neg.total, 350);
  const page = load(renderDiffFlameGraph(BEFORE, AFTER, { title: 'd', minWidthPct: 0, widthsFrom: 'before' }));
  assert.match(page.frame('gone').children[0].textContent, /-100\.0%; .* of before\)$/);
  assert.match(rectOf(page.frame('gone')).getAttribute('fill')!, /,255\)$/);
});
