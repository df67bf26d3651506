// Webhook, pager and gate URLs never reach a link-local address (169.254.0.0/16 — the cloud
// metadata service at 169.254.169.254 —, fe80::/10) or the unspecified one (0.0.0.0/8, ::, which
// connect to this host): refused where the URL is given (the config file: key path; the control
// plane: 400 PROXY_ERR_CANARY_URL_REFUSED) when the host is such an address, and at delivery when a
// host name resolves to one. Loopback and private addresses stay allowed. The same holds for the
// SMTP server of email channels (notifications.smtp.host), which gets the SMTP AUTH credentials;
// its refusal at delivery has its own code, PROXY_ERR_SMTP_HOST_REFUSED.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { lookup } from 'node:dns';
import { parseConfig, ConfigError } from '../../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../../runtime/app/serve.ts';
import { Logger } from '../../../runtime/log/index.ts';
import { postJson } from '../../../runtime/canary/notify/http-post.ts';
import { httpGate } from '../../../runtime/canary/gate.ts';
import { EmailSender } from '../../../runtime/canary/notify/email.ts';
import { event, smtpReceiver } from './helpers.ts';

const SECRET = 'a-webhook-secret-of-16+';
const URL_REFUSED = 'PROXY_ERR_CANARY_URL_REFUSED';
/** The SMTP server's own code (only ever reported at delivery: the config file refuses an address literal with its key path). */
const SMTP_HOST_REFUSED = 'PROXY_ERR_SMTP_HOST_REFUSED';
const TOKEN = 'canary-test-token-0123456789';
let receiver: Server;
let port = 0;
/** Requests to /direct (the delivery tests'; the canary started above posts to /hook and /gate). */
let received = 0;
let proxy: RunningProxy;

before(async () => {
  receiver = createServer((req, res) => { if (req.url === '/direct') received++; req.resume(); res.end('{}'); });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  port = (receiver.address() as AddressInfo).port;
  proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    control_plane: { port: 0, tokens: [TOKEN] },
    canary: { data_dir: mkdtempSync(join(tmpdir(), 'canary-addr-')) },
    notifications: { webhook_secret: SECRET },
    rollback_rules: { check_interval: '1h' },
  }, null), { log: new Logger('test', 'error') });
});

after(async () => {
  await proxy?.close();
  receiver.close();
});

const REFUSED = ['http://169.254.169.254/latest/meta-data/', 'http://2852039166/', 'http://[::ffff:169.254.169.254]/', 'http://[fe80::1]:8080/',
  'http://0.0.0.0:9/', 'http://[::]:9/'];

test('config file: a webhook, pager or gate URL with a link-local or unspecified host is refused with its key path', () => {
  const issues = (cfg: unknown): string[] => {
    try {
      parseConfig(cfg, 'proxy.yaml');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.issues.map((i) => `${i.path}: ${i.message}`);
    }
    return [];
  };
  for (const url of REFUSED) {
    const [w] = issues({ notifications: { webhook_secret: SECRET, channels: [{ type: 'webhook', url }] } });
    assert.match(w ?? 'accepted', /^notifications\.channels\[0\]\.url: \S+ is (a link-local|the unspecified) address: the canary never calls/, url);
    const [p] = issues({ notifications: { channels: [{ type: 'pager', integration_key: 'K', url }] } });
    assert.match(p ?? 'accepted', /^notifications\.channels\[0\]\.url: /, url);
    const [g] = issues({ canary: { stages: [{ traffic_pct: 100, min_duration: '0', min_requests: 0, gate: { url } }] } });
    assert.match(g ?? 'accepted', /^canary\.stages\[0\]\.gate\.url: /, url);
  }
  // Loopback, private ranges and names are allowed.
  for (const url of ['http://127.0.0.1:1/x', 'http://10.0.0.8/x', 'http://192.168.1.1/x', 'http://[::1]:1/x', 'http://hooks.example.com/x']) {
    assert.deepEqual(issues({ notifications: { webhook_secret: SECRET, channels: [{ type: 'webhook', url }] } }), [], url);
  }
});

test('control plane: 400 PROXY_ERR_CANARY_URL_REFUSED naming the key, for inline channels and stage gates', async () => {
  const start = (body: unknown) => fetch(`${proxy.controlPlaneUrl}/api/v1/canary`, { method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    .then(async (r) => ({ status: r.status, body: await r.json() as { error?: { code: string; message: string }; canary_id?: string } }));
  const ok = { pipeline_id: 'default', candidate_config: { steps: [{ type: 'logging', config: {} }] } };
  for (const url of REFUSED) {
    const ch = await start({ ...ok, notifications: { channels: [{ type: 'webhook', url }] } });
    assert.equal(ch.status, 400, url);
    assert.equal(ch.body.error?.code, 'PROXY_ERR_CANARY_URL_REFUSED');
    assert.match(ch.body.error!.message, /^notifications\.channels\[0\]\.url: \S+ is (a link-local|the unspecified) address/);
    const gate = await start({ ...ok, stages: [{ traffic_pct: 10, min_duration: '1h', min_requests: 0, gate: { url } },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 }] });
    assert.equal(gate.status, 400, url);
    assert.equal(gate.body.error?.code, 'PROXY_ERR_CANARY_URL_REFUSED');
    assert.match(gate.body.error!.message, /^stages\.0\.gate\.url: /);
  }
  const fine = await start({ ...ok, notifications: { channels: [{ type: 'webhook', url: `http://127.0.0.1:${port}/hook` }] },
    stages: [{ traffic_pct: 10, min_duration: '1h', min_requests: 0, gate: { url: `http://127.0.0.1:${port}/gate` } },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 }] });
  assert.equal(fine.status, 201, JSON.stringify(fine.body));
});

