// The interactive flame graph (SPEC §2.9): folded stacks (`a;b;c` → µs, see folded.ts) → one
// standalone `image/svg+xml` document, in the manner of flamegraph.pl and inferno (the facts, not
// their code). Width is proportional to time; the root `all` is at the bottom and stacks grow
// upward (flamegraph.pl's default). The document carries its own script: hover shows a frame in
// the details line, click zooms, "Search" highlights a regular expression and shows "Matched: x%",
// Escape clears; zoom and search live in the URL hash (`#x=<stack>&s=<regex>&i=1`) and are restored
// on load. The script runs when the SVG is opened directly or in an <iframe>/<object>, not through
// <img>. Every id starts with `idPrefix`, so two graphs inlined in one page do not clash.
//
// layoutFlameGraph is the pure part (frames with x, width, depth), so tests check structure
// without parsing SVG; flamegraph-diff.ts reuses the tree, the layout and the document.
import { createHash } from 'node:crypto';
import { TOP_PROXY, TOP_REQUEST, TOP_RESPONSE, TOP_UPSTREAM } from './folded.ts';

/** Image width in pixels when the options give none. */
const DEFAULT_WIDTH = 1200;

export interface FlameGraphOptions {
  title: string;
  /** Frames narrower than this percentage of the total are not drawn (nor their children). */
  minWidthPct: number;
  subtitle?: string;
  /** Image width in pixels (default 1200). */
  width?: number;
  /** Prefix of every element id and class (default "fg-"). */
  idPrefix?: string;
}

export interface FlameFrame {
  name: string;
  /** Names from the top level down to this frame, joined by ";" ("" for the root). */
  stack: string;
  /** 0 for the root `all`, 1 for the top level (request pipeline, upstream, …), 2 for steps, … */
  depth: number;
  /** Index of the parent in `frames`; -1 for the root. */
  parent: number;
  /** Left edge, µs from the left of the graph. */
  x: number;
  /** The frame's value, µs: its own time plus its children's (hidden ones included). */
  width: number;
  /** The frame's own time, µs (its own folded line). */
  self: number;
}

export interface FlameLayout {
  /** Sum of every stack's value, µs (the root's width). */
  total: number;
  /** Visible frames in pre-order: a parent precedes its children, which follow contiguously. */
  frames: FlameFrame[];
  maxDepth: number;
}

/** One node of the merged stack tree. `other` is the compared profile's value (diff only). */
export interface StackNode {
  name: string;
  self: number;
  total: number;
  other: number;
  children: Map<string, StackNode>;
}

const ROOT = 'all';
/** Top-level frames in the order a request meets them (SPEC §2.9); other names follow in input order. */
const TOP_ORDER = [TOP_REQUEST, TOP_UPSTREAM, TOP_RESPONSE, TOP_PROXY];

function newNode(name: string): StackNode {
  return { name, self: 0, total: 0, other: 0, children: new Map() };
}

const usable = (v: number): boolean => Number.isFinite(v) && v > 0;

/** Merges stacks into a tree. Siblings keep first-seen order (a pipeline's run order). */
export function buildStackTree(folded: ReadonlyMap<string, number>): StackNode {
  const root = newNode(ROOT);
  for (const [stack, value] of folded) {
    if (!usable(value)) continue;
    let node = root;
    node.total += value;
    if (stack !== '') {
      for (const name of stack.split(';')) {
        let child = node.children.get(name);
        if (child === undefined) {
          child = newNode(name);
          node.children.set(name, child);
        }
        node = child;
        node.total += value;
      }
    }
    node.self += value;
  }
  return root;
}

/** Adds a second profile's values to the nodes `tree` has; stacks it lacks are not drawn. */
export function addOther(tree: StackNode, folded: ReadonlyMap<string, number>): void {
  for (const [stack, value] of folded) {
    if (!usable(value)) continue;
    let node: StackNode | undefined = tree;
    node.other += value;
    if (stack === '') continue;
    for (const name of stack.split(';')) {
      node = node.children.get(name);
      if (node === undefined) break;
      node.other += value;
    }
  }
}

