// A pipeline step written in JavaScript and built into a WebAssembly component (world `plugin`
// of sdk/wit/step.wit) by scripts/build-components.mjs with componentize-js.
//   - logs every operation (op, db, collection) at the configured level;
//   - rejects `drop` commands with code 13 (Unauthorized);
//   - answers `{componentHello: 1}` locally with `{ok: 1, from: "component"}`;
//   - `{componentTrap: 1}` throws, which traps the component (used by the tests);
//   - `{componentSpin: 1}` never returns: the host's fuel metering stops it (used by the tests);
//   - `{componentInspect: 1, needle: "..."}` answers `{ok: 1, found: <body-find offset of needle>,
//     elapsed: <elapsed-ns ≥ 0>}` and writes a structured record (log-fields) of the same;
//   - `{componentWhoami: 1}` records the user "component-user" (set-user) and answers
//     `{ok: 1, user: <the user property>, clock: "wall"}` when the wall-clock property is readable.
// Config: { "log_level": "info" | "debug" | ..., "log": true, "deny": ["drop", ...] } (all optional).
import { getProperty, replyLocal, reject, log, logFields, bodyFind, defineMetric, incrementMetric, setUser } from 'proxy:step/host@0.4.0';

let level = 'info';
let logOps = true;
let deny = ['drop'];
let opsMetric;

const CONTINUE = 0;
const STOP = 1;

/** A BSON document of string and double fields (enough for a local reply). */
function encodeDoc(fields) {
  const parts = [];
  let size = 5;
  const enc = new TextEncoder();
  for (const [key, value] of Object.entries(fields)) {
    const k = enc.encode(key);
    if (typeof value === 'number') {
      const b = new Uint8Array(1 + k.length + 1 + 8);
      b[0] = 0x01;
      b.set(k, 1);
      new DataView(b.buffer).setFloat64(k.length + 2, value, true);
      parts.push(b);
    } else {
      const s = enc.encode(String(value));
      const b = new Uint8Array(1 + k.length + 1 + 4 + s.length + 1);
      b[0] = 0x02;
      b.set(k, 1);
      new DataView(b.buffer).setInt32(k.length + 2, s.length + 1, true);
      b.set(s, k.length + 6);
      parts.push(b);
    }
    size += parts[parts.length - 1].length;
  }
  const out = new Uint8Array(size);
  new DataView(out.buffer).setInt32(0, size, true);
  let o = 4;
  for (const p of parts) { out.set(p, o); o += p.length; }
  out[o] = 0;
  return out;
}

/** Refuses the config: the reason logged at error level becomes the host's refusal message. */
function refuse(why) {
  log('error', `component_js: bad config: ${why}`);
  return false;
}

export const step = {
  configure(config) {
    let cfg;
    try { cfg = JSON.parse(config); } catch { return refuse('config is not JSON'); }
    if (cfg.log_level !== undefined) {
      if (!['trace', 'debug', 'info', 'warn', 'error'].includes(cfg.log_level)) {
        return refuse(`log_level must be trace, debug, info, warn or error, got ${JSON.stringify(cfg.log_level)}`);
      }
      level = cfg.log_level;
    }
    if (cfg.log !== undefined) logOps = cfg.log !== false;
    if (cfg.deny !== undefined) {
      if (!Array.isArray(cfg.deny)) return refuse('deny must be an array of operation names');
      deny = cfg.deny.map(String);
    }
    opsMetric = defineMetric('counter', 'proxy_plugin_component_js_ops_total', []);
    return true;
  },

  onRequest(bodySize, flags) {
    const op = getProperty('op') ?? '';
    if (logOps) log(level, `component_js: ${op} ${getProperty('db') ?? ''}.${getProperty('collection') ?? ''} (${bodySize} bytes)`);
    if (opsMetric !== undefined) incrementMetric(opsMetric, 1);
    if (op === 'componentTrap') throw new Error('component_js: trap requested');
    if (op === 'componentSpin') for (;;) { /* runs until the host's fuel runs out */ }
    if (op === 'componentWhoami') {
      setUser('component-user');
      const now = Number(getProperty('wall-clock-ms'));
      replyLocal(encodeDoc({ ok: 1, user: getProperty('user') ?? '', clock: now > 1.6e12 ? 'wall' : 'none' }));
      return STOP;
    }
    if (op === 'componentInspect') {
      const found = bodyFind('request', new TextEncoder().encode('needle\0'));
      const elapsed = Number(getProperty('elapsed-ns'));
      logFields('info', `"inspect":true,"found":${found},"elapsed_ok":${elapsed >= 0}`);
      replyLocal(encodeDoc({ ok: 1, found, elapsed: elapsed >= 0 ? 'yes' : 'no' }));
      return STOP;
    }
    if (op === 'componentHello') {
      replyLocal(encodeDoc({ ok: 1, from: 'component' }));
      return STOP;
    }
    if (deny.includes(op)) {
      reject(13, 'Unauthorized', `component_js: ${op} is not allowed through this proxy`);
      return STOP;
    }
    return CONTINUE;
  },

  onResponse(_replySize, _flags) {
    return CONTINUE;
  },
};
