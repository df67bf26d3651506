// Each HTTP listener (admin API, profiling endpoint, control plane) serves at most its
// max_connections at once: one past it is closed as it is accepted, counted in
// proxy_http_connections_refused_total{listener} and logged at warn (once, then at most a line a
// minute). Connections to these ports need no token, so without the cap they could use up the
// process's file descriptors; the wire listener keeps serving either way. A reload changes the cap.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';

const TOKEN = 'connection-cap-token-0123456789';
let proxy: RunningProxy;
let dir: string;
const logLines: string[] = [];
const open: Socket[] = [];

function config(adminMax: number) {
  return {
    listen: '127.0.0.1:0', log: { level: 'warn' as const },
    admin: { listen: '127.0.0.1:0', token: TOKEN, reload_on_change: false, max_connections: adminMax },
    profiling: { enabled: true, port: 0, max_connections: 2 },
    control_plane: { port: 0, tokens: [TOKEN], max_connections: 2 },
    canary: { data_dir: join(dir, 'canary') },
  };
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'proxy-connection-cap-'));
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify(config(3)));
  proxy = await startProxy(parseConfig(config(3), file), {
    log: new Logger('test', 'warn', 'json', { write: (l) => { logLines.push(l); } }), configFile: file,
  });
});

after(async () => {
  for (const s of open) s.destroy();
  await proxy?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A TCP connection to `url`'s port, and whether the server closed it within `ms` (without sending anything). */
async function connection(url: string, ms = 1500): Promise<{ socket: Socket; closedByServer: boolean }> {
  const u = new URL(url);
  const socket = connect(Number(u.port), u.hostname);
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
  const closedByServer = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => { clearTimeout(timer); resolve(true); });
    socket.on('data', () => { clearTimeout(timer); resolve(false); });
  });
  if (!closedByServer) open.push(socket);
  return { socket, closedByServer };
}

async function metricsText(): Promise<string> {
  const r = await fetch(`${proxy.adminUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}`, connection: 'close' } });
  assert.equal(r.status, 200);
  return r.text();
}

function refused(text: string, listener: string): number {
  const m = new RegExp(`^proxy_http_connections_refused_total\\{listener="${listener}"\\} (\\d+)$`, 'm').exec(text);
  assert.ok(m !== null, `no series for ${listener}`);
  return Number(m[1]);
}

/** Waits until the listener has let go of a connection its client closed (the server counts it until its close event). */
async function closeAndSettle(s: Socket): Promise<void> {
  s.destroy();
  open.splice(open.indexOf(s), 1);
  await new Promise((r) => setTimeout(r, 200));
}

test('a listener serves max_connections at once; one more is closed as accepted, counted, logged once; the wire listener keeps serving', async () => {
  const held = [];
  for (let i = 0; i < 3; i++) {
    const c = await connection(proxy.adminUrl!, 300);
    assert.equal(c.closedByServer, false, `connection ${i + 1} of 3 is served`);
    held.push(c.socket);
  }
  for (let i = 0; i < 2; i++) assert.equal((await connection(proxy.adminUrl!)).closedByServer, true, 'a connection past the cap is closed');
  // Clients of the wire listener are not touched.
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  try {
    await client.db('cap').collection<{ _id: number }>('c').insertOne({ _id: 1 });
    assert.equal((await client.db('cap').collection<{ _id: number }>('c').findOne({}))?._id, 1);
  } finally {
    await client.close();
  }
  await closeAndSettle(held[0]!);
  const text = await metricsText();
  assert.equal(refused(text, 'admin'), 2);
  assert.equal(refused(text, 'profiling'), 0);
  assert.equal(refused(text, 'control_plane'), 0);
  const lines = logLines.map((l) => JSON.parse(l)).filter((l) => l.msg.startsWith('HTTP connection refused'));
  assert.equal(lines.length, 1, 'the second refusal within the minute is held back');
  assert.equal(lines[0].level, 'warn');
  assert.equal(lines[0].logger, 'proxy::http');
  assert.equal(lines[0].listener, 'admin');
  assert.equal(lines[0].max_connections, 3);
  for (const s of held.slice(1)) await closeAndSettle(s);
});

test('the profiling endpoint and the control plane have caps of their own, counted by listener', async () => {
  for (const [url, listener] of [[proxy.profilingUrl!, 'profiling'], [proxy.controlPlaneUrl!, 'control_plane']] as const) {
    const held = [(await connection(url, 300)).socket, (await connection(url, 300)).socket];
    assert.equal((await connection(url)).closedByServer, true, `${listener}: the third connection is closed`);
    for (const s of held) await closeAndSettle(s);
    assert.equal(refused(await metricsText(), listener), 1);
  }
});

test('a reload changes the running listener\'s cap', async () => {
  const r = await fetch(`${proxy.adminUrl}/api/v1/reload`, {
    method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', connection: 'close' },
    // The same addresses as configured (port 0 stays the port bound), admin.max_connections 3 → 5.
    body: JSON.stringify(config(5)),
  });
  assert.equal(r.status, 200, await r.text());
  await new Promise((res) => setTimeout(res, 200));
  const before = refused(await metricsText(), 'admin');
  await new Promise((res) => setTimeout(res, 200));
  for (let i = 0; i < 5; i++) assert.equal((await connection(proxy.adminUrl!, 300)).closedByServer, false, `connection ${i + 1} of 5 is served`);
  assert.equal((await connection(proxy.adminUrl!)).closedByServer, true, 'the sixth is closed');
  await closeAndSettle(open[open.length - 1]!);
  assert.equal(refused(await metricsText(), 'admin'), before + 1);
});