function orderedChildren(node: StackNode, depth: number): StackNode[] {
  const list = [...node.children.values()];
  if (depth !== 0) return list;
  const rank = (n: StackNode) => {
    const i = TOP_ORDER.indexOf(n.name);
    return i < 0 ? TOP_ORDER.length : i;
  };
  return list.sort((a, b) => rank(a) - rank(b)); // stable: unknown names keep input order
}

/** Lays a tree out; `nodes[i]` is the tree node of `frames[i]`. */
export function layoutStackTree(root: StackNode, minWidthPct: number): { layout: FlameLayout; nodes: StackNode[] } {
  const total = root.total;
  const frames: FlameFrame[] = [];
  const nodes: StackNode[] = [];
  const minUs = (total * Math.max(0, minWidthPct)) / 100;
  let maxDepth = 0;
  const visit = (node: StackNode, stack: string, depth: number, parent: number, x: number) => {
    const index = frames.length;
    frames.push({ name: node.name, stack, depth, parent, x, width: node.total, self: node.self });
    nodes.push(node);
    if (depth > maxDepth) maxDepth = depth;
    let cx = x;
    for (const child of orderedChildren(node, depth)) {
      if (child.total >= minUs) visit(child, depth === 0 ? child.name : `${stack};${child.name}`, depth + 1, index, cx);
      cx += child.total;
    }
  };
  if (total > 0) visit(root, '', 0, -1, 0);
  return { layout: { total, frames, maxDepth }, nodes };
}

/** The flame graph's geometry in µs, without drawing it. */
export function layoutFlameGraph(folded: ReadonlyMap<string, number>, opts: { minWidthPct?: number } = {}): FlameLayout {
  return layoutStackTree(buildStackTree(folded), opts.minWidthPct ?? 0).layout;
}

// ---- Colours (SPEC §2.9): a hue family per category, the shade from a hash of the name ----

export type FrameCategory = 'pipeline' | 'upstream' | 'cache' | 'plugin' | 'serialisation' | 'idle';

const SERIALISATION = /seriali[sz]|encod|decod/i;
const WAITING = /wait|idle|queue|sleep/i;

/** The category of the frame at `path` (names from the top level down; [] is the root). */
export function frameCategory(path: readonly string[]): FrameCategory {
  if (path.length === 0) return 'idle';
  const name = path[path.length - 1];
  const top = path[0];
  if (name.startsWith('wasm:')) return 'pipeline';
  if (path.length === 1 && (name === TOP_REQUEST || name === TOP_RESPONSE)) return 'pipeline';
  if (name.startsWith('cache.')) return 'cache';
  if (name.startsWith('bson.') || SERIALISATION.test(name)) return 'serialisation';
  if (top === TOP_UPSTREAM || name.startsWith('upstream.') || name.startsWith('connection.')) return 'upstream';
  if ((path.length === 1 && name === TOP_PROXY) || WAITING.test(name)) return 'idle';
  if (path.some((p) => p.startsWith('wasm:'))) return 'plugin';
  return path.length === 1 ? 'idle' : 'pipeline';
}

/** FNV-1a, 32 bits: a stable hash, so a name has the same shade in every graph. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** `rgb(r,g,b)` for the frame at `path`; each family stays inside its hue band whatever the hash. */
export function frameColour(path: readonly string[]): string {
  const h = hash32(path.length === 0 ? ROOT : path[path.length - 1]);
  const v1 = (h & 0xff) / 255;
  const v2 = ((h >>> 8) & 0xff) / 255;
  const v3 = ((h >>> 16) & 0xff) / 255;
  let rgb: [number, number, number];
  switch (frameCategory(path)) {
    case 'pipeline': rgb = [215 + 40 * v3, 50 + 110 * v1, 30 * v2]; break; // hue 5°..45°
    case 'upstream': rgb = [70 + 50 * v1, 110 + 60 * v1, 200 + 55 * v2]; break; // ~205°..225°
    case 'cache': rgb = [50 + 50 * v1, 170 + 60 * v2, 60 + 50 * v3]; break; // ~95°..150°
    case 'plugin': rgb = [150 + 50 * v1, 90 + 30 * v2, 200 + 55 * v1]; break; // ~265°..300°
    case 'serialisation': rgb = [215 + 35 * v1, 200 + 35 * v1, 40 + 40 * v2]; break; // ~52°..56°
    case 'idle': { const g = 165 + 55 * v1; rgb = [g, g, g]; break; }
  }
  return `rgb(${Math.round(rgb[0])},${Math.round(rgb[1])},${Math.round(rgb[2])})`;
}

