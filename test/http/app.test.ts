// The edges every HTTP app of the proxy shares through its one base (runtime/http/app.ts), checked on
// all three — the admin API, the profiling endpoint and the canary control plane — with real clients:
// bodies that are null, not objects, not JSON, carry __proto__, or are too large (with a client that
// keeps writing); headers too large; bytes that are not HTTP; unknown paths and methods; other
// content types. Every answer is `{ error: { code, message } }` with a code of the table.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, Agent } from 'node:http';
import { connect } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, MAX_STEPS_PER_PHASE } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { httpStatus, ADMIN_BODY_LIMIT_BYTES, type HttpErrorCode } from '../../runtime/http/index.ts';
import { MAX_JSON_DEPTH, jsonBodyProblem } from '../../runtime/http/json-body.ts';

const TOKEN = 'http-edges-token-0123456789';
let proxy: RunningProxy;
/** The proxy's log lines (level error and above). */
const logLines: string[] = [];

const apps = [
  { name: 'admin API', url: () => proxy.adminUrl!, post: '/api/v1/reload', get: '/api/v1/pipeline' },
  { name: 'profiling endpoint', url: () => proxy.profilingUrl!, post: '/api/profile/reset', get: '/api/profile' },
  { name: 'control plane', url: () => proxy.controlPlaneUrl!, post: '/api/v1/canary', get: '/api/v1/canary' },
];

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-http-edges-'));
  const config = {
    listen: '127.0.0.1:0', log: { level: 'error' as const },
    admin: { listen: '127.0.0.1:0', token: TOKEN, reload_on_change: false },
    profiling: { enabled: true, port: 0, token: TOKEN },
    control_plane: { port: 0, tokens: [TOKEN] },
    canary: { data_dir: join(dir, 'canary') },
  };
  // Started from a file, as `proxy serve` is: a reload without a body re-reads it.
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify(config));
  proxy = await startProxy(parseConfig(config, file), { log: new Logger('test', 'error', 'json', { write: (l) => { logLines.push(l); } }),
    configFile: file });
});

after(async () => {
  await proxy?.close();
});

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; body: any }

/** One request with node:http (no client-side limits), the token, and the body as given. */
function call(base: string, method: string, path: string, opts: { body?: string | Buffer; type?: string | null; headers?: Record<string, string>;
  chunked?: boolean } = {}): Promise<Answer & { clientError: Error | null }> {
  const u = new URL(path, base);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${TOKEN}`, ...opts.headers };
    if (opts.body !== undefined && opts.type !== null) headers['content-type'] = opts.type ?? 'application/json';
    if (opts.body !== undefined && !opts.chunked) headers['content-length'] = Buffer.byteLength(opts.body);
    let clientError: Error | null = null;
    let answer: Answer | null = null;
    // Settled when the request is closed (after any write error, EPIPE or reset, has surfaced).
    let closed = false;
    const done = () => { if (answer !== null && closed) resolve({ ...answer, clientError }); };
    const req = request({ host: u.hostname, port: u.port, method, path: u.pathname + u.search, headers, agent: new Agent({ keepAlive: false }) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try { body = JSON.parse(text); } catch { /* not JSON */ }
        answer = { status: res.statusCode ?? 0, headers: res.headers, body };
        done();
      });
    });
    req.on('error', (err) => {
      clientError = err;
      if (answer === null) reject(err);
    });
    req.on('close', () => { closed = true; done(); });
    if (opts.body === undefined) req.end();
    else if (opts.chunked) {
      const b = Buffer.from(opts.body);
      for (let i = 0; i < b.length; i += 64 * 1024) req.write(b.subarray(i, i + 64 * 1024));
      req.end();
    } else req.end(opts.body);
  });
}

/** Raw bytes on a TCP connection; the answer's status line and JSON body. */
function raw(base: string, bytes: string | Buffer): Promise<{ status: number; body: any }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    s.on('data', (c) => chunks.push(c));
    s.on('error', () => { /* the server closes after answering */ });
    s.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const m = /^HTTP\/1\.1 (\d{3}) /.exec(text);
      if (m === null) return reject(new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`));
      resolve({ status: Number(m[1]), body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) });
    });
    s.write(bytes);
    setTimeout(() => s.destroy(), 5000).unref();
  });
}