test('delivery: an address literal is not called (0.0.0.0 would reach this host); a gate holds', async () => {
  const before = received;
  const out = await postJson(`http://0.0.0.0:${port}/direct`, '{}', {}, 2000);
  assert.equal(out.ok, false);
  assert.ok(!out.ok && out.error.startsWith(`${URL_REFUSED}: 0.0.0.0 is the unspecified address`), JSON.stringify(out));
  assert.ok(!out.ok && out.retry === false);
  const gate = await httpGate({ url: `http://0.0.0.0:${port}/direct`, timeout_ms: 2000 }, {});
  assert.equal(gate.ok, false);
  assert.match(gate.detail, new RegExp(`^${URL_REFUSED}: `));
  assert.equal(received, before, 'the receiver was never called');
});

// Names of the test's own: the resolver is what the request's socket asks (dns.lookup otherwise).
const names: Record<string, { address: string; family: number }> = {
  'metadata.test': { address: '169.254.169.254', family: 4 },
  'v6.test': { address: 'fe80::1', family: 6 },
  'receiver.test': { address: '127.0.0.1', family: 4 },
};
const resolver = ((hostname: string, opts: { all?: boolean }, cb: (err: Error | null, a: unknown, f?: number) => void) => {
  const a = names[hostname];
  if (a === undefined) { cb(Object.assign(new Error(`no ${hostname}`), { code: 'ENOTFOUND' }), []); return; }
  if (opts.all === true) cb(null, [a]);
  else cb(null, a.address, a.family);
}) as unknown as typeof lookup;

test('delivery: a host name resolving to a link-local address is not called; one resolving to loopback is', async () => {
  const before = received;
  for (const host of ['metadata.test', 'v6.test']) {
    const out = await postJson(`http://${host}:${port}/direct`, '{}', {}, 2000, resolver);
    assert.ok(!out.ok && out.error.startsWith(`${URL_REFUSED}: ${host} resolves to ${names[host].address}, a link-local address`), JSON.stringify(out));
    assert.ok(!out.ok && out.retry, 'retried like any network failure (the name may resolve elsewhere later)');
  }
  assert.equal(received, before, 'the receiver was never called');
  const ok = await postJson(`http://receiver.test:${port}/direct`, '{}', {}, 2000, resolver);
  assert.deepEqual(ok, { ok: true, detail: 'HTTP 200' });
  assert.equal(received, before + 1);
});

test('config file: notifications.smtp.host naming a link-local or unspecified address is refused with its key path', () => {
  const smtpIssues = (host: string): string[] => {
    try {
      parseConfig({ notifications: { smtp: { host, from: 'proxy@example.com', user: 'proxy', password: 'secret' } } }, 'proxy.yaml');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.issues.map((i) => `${i.path}: ${i.message}`);
    }
    return [];
  };
  for (const host of ['169.254.169.254', '2852039166', '0xa9.0xfe.0xa9.0xfe', '::ffff:169.254.169.254', '[fe80::1]', 'fe80::1', '0.0.0.0', '0',
    '::']) {
    const [issue] = smtpIssues(host);
    assert.match(issue ?? 'accepted', /^notifications\.smtp\.host: \S+ is (a link-local|the unspecified) address: the canary never calls link-local/,
      host);
  }
  for (const host of ['127.0.0.1', '::1', '10.0.0.8', 'smtp.example.com', 'mail_relay']) assert.deepEqual(smtpIssues(host), [], host);
});

test('delivery: an SMTP host name resolving to a link-local address is not connected to (no AUTH sent), and the attempt is retried', async () => {
  const smtp = await smtpReceiver({ user: 'proxy', password: 'secret' });
  const sender = (host: string) => new EmailSender({ host, port: smtp.port, secure: false, from: 'proxy@example.com', user: 'proxy',
    password: 'secret' }, 2000, resolver);
  const channel = { type: 'email' as const, addresses: ['ops@example.com'] };
  try {
    for (const host of ['metadata.test', 'v6.test']) {
      const s = sender(host);
      const out = await s.send(event('canary.rolled_back'), channel, 'k', 'proxy-test-1');
      s.close();
      assert.ok(!out.ok && out.error.startsWith(`${SMTP_HOST_REFUSED}: ${host} resolves to ${names[host].address}, a link-local address`),
        JSON.stringify(out));
      assert.ok(!out.ok && out.retry, 'retried like any network failure of SMTP');
    }
    assert.equal(smtp.mails.length, 0, 'nothing was sent');
    const s = sender('receiver.test');
    const ok = await s.send(event('canary.rolled_back'), channel, 'k', 'proxy-test-1');
    s.close();
    assert.equal(ok.ok, true, JSON.stringify(ok));
    assert.equal(smtp.mails.length, 1);
    assert.equal(smtp.mails[0].user, 'proxy');
  } finally {
    await smtp.close();
  }
});