// ---- The document ----

const FONT_SIZE = 12;
const FRAME_HEIGHT = 16;
/** Average glyph width of Verdana as a fraction of the font size (flamegraph.pl's estimate). */
const CHAR_WIDTH = FONT_SIZE * 0.59;
const PAD = 10;
const HIGHLIGHT = 'rgb(230,0,230)';

/** A frame's label: the name, or as much as fits followed by "..", or nothing below 3 characters. */
export function fitLabel(name: string, widthPx: number): string {
  const chars = Math.floor((widthPx - 6) / CHAR_WIDTH);
  if (chars < 3) return '';
  return name.length <= chars ? name : `${name.slice(0, chars - 2)}..`;
}

// Characters XML 1.0 forbids (controls, lone surrogates, U+FFFE/U+FFFF) would make the document unreadable.
// eslint-disable-next-line no-control-regex -- matching the control characters is the point
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Escapes text for XML content and attribute values. */
export function xmlEscape(s: string): string {
  return s.replace(NOT_XML, '\ufffd').replace(/[&<>"']/g, (c) =>
    c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&apos;');
}

export function formatUs(us: number): string {
  const digits = us >= 1000 ? 0 : us >= 10 ? 1 : 2;
  return `${us.toLocaleString('en-US', { maximumFractionDigits: digits })} µs`;
}

export function formatPct(part: number, whole: number): string {
  return `${whole > 0 ? ((100 * part) / whole).toFixed(2) : '0.00'}%`;
}

/** Per-frame paint of a document: the fill, and a tooltip that must read "name (…)". */
export interface FramePaint {
  fill(index: number): string;
  tooltip(index: number): string;
}

export interface DocumentOptions {
  title: string;
  subtitle?: string;
  width?: number;
  idPrefix?: string;
  background: [string, string];
}

function prefixOf(p: string | undefined): string {
  const prefix = p ?? 'fg-';
  if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(prefix)) throw new Error(`idPrefix must be an XML name, got "${prefix}"`);
  return prefix;
}

/** The whole SVG document for a layout. */
export function flameGraphDocument(layout: FlameLayout, o: DocumentOptions, paint: FramePaint): string {
  const P = prefixOf(o.idPrefix);
  const W = Math.max(200, Math.round(o.width ?? DEFAULT_WIDTH));
  const top = o.subtitle === undefined ? FONT_SIZE * 3 : FONT_SIZE * 4.5;
  const frameArea = layout.frames.length === 0 ? FRAME_HEIGHT * 2 : (layout.maxDepth + 1) * FRAME_HEIGHT;
  const H = Math.round(top + frameArea + FONT_SIZE * 2 + 10);
  const scale = layout.total > 0 ? (W - 2 * PAD) / layout.total : 0;
  const out: string[] = [];
  out.push(
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
    `<svg id="${P}svg" version="1.1" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">`,
    `<title>${xmlEscape(o.title)}</title>`,
    `<defs><linearGradient id="${P}bg" x1="0" y1="0" x2="0" y2="1"><stop stop-color="${o.background[0]}" offset="5%"/><stop ` +
      `stop-color="${o.background[1]}" offset="95%"/></linearGradient></defs>`,
    `<style type="text/css">#${P}svg text { font-family: Verdana, sans-serif; font-size: ${FONT_SIZE}px; fill: rgb(0,0,0) }` +
      ` #${P}title { font-size: 17px } .${P}button { cursor: pointer } .${P}button:hover { text-decoration: underline }` +
      ` .${P}off { opacity: 0.4 } .${P}on { font-weight: bold } .${P}hidden { display: none } .${P}dim { opacity: 0.5 }` +
      ` #${P}frames > g { cursor: pointer } #${P}frames > g:hover > rect { stroke: rgb(0,0,0); stroke-width: 0.5 }</style>`,
    `<rect x="0" y="0" width="${W}" height="${H}" fill="url(#${P}bg)"/>`,
    `<text id="${P}title" x="${W / 2}" y="24" text-anchor="middle">${xmlEscape(o.title)}</text>`,
  );
  if (o.subtitle !== undefined) {
    out.push(`<text id="${P}subtitle" x="${W / 2}" y="42" text-anchor="middle">${xmlEscape(o.subtitle)}</text>`);
  }
  out.push(
    `<text id="${P}unzoom" class="${P}button ${P}hidden" x="${PAD}" y="24">Reset Zoom</text>`,
    `<text id="${P}search" class="${P}button" x="${W - PAD - 110}" y="24">Search</text>`,
    `<text id="${P}ic" class="${P}button ${P}off" x="${W - PAD - 16}" y="24">ic</text>`,
    `<text id="${P}details" x="${PAD}" y="${H - 12}"> </text>`,
    `<text id="${P}matched" class="${P}hidden" x="${W - PAD}" y="${H - 12}" text-anchor="end"> </text>`,
    `<g id="${P}frames">`,
  );
  if (layout.frames.length === 0) {
    out.push(`<text x="${W / 2}" y="${top + FRAME_HEIGHT}" text-anchor="middle">No samples in this window</text>`);
  }
  const bottom = top + (layout.maxDepth + 1) * FRAME_HEIGHT;
  // Four decimals: the script zooms from these numbers, so their rounding is magnified by the zoom.
  const num = (v: number) => String(+v.toFixed(4));
  layout.frames.forEach((f, i) => {
    const x = PAD + f.x * scale;
    const w = f.width * scale;
    const y = bottom - (f.depth + 1) * FRAME_HEIGHT;
    const parent = f.parent < 0 ? '' : ` data-p="${f.parent}"`;
    out.push(
      `<g id="${P}f${i}"${parent}><title>${xmlEscape(paint.tooltip(i))}</title>` +
        `<rect x="${num(x)}" y="${y}" width="${num(w)}" height="${FRAME_HEIGHT - 1}" rx="2" ry="2" fill="${paint.fill(i)}"/>` +
        `<text x="${num(x + 3)}" y="${y + FRAME_HEIGHT - 4.5}">${xmlEscape(fitLabel(f.name, w))}</text></g>`,
    );
  });
  out.push('</g>', `<script type="text/ecmascript"><![CDATA[${script(P, W)}]]></script>`, '</svg>', '');
  return out.join('\n');
}

/** The flame graph of `folded` (µs per stack) as a standalone SVG document. */
export function renderFlameGraph(folded: ReadonlyMap<string, number>, opts: FlameGraphOptions): string {
  const { layout } = layoutStackTree(buildStackTree(folded), opts.minWidthPct);
  const paths = layout.frames.map((f) => (f.depth === 0 ? [] : f.stack.split(';')));
  return flameGraphDocument(layout, { ...opts, background: ['#eeeeee', '#eeeeb0'] }, {
    fill: (i) => frameColour(paths[i]),
    tooltip: (i) => {
      const f = layout.frames[i];
      return `${f.name} (${formatUs(f.width)}, ${formatPct(f.width, layout.total)})`;
    },
  });
}

/**
 * The CSP source (`'sha256-…'`) of the script a document with the default id prefix and width
 * embeds, the one /api/profile/flamegraph serves: the dashboard's Content-Security-Policy allows
 * that script alone to run in the flame graph's frame (a blob: document inherits the page's policy).
 */
export function defaultScriptHashSource(): string {
  return `'sha256-${createHash('sha256').update(script(prefixOf(undefined), DEFAULT_WIDTH)).digest('base64')}'`;
}

/**
 * The embedded script. Frames are read back from the document (pre-order, `data-p` = parent
 * index), so the data lives in one place. `fit` mirrors fitLabel above. Plain ES2015 inside one
 * function scope: no globals, so two inlined graphs do not clash.
 */
function script(P: string, W: number): string {
  return `
(function () {
  'use strict';
  var P = ${JSON.stringify(P)}, W = ${W}, PAD = ${PAD}, CW = ${CHAR_WIDTH}, HL = ${JSON.stringify(HIGHLIGHT)};
  function byId(id) { return document.getElementById(P + id); }
  var framesG = byId('frames'), details = byId('details'), unzoomBtn = byId('unzoom');
  var searchBtn = byId('search'), icBtn = byId('ic'), matchedText = byId('matched');
  var gs = [], rects = [], texts = [], titles = [], names = [], ox = [], ow = [], parent = [], end = [], fills = [], path = [];
  var n = 0, zoomed = 0, term = '', ignoreCase = false, restoring = false;

  function part(g, tag) {
    for (var i = 0; i < g.children.length; i++) if (g.children[i].localName === tag) return g.children[i];
    return null;
  }
  function fit(name, w) {
    var c = Math.floor((w - 6) / CW);
    if (c < 3) return '';
    return name.length <= c ? name : name.slice(0, c - 2) + '..';
  }
  function show(el, on) { if (on) el.classList.remove(P + 'hidden'); else el.classList.add(P + 'hidden'); }
  function place(k, x, w) {
    rects[k].setAttribute('x', x.toFixed(2));
    rects[k].setAttribute('width', w.toFixed(2));
    texts[k].setAttribute('x', (x + 3).toFixed(2));
    texts[k].textContent = fit(names[k], w);
  }

  function zoom(i) {
    if (!(i > 0 && i < n)) { resetZoom(); return; }
    zoomed = i;
    var ancestor = {};
    for (var a = parent[i]; a >= 0; a = parent[a]) ancestor[a] = true;
    var scale = (W - 2 * PAD) / ow[i];
    for (var k = 0; k < n; k++) {
      if (k >= i && k <= end[i]) {
        place(k, PAD + (ox[k] - ox[i]) * scale, ow[k] * scale);
        show(gs[k], true);
        gs[k].classList.remove(P + 'dim');
      } else if (ancestor[k]) {
        place(k, PAD, W - 2 * PAD);
        show(gs[k], true);
        gs[k].classList.add(P + 'dim');
      } else {
        show(gs[k], false);
      }
    }
    show(unzoomBtn, true);
    saveUrl();
  }
  function resetZoom() {
    zoomed = 0;
    for (var k = 0; k < n; k++) {
      place(k, ox[k], ow[k]);
      show(gs[k], true);
      gs[k].classList.remove(P + 'dim');
    }
    show(unzoomBtn, false);
    saveUrl();
  }

  function clearSearch() {
    term = '';
    for (var k = 0; k < n; k++) rects[k].setAttribute('fill', fills[k]);
    show(matchedText, false);
    searchBtn.classList.remove(P + 'on');
    saveUrl();
  }
  // Matched share of the total: a match inside a matched frame is already counted (pre-order:
  // a frame's descendants are k+1..end[k]).
  function search(t, ic) {
    var re;
    try { re = new RegExp(t, ic ? 'i' : ''); } catch (e) { details.textContent = 'Invalid regular expression: ' + t; return; }
    term = t;
    var sum = 0, counted = 0;
    for (var k = 0; k < n; k++) {
      var hit = k > 0 && re.test(names[k]);
      rects[k].setAttribute('fill', hit ? HL : fills[k]);
      if (hit && k > counted) { sum += ow[k]; counted = end[k]; }
    }
    matchedText.textContent = 'Matched: ' + (n > 0 ? (100 * sum / ow[0]).toFixed(2) : '0.00') + '%';
    show(matchedText, true);
    searchBtn.classList.add(P + 'on');
    saveUrl();
  }
  function askSearch() {
    var t = window.prompt('Search for (regular expression' + (ignoreCase ? ', ignoring case' : '') + '):', term);
    if (t === null) return;
    if (t === '') clearSearch(); else search(t, ignoreCase);
  }
  function toggleIgnoreCase() {
    setIgnoreCase(!ignoreCase);
    if (term) search(term, ignoreCase); else saveUrl();
  }
  function setIgnoreCase(on) {
    ignoreCase = on;
    if (on) { icBtn.classList.remove(P + 'off'); icBtn.classList.add(P + 'on'); }
    else { icBtn.classList.remove(P + 'on'); icBtn.classList.add(P + 'off'); }
  }

  // URL state: #x=<stack of the zoomed frame>&s=<regex>&i=1. The stack (not the element id)
  // names the frame, so a link still zooms the same frame after the graph is fetched again.
  function stateHash() {
    var p = [];
    if (zoomed > 0) p.push('x=' + encodeURIComponent(path[zoomed]));
    if (term) p.push('s=' + encodeURIComponent(term));
    if (ignoreCase) p.push('i=1');
    return p.length ? '#' + p.join('&') : '';
  }
  function saveUrl() {
    if (restoring) return;
    var h = stateHash();
    if (h === (location.hash === '#' ? '' : location.hash)) return;
    try { history.replaceState(history.state, '', h || location.pathname + location.search); }
    catch (e) { location.hash = h; }
  }
  // The hash wins; without one, x, s and i are read from the query string.
  function readUrl() {
    var st = {}, src = location.hash.length > 1 ? location.hash : location.search;
    src.replace(/^[?#]/, '').split('&').forEach(function (kv) {
      var j = kv.indexOf('='), k = j < 0 ? kv : kv.slice(0, j);
      if (k !== 'x' && k !== 's' && k !== 'i') return;
      try { st[k] = j < 0 ? '' : decodeURIComponent(kv.slice(j + 1).replace(/[+]/g, ' ')); } catch (e) { /* malformed escape: ignore the key */ }
    });
    return st;
  }
  function restore() {
    var st = readUrl();
    restoring = true;
    setIgnoreCase(st.i === '1' || st.i === 'true');
    var k = st.x ? path.indexOf(st.x) : -1;
    if (k > 0) zoom(k); else if (zoomed) resetZoom();
    if (st.s) search(st.s, ignoreCase); else if (term) clearSearch();
    restoring = false;
  }

  function frameOf(t) {
    while (t && t.parentNode !== framesG) t = t.parentNode;
    var id = t ? t.getAttribute('id') : null;
    return id ? +id.slice(P.length + 1) : -1;
  }
  function init() {
    var list = framesG.children;
    for (var i = 0; i < list.length; i++) {
      var g = list[i];
      if (g.localName !== 'g') continue;
      var k = n++, title = part(g, 'title').textContent;
      gs.push(g); rects.push(part(g, 'rect')); texts.push(part(g, 'text')); titles.push(title);
      names.push(title.slice(0, title.lastIndexOf(' (')));
      ox.push(+rects[k].getAttribute('x')); ow.push(+rects[k].getAttribute('width'));
      fills.push(rects[k].getAttribute('fill'));
      var p = g.hasAttribute('data-p') ? +g.getAttribute('data-p') : -1;
      parent.push(p); end.push(k);
      path.push(p < 0 ? '' : p === 0 ? names[k] : path[p] + ';' + names[k]);
    }
    for (var j = n - 1; j > 0; j--) if (end[j] > end[parent[j]]) end[parent[j]] = end[j];
    framesG.addEventListener('click', function (e) { var k = frameOf(e.target); if (k >= 0) zoom(k); });
    framesG.addEventListener('mouseover', function (e) { var k = frameOf(e.target); if (k >= 0) details.textContent = titles[k]; });
    framesG.addEventListener('mouseout', function () { details.textContent = ' '; });
    unzoomBtn.addEventListener('click', function () { resetZoom(); });
    searchBtn.addEventListener('click', askSearch);
    icBtn.addEventListener('click', toggleIgnoreCase);
    window.addEventListener('keydown', function (e) {
      if (e.key === 'Escape') {
        if (term) clearSearch(); else if (zoomed) resetZoom();
      } else if (((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) || e.key === '/') {
        e.preventDefault();
        askSearch();
      }
    });
    window.addEventListener('hashchange', restore);
    restore();
  }
  init();
})();
`;
}
