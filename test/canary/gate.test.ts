// Pre-promotion gates against a real local HTTP server: a stage whose gate answers 500 holds (the
// failure is in the history, the stage is asked again at the next evaluation), then 200 lets it
// advance; a gate that does not answer within timeout_ms holds too; a manual promote needs the gate
// unless forced; the gate is given the canary's state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { initHistograms } from '../../runtime/profiling/index.ts';
import { CanaryError, parseStartRequest, defaultsFromConfig } from '../../runtime/canary/index.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { harness, LOGGING_CANDIDATE, type Harness } from './helpers.ts';
import { httpReceiver } from './notify/helpers.ts';

await initHistograms();

const RULES = { error_rate_delta_pct: 5, latency_p95_delta_ms: 100, sustained_duration: '10s', check_interval: '5s', min_window_requests: 20 };
const PROMOTE = { min_duration: '0', min_requests: 0, max_error_rate_delta_pct: 1, max_latency_p95_delta_ms: 20 };

function body(gate: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, rollback_rules: RULES, auto_promote_rules: PROMOTE, auto_promote: true,
    stages: [
      { traffic_pct: 10, min_duration: '0', min_requests: 0, gate },
      { traffic_pct: 50, min_duration: '1h', min_requests: 0 },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 },
    ],
    ...extra,
  };
}

async function tick(h: Harness, id: string) {
  h.clock.advance(5000);
  h.metrics.feed('baseline', 450, 0);
  h.metrics.feed('candidate', 50, 0);
  return h.controller.evaluate(id);
}

const events = (h: Harness, id: string) => h.store.history(id).map((e) => e.event);

test('a gate answering 500 holds the stage, in the history; at the next evaluation it answers 200 and the canary advances', async () => {
  const hook = await httpReceiver();
  try {
    hook.statuses.push(500);
    const h = harness();
    const { canary_id: id } = await h.controller.start(body({ url: hook.url, timeout_ms: 2000 })) as { canary_id: string };
    const ev = await tick(h, id);
    assert.equal(ev!.promotable, true, 'every promotion condition holds: only the gate stands in the way');
    assert.equal(h.controller.record(id).current_stage, 1, 'the 500 held the stage');
    const failed = h.store.history(id).find((e) => e.event === 'gate_failed')!;
    assert.match(failed.message, /did not confirm the promotion: HTTP 500/);
    assert.equal(failed.details!.url, hook.url);
    assert.deepEqual(h.sink.types(), ['canary.started']);
    const st = h.controller.status(id) as any;
    assert.equal(st.promotion.eligible, true);
    assert.equal(st.promotion.gate.url, hook.url);
    assert.equal(st.promotion.gate.last.ok, false);
    assert.match(st.promotion.gate.last.result, /HTTP 500/);
    // The next evaluation asks again; the gate now answers 200.
    await tick(h, id);
    assert.equal(h.controller.record(id).current_stage, 2);
    assert.deepEqual(events(h, id).filter((e) => e !== 'threshold_warning'), ['started', 'gate_failed', 'gate_passed', 'promoted']);
    assert.deepEqual(h.sink.types(), ['canary.started', 'canary.promoted']);
    // What the gate was given.
    assert.equal(hook.received.length, 2);
    const sent = JSON.parse(hook.received[1].body);
    assert.equal(hook.received[1].method, 'POST');
    assert.equal(hook.received[1].headers['x-proxy-gate'], 'confirm-promotion');
    assert.equal(sent.type, 'confirm-promotion');
    assert.equal(sent.canary_id, id);
    assert.equal(sent.stage, 1);
    assert.equal(sent.next_stage, 2);
    assert.equal(sent.next_traffic_pct, 50);
    assert.equal(sent.metrics.candidate.requests, 100);
    // Stage 2 has no gate: nothing more is asked.
    await h.controller.rollback(id, { reason: 'done' });
    assert.equal(hook.received.length, 2);
  } finally {
    await hook.close();
  }
});

