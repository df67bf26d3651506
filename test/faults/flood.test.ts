// Connection flood: thousands of idle client connections (10,000 by default; PROXY_FLOOD_CONNECTIONS
// overrides), each after one OP_MSG hello, against a proxy (with its embedded devdb) in a child
// process so its RSS is measured alone. Goal (issue): 10,000 idle connections within 150 MB RSS
// over idle. Also: a driver is served while the flood opens and with it open, and the proxy's
// client-connection gauge (admin /metrics) goes back to 0 once the flood closes.
// The measurement itself is bench/connection-flood.ts (runFlood), which prints the same figures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runFlood, formatFlood } from '../../bench/connection-flood.ts';

const CONNECTIONS = Number(process.env.PROXY_FLOOD_CONNECTIONS ?? 10_000);
const GOAL_BYTES = 150 * 1024 * 1024;

test(`${CONNECTIONS} idle connections fit within 150 MB of proxy RSS, and the proxy keeps serving`, { timeout: 60_000 }, async () => {
  assert.ok(Number.isInteger(CONNECTIONS) && CONNECTIONS > 0, `PROXY_FLOOD_CONNECTIONS must be a positive integer, got ${process.env.PROXY_FLOOD_CONNECTIONS}`);
  const r = await runFlood({ connections: CONNECTIONS, batch: 500, settleMs: 1000 });
  console.log(formatFlood(r));

  assert.equal(r.gauge.idle, 0, 'no client connection before the flood');
  assert.equal(r.gauge.flooded, CONNECTIONS, 'the proxy holds every flood connection');
  assert.ok(r.duringFlood.ok > 0, 'the driver was served while the flood opened');
  assert.equal(r.duringFlood.errors, 0, 'no driver error while the flood opened');
  assert.equal(r.freshDriverFound, 1, 'a fresh driver pings, inserts and finds with the flood open');
  assert.ok(r.deltaBytes <= GOAL_BYTES,
    `RSS grew by ${(r.deltaBytes / 1048576).toFixed(1)} MB for ${CONNECTIONS} idle connections ` +
    `(${r.bytesPerConnection} bytes each); the goal is at most 150 MB for 10,000`);
  assert.equal(r.gauge.afterClose, 0, 'the client-connection count goes back to 0 after the flood closes');
});
