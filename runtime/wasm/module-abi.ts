// What a core module imports and exports, read from its binary (type, import, function, global and
// export sections; code is skipped), and the check of that against the ABI (abi-spec.ts). Run at
// load before anything is instantiated, so a plugin built for another ABI is refused with both
// versions named instead of failing later with a LinkError or, worse, calling a host function
// with arguments of another meaning. Byte layout: https://webassembly.github.io/spec/core/binary/modules.html
import {
  ABI_VERSION, ABI_VERSION_EXPORT, IMPORT_MODULE, HOST_FUNCTIONS, CORE_EXPORTS, wasmType, type CoreType,
} from './abi-spec.ts';
import { PluginLoadError } from './errors.ts';

export type ValType = 'i32' | 'i64' | 'f32' | 'f64' | 'v128' | 'funcref' | 'externref';
export interface FuncType { readonly params: readonly ValType[]; readonly results: readonly ValType[] }

export interface ModuleImport {
  readonly module: string;
  readonly name: string;
  readonly kind: 'function' | 'table' | 'memory' | 'global' | 'tag';
  /** Functions only. */
  readonly type: FuncType | null;
}

export interface ModuleExport {
  readonly name: string;
  readonly kind: 'function' | 'table' | 'memory' | 'global' | 'tag';
  /** Functions only. */
  readonly type: FuncType | null;
  /** Globals defined by the module with a constant i32 initialiser: that value. */
  readonly i32: number | null;
}

export interface ModuleInterface {
  readonly imports: readonly ModuleImport[];
  readonly exports: readonly ModuleExport[];
}

const KINDS = ['function', 'table', 'memory', 'global', 'tag'] as const;
const VALTYPES: Record<number, ValType> = { 0x7f: 'i32', 0x7e: 'i64', 0x7d: 'f32', 0x7c: 'f64', 0x7b: 'v128', 0x70: 'funcref', 0x6f: 'externref' };