test('a gate that does not answer within timeout_ms holds the stage; a refused connection too', async () => {
  const silent = createServer(() => { /* never answers */ });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/gate`;
  try {
    const h = harness();
    const { canary_id: id } = await h.controller.start(body({ url, timeout_ms: 150 })) as { canary_id: string };
    const t0 = Date.now();
    await tick(h, id);
    assert.ok(Date.now() - t0 < 2000);
    assert.equal(h.controller.record(id).current_stage, 1);
    const failed = h.store.history(id).filter((e) => e.event === 'gate_failed');
    assert.equal(failed.length, 1);
    assert.match(failed[0].message, /no answer within 150 ms/);
    h.controller.rollback(id, { reason: 'done' });

    const h2 = harness();
    const { canary_id: id2 } = await h2.controller.start(body({ url: 'http://127.0.0.1:1/gate', timeout_ms: 1000 })) as { canary_id: string };
    await tick(h2, id2);
    assert.equal(h2.controller.record(id2).current_stage, 1);
    assert.match(h2.store.history(id2).find((e) => e.event === 'gate_failed')!.message, /ECONNREFUSED/);
  } finally {
    silent.closeAllConnections();
    await new Promise<void>((r) => silent.close(() => r()));
  }
});

test('manual promote: a failing gate answers 409 with the gate\'s answer; force skips the gate', async () => {
  const hook = await httpReceiver();
  try {
    hook.statuses.push(503);
    const h = harness();
    const { canary_id: id } = await h.controller.start(body({ url: hook.url }, { auto_promote: false })) as { canary_id: string };
    await assert.rejects(h.controller.promote(id), (err: unknown) => err instanceof CanaryError && err.code === 'PROXY_ERR_CANARY_INVALID_STATE' &&
      /HTTP 503/.test(err.message));
    assert.equal(h.controller.record(id).current_stage, 1);
    await h.controller.promote(id, { force: true });
    assert.equal(h.controller.record(id).current_stage, 2);
    assert.equal(hook.received.length, 1, 'force did not ask the gate');
  } finally {
    await hook.close();
  }
});

test('a gate is validated: an http(s) URL, timeout_ms 1..60000, default 5000', () => {
  const defaults = defaultsFromConfig(parseConfig({}, null));
  const parse = (gate: unknown) => parseStartRequest({ pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE,
    stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0, gate }] }, defaults);
  assert.equal(parse({ url: 'http://127.0.0.1:9/ok' }).stages[0].gate!.timeout_ms, 5000);
  assert.throws(() => parse({ url: 'ftp://x/y' }), /PROXY_ERR_CANARY_INVALID_STAGES|http/);
  assert.throws(() => parse({ url: 'http://x/', timeout_ms: 0 }));
  assert.throws(() => parse({ url: 'http://x/', extra: 1 }));
  // The configuration's default stages take a gate too.
  assert.equal(parseConfig({ canary: { stages: [{ traffic_pct: 5, min_duration: '1m', min_requests: 0,
    gate: { url: 'https://ci.example/confirm' } }] } }, null).canary.stages[0].gate!.url, 'https://ci.example/confirm');
});

test('a gate that sends its headers and then trickles its body forever is cut at timeout_ms: the stage holds and the evaluations go on', async () => {
  const trickle = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const t = setInterval(() => res.write('.'), 50);
    res.on('close', () => clearInterval(t));
  });
  await new Promise<void>((r) => trickle.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(trickle.address() as AddressInfo).port}/gate`;
  try {
    const h = harness();
    const { canary_id: id } = await h.controller.start(body({ url, timeout_ms: 300 })) as { canary_id: string };
    const t0 = Date.now();
    const ev = await Promise.race([tick(h, id), new Promise<'hung'>((r) => setTimeout(() => r('hung'), 5000).unref())]);
    assert.notEqual(ev, 'hung', 'the evaluation waited on the gate past its timeout_ms');
    assert.ok(Date.now() - t0 < 3000);
    assert.equal(h.controller.record(id).current_stage, 1, 'an answer that did not end within timeout_ms does not confirm');
    assert.match(h.store.history(id).find((e) => e.event === 'gate_failed')!.message, /no answer within 300 ms/);
    assert.notEqual(await tick(h, id), null, 'the next evaluation runs');
    await h.controller.rollback(id, { reason: 'done' });
  } finally {
    trickle.closeAllConnections();
    await new Promise<void>((r) => trickle.close(() => r()));
  }
});