function isError(r: { status: number; body: any }, status: number, code: HttpErrorCode, message?: RegExp) {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.equal(httpStatus(code), status);
  assert.equal(r.body?.error?.code, code, JSON.stringify(r.body));
  assert.equal(typeof r.body.error.message, 'string');
  if (message !== undefined) assert.match(r.body.error.message, message);
}

for (const app of apps) {
  test(`${app.name}: a JSON body that is null, an array or a scalar is 400 PROXY_ERR_BAD_BODY, never applied`, async () => {
    for (const [body, what] of [['null', 'null'], ['[]', 'an array'], ['"x"', 'string'], ['7', 'number']]) {
      isError(await call(app.url(), 'POST', app.post, { body }), 400, 'PROXY_ERR_BAD_BODY', new RegExp(`expected a JSON object, got ${what}`));
    }
  });

  test(`${app.name}: a __proto__ key, anywhere, is refused by name`, async () => {
    for (const body of ['{"__proto__":{"polluted":1}}', '{"pipeline":{"__proto__":{"request":[]}}}', '{"a":[{"\\u005f_proto__":1}]}']) {
      isError(await call(app.url(), 'POST', app.post, { body }), 400, 'PROXY_ERR_BAD_BODY', /^key "__proto__" is not allowed$/);
    }
    isError(await call(app.url(), 'POST', app.post, { body: '{"constructor":{"prototype":{"x":1}}}' }), 400, 'PROXY_ERR_BAD_BODY', /constructor/);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  test(`${app.name}: a key given twice, a number out of range and nesting past ${MAX_JSON_DEPTH} levels are 400 PROXY_ERR_BAD_BODY, by path`, async () => {
    // JSON.parse took the last of a repeated key, 1e400 as Infinity ("received null" after), and a
    // 3,000-deep body answered "Maximum call stack size exceeded".
    for (const [body, message] of [
      ['{"traffic_pct":1,"traffic_pct":100}', /^key "traffic_pct" is given twice in one object, at traffic_pct$/],
      ['{"pipeline":{"request":["a"],"response":[],"request":["b"]}}', /^key "request" is given twice in one object, at pipeline\.request$/],
      ['{"a":[{"x":1},{"x":1,"y":{"k":"}","k":2}}]}', /^key "k" is given twice in one object, at a\[1\]\.y\.k$/],
      ['{"a":1,"\\u0061":2}', /^key "a" is given twice/],
      ['{"traffic_pct":1e400}', /^number 1e400 is out of range .*, at traffic_pct$/],
      ['{"a":[1,-2e999]}', /^number -2e999 is out of range .*, at a\[1\]$/],
      [`{"a":${'['.repeat(3000)}${']'.repeat(3000)}}`, new RegExp(`^nested deeper than ${MAX_JSON_DEPTH} levels at a\\[0\\]`)],
    ] as const) {
      isError(await call(app.url(), 'POST', app.post, { body }), 400, 'PROXY_ERR_BAD_BODY', message);
    }
  });

  test(`${app.name}: malformed JSON is 400 PROXY_ERR_BAD_BODY`, async () => {
    isError(await call(app.url(), 'POST', app.post, { body: '{"a":' }), 400, 'PROXY_ERR_BAD_BODY', /not valid JSON/);
  });

  test(`${app.name}: a 10 MB body is answered 413 PROXY_ERR_BODY_TOO_LARGE while the client still writes — no EPIPE, no reset`, async () => {
    const big = Buffer.alloc(10 * 1024 * 1024, 0x20);
    for (let i = 0; i < 3; i++) {
      const r = await call(app.url(), 'POST', app.post, { body: big });
      isError(r, 413, 'PROXY_ERR_BODY_TOO_LARGE', /request body over \d+ bytes/);
      assert.equal(r.clientError, null, `the client wrote its whole body without an error (${r.clientError?.message})`);
    }
    // Refused for its token before its body is read: the 401, not a reset, reaches the client.
    const unauthorized = await call(app.url(), 'POST', app.post, { body: big, headers: { authorization: 'Bearer wrong' } });
    isError(unauthorized, 401, 'PROXY_ERR_UNAUTHORIZED');
    assert.equal(unauthorized.clientError, null, `401: no client error (${unauthorized.clientError?.message})`);
    // Without a Content-Length (chunked), the limit is found while reading: the same answer.
    const chunked = await call(app.url(), 'POST', app.post, { body: big, chunked: true });
    isError(chunked, 413, 'PROXY_ERR_BODY_TOO_LARGE');
    assert.equal(chunked.clientError, null, `chunked: no client error (${chunked.clientError?.message})`);
  });

  test(`${app.name}: another content type is 415 PROXY_ERR_UNSUPPORTED_MEDIA_TYPE`, async () => {
    isError(await call(app.url(), 'POST', app.post, { body: 'a=1', type: 'application/x-www-form-urlencoded' }), 415,
      'PROXY_ERR_UNSUPPORTED_MEDIA_TYPE', /application\/json/);
  });

  test(`${app.name}: unknown path 404, known path with another method 405 with Allow, a path that does not decode 400`, async () => {
    isError(await call(app.url(), 'GET', '/no/such/path'), 404, 'PROXY_ERR_NOT_FOUND');
    const r = await call(app.url(), 'DELETE', app.get);
    isError(r, 405, 'PROXY_ERR_METHOD_NOT_ALLOWED');
    assert.match(String(r.headers.allow), /GET/);
    isError(await call(app.url(), 'GET', '/api/%zz'), 400, 'PROXY_ERR_BAD_REQUEST', /not a valid url/);
    // Without the token neither is revealed.
    isError(await call(app.url(), 'GET', '/no/such/path', { headers: { authorization: 'Bearer wrong' } }), 401, 'PROXY_ERR_UNAUTHORIZED');
  });

  test(`${app.name}: headers over 16 KiB are 431 PROXY_ERR_HEADERS_TOO_LARGE; bytes that are not HTTP are 400 PROXY_ERR_BAD_REQUEST`, async () => {
    const u = new URL(app.url());
    isError(await raw(app.url(), `GET ${app.get} HTTP/1.1\r\nHost: ${u.host}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`), 431, 'PROXY_ERR_HEADERS_TOO_LARGE');
    isError(await raw(app.url(), Buffer.from('16030100a5010000a10303', 'hex')), 400, 'PROXY_ERR_BAD_REQUEST', /not a valid HTTP\/1\.1 request/);
    isError(await raw(app.url(), '\r\nhello there\r\n\r\n'), 400, 'PROXY_ERR_BAD_REQUEST');
  });
}

test('admin API: a null body does not reload (it used to re-read the file and answer 200)', async () => {
  const r = await call(proxy.adminUrl!, 'POST', '/api/v1/reload', { body: 'null' });
  isError(r, 400, 'PROXY_ERR_BAD_BODY');
  // No body at all still means "re-read the file".
  const reread = await call(proxy.adminUrl!, 'POST', '/api/v1/reload');
  assert.equal(reread.status, 200, JSON.stringify(reread.body));
  assert.equal(reread.body.reloaded, true);
});

test(`admin API: a 100,000-step pipeline is refused with the key path (at most ${MAX_STEPS_PER_PHASE} a phase); a configuration over the body ` +
  `limit is 413`, async () => {
  const body = JSON.stringify({ pipeline: { request: Array.from({ length: 100_000 }, () => 'logging') } });
  assert.ok(body.length < ADMIN_BODY_LIMIT_BYTES);
  const r = await call(proxy.adminUrl!, 'POST', '/api/v1/reload', { body });
  isError(r, 400, 'PROXY_ERR_CONFIG');
  assert.deepEqual(r.body.error.details, [{ path: 'pipeline.request', message: `at most ${MAX_STEPS_PER_PHASE} steps per phase, got 100000` }]);
  assert.ok(r.body.error.message.length < 500, 'the refusal is short, not the pipeline echoed back');
  const huge = JSON.stringify({ steps: { x: { config: { blob: 'x'.repeat(ADMIN_BODY_LIMIT_BYTES) } } } });
  isError(await call(proxy.adminUrl!, 'POST', '/api/v1/reload', { body: huge }), 413, 'PROXY_ERR_BODY_TOO_LARGE');
});

test('admin API: the health probes answer GET without a token; another method on them needs the token, then is 405', async () => {
  assert.equal((await call(proxy.adminUrl!, 'GET', '/healthz', { headers: { authorization: '' } })).status, 200);
  isError(await call(proxy.adminUrl!, 'POST', '/healthz', { headers: { authorization: '' } }), 401, 'PROXY_ERR_UNAUTHORIZED');
  isError(await call(proxy.adminUrl!, 'POST', '/healthz'), 405, 'PROXY_ERR_METHOD_NOT_ALLOWED');
});

test(`control plane: a candidate of 20,000 steps (inside the body limit) is refused (at most ${2 * MAX_STEPS_PER_PHASE} ` +
  `steps, ${MAX_STEPS_PER_PHASE} a phase)`, async () => {
  const steps = Array.from({ length: 20_000 }, () => ({ type: 'logging' }));
  const r = await call(proxy.controlPlaneUrl!, 'POST', '/api/v1/canary', { body: JSON.stringify({ pipeline_id: 'default', candidate_config: { steps } }) });
  isError(r, 400, 'PROXY_ERR_BAD_BODY', new RegExp(`candidate_config\\.steps: at most ${2 * MAX_STEPS_PER_PHASE} steps`));
  const phase = Array.from({ length: MAX_STEPS_PER_PHASE + 1 }, () => 'logging');
  const p = await call(proxy.controlPlaneUrl!, 'POST', '/api/v1/canary', { body: JSON.stringify({ pipeline_id: 'default',
    candidate_config: { steps: [], pipeline: { request: phase } } }) });
  isError(p, 400, 'PROXY_ERR_BAD_BODY', new RegExp(`candidate_config\\.pipeline\\.request: at most ${MAX_STEPS_PER_PHASE} steps per phase`));
});

test('control plane: a canary id or pipeline id over 100 characters is an unknown one (404 / 400 with the canary code), not a bad request; ' +
  'without a token it is 401', async () => {
  const long = 'c'.repeat(500);
  isError(await call(proxy.controlPlaneUrl!, 'GET', `/api/v1/canary/${long}`), 404, 'PROXY_ERR_CANARY_NOT_FOUND');
  isError(await call(proxy.controlPlaneUrl!, 'POST', `/api/v1/canary/${long}/rollback`, { body: '{}' }), 404, 'PROXY_ERR_CANARY_NOT_FOUND');
  isError(await call(proxy.controlPlaneUrl!, 'GET', `/api/v1/canary/pipelines/${long}/baseline`), 400, 'PROXY_ERR_CANARY_UNKNOWN_PIPELINE');
  isError(await call(proxy.controlPlaneUrl!, 'GET', `/api/v1/canary/${long}`, { headers: { authorization: '' } }), 401, 'PROXY_ERR_UNAUTHORIZED');
});

test('a query parameter given twice is 400 PROXY_ERR_BAD_QUERY on every API, by name (the profiling endpoint answered some 500 ' +
  'PROXY_ERR_INTERNAL, or 404 for "a,b")', async () => {
  const twice: Array<[string, string]> = [
    [proxy.profilingUrl!, '/api/profile/flamegraph?duration=1s&duration=2s'],
    [proxy.profilingUrl!, '/api/profile/flamegraph?title=a&title=b'],
    [proxy.profilingUrl!, '/api/profile/series?step=a&step=b'],
    [proxy.profilingUrl!, '/api/profile?pipeline_id=default&pipeline_id=default'],
    [proxy.profilingUrl!, '/api/profile/steps/x?pipeline=baseline&pipeline=candidate'],
    [proxy.controlPlaneUrl!, '/api/v1/canary?status=all&status=active'],
    [proxy.adminUrl!, '/api/v1/reload?allow_admin_change=true&allow_admin_change=true'],
  ];
  for (const [base, path] of twice) {
    const method = path.startsWith('/api/v1/reload') ? 'POST' : 'GET';
    const name = /[?&]([a-z_]+)=[^&]*&\1=/.exec(path)![1];
    isError(await call(base, method, path), 400, 'PROXY_ERR_BAD_QUERY', new RegExp(`^${name} is given more than once$`));
  }
  // Without the token, still 401 first.
  isError(await call(proxy.profilingUrl!, 'GET', twice[0]![1], { headers: { authorization: 'Bearer wrong' } }), 401, 'PROXY_ERR_UNAUTHORIZED');
});

test('HEAD on the health probes and the dashboard\'s files needs no token, as GET does (it answered 401)', async () => {
  const none = { headers: { authorization: '' } };
  assert.equal((await call(proxy.adminUrl!, 'HEAD', '/healthz', none)).status, 200);
  assert.equal((await call(proxy.adminUrl!, 'HEAD', '/readyz', none)).status, 200);
  assert.equal((await call(proxy.profilingUrl!, 'HEAD', '/dashboard/', none)).status, 200);
  // Data still needs it.
  assert.equal((await call(proxy.adminUrl!, 'HEAD', '/api/v1/pipeline', none)).status, 401);
  assert.equal((await call(proxy.profilingUrl!, 'HEAD', '/api/profile', none)).status, 401);
});

test('control plane: GET /api/v1/fleet/evidence/{pipeline}?diffs= takes digits only ("", 0x10, 1e3, " 5" were read as 0, 16, 1000, 5)', async () => {
  for (const diffs of ['', '0x10', '1e3', '%205', '5.0', '-1', '10001']) {
    isError(await call(proxy.controlPlaneUrl!, 'GET', `/api/v1/fleet/evidence/default?diffs=${diffs}`), 400, 'PROXY_ERR_BAD_QUERY', /^diffs: /);
  }
  const ok = await call(proxy.controlPlaneUrl!, 'GET', '/api/v1/fleet/evidence/default?diffs=5');
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
});

test('control plane: a request offering another protocol (Upgrade: h2c, as curl --http2 sends) is served as any other, not answered 404 ' +
  '"no WebSocket"', async () => {
  const u = new URL(proxy.controlPlaneUrl!);
  const head = (method: string, auth: string) => `${method} /api/v1/canary HTTP/1.1\r\nHost: ${u.host}\r\nConnection: Upgrade, HTTP2-Settings\r\n` +
    `Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nAuthorization: Bearer ${auth}\r\n`;
  for (const method of ['GET', 'HEAD']) {
    const r = await new Promise<string>((resolve) => {
      const s = connect(Number(u.port), u.hostname);
      let text = '';
      s.on('data', (c) => { text += c; });
      s.on('error', () => {});
      s.on('close', () => resolve(text));
      s.write(`${head(method, TOKEN)}\r\n`);
      setTimeout(() => s.destroy(), 5000).unref();
    });
    assert.match(r, /^HTTP\/1\.1 200 /, `${method}: ${r.slice(0, 300)}`);
    if (method === 'GET') assert.equal(typeof JSON.parse(r.slice(r.indexOf('\r\n\r\n') + 4)).canaries, 'object');
  }
  isError(await raw(proxy.controlPlaneUrl!, `${head('GET', 'wrong')}\r\n`), 401, 'PROXY_ERR_UNAUTHORIZED');
  // With a body (which Node no longer parses on such a request): refused, naming the header.
  isError(await raw(proxy.controlPlaneUrl!, `${head('POST', TOKEN)}content-type: application/json\r\ncontent-length: 2\r\n\r\n{}`), 400,
    'PROXY_ERR_BAD_REQUEST', /^Upgrade: h2c is not served here/);
});

test('an answer 500 (a fault no route expected) is logged at error with its method, route and stack, on each API; a 4xx is not', async () => {
  // Faults injected into what each API's route reads: the pipeline table (admin), the profiler
  // (profiling endpoint), the canary controller (control plane).
  const faults: Array<{ api: string; base: () => string; path: string; route: string; inject: () => () => void }> = [
    { api: 'admin API', base: () => proxy.adminUrl!, path: '/api/v1/pipeline', route: '/api/v1/pipeline', inject: () => {
      const pipelines = proxy.pipelines as { get: unknown };
      const real = pipelines.get;
      pipelines.get = () => { throw new Error('injected fault: admin'); };
      return () => { pipelines.get = real; };
    } },
    { api: 'profiling endpoint', base: () => proxy.profilingUrl!, path: '/api/profile', route: '/api/profile', inject: () => {
      const profiler = proxy.profiler as unknown as { snapshot: unknown };
      const real = profiler.snapshot;
      profiler.snapshot = () => { throw new Error('injected fault: profiling'); };
      return () => { profiler.snapshot = real; };
    } },
    { api: 'control plane', base: () => proxy.controlPlaneUrl!, path: '/api/v1/canary?status=all', route: '/api/v1/canary', inject: () => {
      const controller = proxy.canary as unknown as { list: unknown };
      const real = controller.list;
      controller.list = () => { throw new Error('injected fault: control plane'); };
      return () => { controller.list = real; };
    } },
  ];
  for (const f of faults) {
    logLines.length = 0;
    isError(await call(f.base(), 'GET', '/nope'), 404, 'PROXY_ERR_NOT_FOUND');
    assert.deepEqual(logLines, [], `${f.api}: a 404 is not logged`);
    const restore = f.inject();
    let r;
    try {
      r = await call(f.base(), 'GET', f.path);
    } finally {
      restore();
    }
    isError(r, 500, 'PROXY_ERR_INTERNAL');
    const lines = logLines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'HTTP request failed');
    assert.equal(lines.length, 1, `${f.api}: ${JSON.stringify(logLines)}`);
    const [line] = lines;
    assert.equal(line.level, 'error');
    assert.equal(line.logger, 'proxy::http');
    assert.equal(line.method, 'GET');
    assert.equal(line.route, f.route);
    assert.match(line.error, new RegExp(`injected fault: ${f.api === 'admin API' ? 'admin' : f.api === 'profiling endpoint' ? 'profiling' : 'control plane'}`));
    assert.match(line.stack, /injected fault/);
    // The same route answers again once the fault is gone.
    assert.equal((await call(f.base(), 'GET', f.path)).status, 200, f.api);
  }
});

test('the body check reads keys and numbers as written: escapes, strings holding brackets, quotes and commas; depth up to the limit passes', () => {
  for (const ok of [
    '{"a":"{[\\"},","b":["x,\\"y",{"a":1}],"c":{"a":{"a":[]}},"d":-0.5e-3,"e":1.7976931348623157e308}',
    '{"constructor":{"x":1},"k":{"constructor":[{"prototype":1}]}}',
    `{"a":${'['.repeat(MAX_JSON_DEPTH - 1)}${']'.repeat(MAX_JSON_DEPTH - 1)}}`,
    '{"x":[1,2,3],"y":[{"x":1},{"x":2}]}',
  ]) {
    JSON.parse(ok);
    assert.equal(jsonBodyProblem(ok), null, ok.slice(0, 80));
  }
  assert.match(jsonBodyProblem(`{"a":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}`)!, /^nested deeper than/);
  assert.equal(jsonBodyProblem('{"a":{"constructor":{"y":1,"prototype":{}}}}'), 'key "constructor" holding "prototype" is not allowed');
  assert.equal(jsonBodyProblem('{"\\u005f_proto__":1}'), 'key "__proto__" is not allowed');
});