class Reader {
  pos: number;
  constructor(readonly b: Uint8Array, pos = 0) { this.pos = pos; }
  u8(): number {
    if (this.pos >= this.b.length) throw new RangeError('unexpected end of module');
    return this.b[this.pos++]!;
  }
  u32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = this.u8();
      result |= (byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result >>> 0;
      shift += 7;
      if (shift > 28) throw new RangeError('LEB128 too long');
    }
  }
  /** A signed LEB128 up to 32 bits (i32.const). */
  s32(): number {
    let result = 0;
    let shift = 0;
    let byte: number;
    do {
      byte = this.u8();
      if (shift < 32) result |= (byte & 0x7f) << shift;
      shift += 7;
    } while ((byte & 0x80) !== 0);
    if (shift < 32 && (byte & 0x40) !== 0) result |= -1 << shift;
    return result | 0;
  }
  skipLeb(): void {
    while ((this.u8() & 0x80) !== 0) { /* continuation */ }
  }
  name(): string {
    const n = this.u32();
    const s = new TextDecoder().decode(this.b.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
  valtype(): ValType {
    const t = VALTYPES[this.u8()];
    if (t === undefined) throw new RangeError('unsupported value type');
    return t;
  }
  limits(): void {
    const flags = this.u8();
    this.u32();
    if ((flags & 1) !== 0) this.u32();
  }
}

/** Reads a core module's imports and exports. Throws RangeError on a malformed binary. */
export function readModuleInterface(bytes: Uint8Array): ModuleInterface {
  const r = new Reader(bytes, 8);
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new RangeError('not a WebAssembly module');
  const types: FuncType[] = [];
  const imports: ModuleImport[] = [];
  const funcTypes: number[] = []; // by function index: imported ones first
  const globalInits: (number | null)[] = []; // by global index: imported ones first (null)
  const rawExports: { name: string; kind: number; index: number }[] = [];
  while (r.pos < bytes.length) {
    const id = r.u8();
    const size = r.u32();
    const end = r.pos + size;
    if (id === 1) {
      for (let n = r.u32(); n > 0; n--) {
        if (r.u8() !== 0x60) throw new RangeError('unsupported type form');
        const params: ValType[] = [];
        for (let k = r.u32(); k > 0; k--) params.push(r.valtype());
        const results: ValType[] = [];
        for (let k = r.u32(); k > 0; k--) results.push(r.valtype());
        types.push({ params, results });
      }
    } else if (id === 2) {
      for (let n = r.u32(); n > 0; n--) {
        const module = r.name();
        const name = r.name();
        const kind = r.u8();
        let type: FuncType | null = null;
        if (kind === 0) {
          const t = r.u32();
          funcTypes.push(t);
          type = types[t] ?? null;
        } else if (kind === 1) { r.u8(); r.limits(); }
        else if (kind === 2) r.limits();
        else if (kind === 3) { r.valtype(); r.u8(); globalInits.push(null); }
        else if (kind === 4) { r.u8(); r.u32(); }
        else throw new RangeError('unsupported import kind');
        imports.push({ module, name, kind: KINDS[kind]!, type });
      }
    } else if (id === 3) {
      for (let n = r.u32(); n > 0; n--) funcTypes.push(r.u32());
    } else if (id === 6) {
      for (let n = r.u32(); n > 0; n--) {
        r.valtype();
        r.u8();
        globalInits.push(constExpr(r));
      }
    } else if (id === 7) {
      for (let n = r.u32(); n > 0; n--) rawExports.push({ name: r.name(), kind: r.u8(), index: r.u32() });
    }
    if (id === 7) break; // nothing after the export section is needed
    r.pos = end;
  }
  const exports = rawExports.map((e): ModuleExport => ({
    name: e.name,
    kind: KINDS[e.kind] ?? 'function',
    type: e.kind === 0 ? types[funcTypes[e.index] ?? -1] ?? null : null,
    i32: e.kind === 3 ? globalInits[e.index] ?? null : null,
  }));
  return { imports, exports };
}

/** A global's initialiser: its value when it is a lone i32.const, else null (skipped). */
function constExpr(r: Reader): number | null {
  let value: number | null = null;
  let count = 0;
  for (;;) {
    const op = r.u8();
    if (op === 0x0b) return count === 1 ? value : null;
    count++;
    if (op === 0x41) value = r.s32();
    else if (op === 0x42 || op === 0x23 || op === 0xd2) r.skipLeb();
    else if (op === 0x43) r.pos += 4;
    else if (op === 0x44) r.pos += 8;
    else if (op === 0xd0) r.u8();
    else if (op === 0xfd) { r.skipLeb(); r.pos += 16; }
    // extended-const arithmetic (i32/i64 add, sub, mul) carries no immediates
    else if (!(op >= 0x6a && op <= 0x6c) && !(op >= 0x7c && op <= 0x7e)) throw new RangeError('unsupported constant expression');
  }
}

function sig(t: FuncType | null): string {
  if (t === null) return '?';
  return `(${t.params.join(', ')}) -> ${t.results.length === 0 ? 'nil' : t.results.join(', ')}`;
}

function specSig(params: readonly (readonly [string, CoreType])[], result: CoreType | null | undefined): FuncType {
  return { params: params.map(([, t]) => wasmType(t)), results: result == null ? [] : [wasmType(result)] };
}

const sameSig = (a: FuncType, b: FuncType): boolean => sig(a) === sig(b);

/** The host functions of the ABI by name, with their core signatures. */
export const HOST_FUNCTION_TYPES: ReadonlyMap<string, FuncType> = new Map(HOST_FUNCTIONS.map((f) => [f.name, specSig(f.params, f.result)]));

/**
 * The ABI version a module declares (its exported ABI_VERSION_EXPORT global), or null when it
 * declares none.
 */
export function declaredAbiVersion(mi: ModuleInterface): number | null {
  const e = mi.exports.find((x) => x.name === ABI_VERSION_EXPORT && x.kind === 'global');
  return e === undefined ? null : e.i32;
}

/**
 * What is wrong with a module for this host: its ABI version, then every import the host does not
 * provide (or provides with another signature), then exported callbacks of the wrong shape.
 * Empty when it fits.
 */
export function abiProblems(mi: ModuleInterface): string[] {
  const version = declaredAbiVersion(mi);
  if (version === null) {
    return [`declares no plugin ABI version (no exported i32 global ${ABI_VERSION_EXPORT}: built with an SDK older than ABI 1, ` +
      `or without sdk/assembly/exports); this proxy provides ABI ${ABI_VERSION}: rebuild it with this proxy's SDK`];
  }
  if (version !== ABI_VERSION) {
    return [`was built for plugin ABI ${version}, this proxy provides ABI ${ABI_VERSION}: rebuild it with this proxy's SDK`];
  }
  const out: string[] = [];
  for (const im of mi.imports) {
    const where = `${im.module}.${im.name}`;
    if (im.module !== IMPORT_MODULE) { out.push(`imports ${where}, outside the host's namespace "${IMPORT_MODULE}"`); continue; }
    const want = HOST_FUNCTION_TYPES.get(im.name);
    if (im.kind !== 'function' || want === undefined) { out.push(`imports ${where} (${im.kind}), which ABI ${ABI_VERSION} does not provide`); continue; }
    if (im.type === null || !sameSig(im.type, want)) out.push(`imports ${where} as ${sig(im.type)}; ABI ${ABI_VERSION} provides ${sig(want)}`);
  }
  for (const spec of CORE_EXPORTS) {
    if (spec.hostAdded === true) continue;
    const e = mi.exports.find((x) => x.name === spec.name);
    if (e === undefined) {
      if (spec.required) out.push(`exports no ${spec.name} (${spec.kind})`);
      continue;
    }
    if (e.kind !== spec.kind) { out.push(`exports ${spec.name} as a ${e.kind}; the ABI wants a ${spec.kind}`); continue; }
    if (spec.kind === 'function') {
      const want = specSig(spec.params ?? [], spec.result);
      if (e.type === null || !sameSig(e.type, want)) out.push(`exports ${spec.name} as ${sig(e.type)}; ABI ${ABI_VERSION} calls it as ${sig(want)}`);
    }
  }
  return out;
}

/** Throws PluginLoadError naming every ABI problem of the module (see abiProblems). */
export function checkModuleAbi(bytes: Uint8Array, step: string): void {
  let mi: ModuleInterface;
  try {
    mi = readModuleInterface(bytes);
  } catch (err) {
    throw new PluginLoadError(step, `not a valid WebAssembly module (${err instanceof Error ? err.message : String(err)})`, err);
  }
  const problems = abiProblems(mi);
  if (problems.length > 0) throw new PluginLoadError(step, problems.join('; '));
}
