// startEtcd: a real etcd on free ports that answers a client, can be stopped and restarted with its
// data kept, paused with SIGSTOP, and is gone (port closed, data removed) after the test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { Etcd3 } from 'etcd3';
import { startEtcd, type RunningEtcd } from './etcd.ts';

async function answers(endpoint: string): Promise<boolean> {
  try {
    const res = await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(1500) });
    return res.ok;
  } catch {
    return false;
  }
}

test('startEtcd serves a client, keeps its data across stop/restart, can be paused, and is removed after the test', async (t) => {
  let seen: RunningEtcd | null = null;
  await t.test('inner', async (st) => {
    const etcd = await startEtcd(st);
    seen = etcd;
    const client = new Etcd3({ hosts: etcd.endpoint });
    st.after(() => client.close());
    await client.put('k').value('v1');
    assert.equal(await client.get('k').string(), 'v1');
    await etcd.stop();
    assert.equal(etcd.running(), false);
    assert.equal(await answers(etcd.endpoint), false, 'a stopped member answers nothing');
    await etcd.restart();
    assert.equal(await client.get('k').string(), 'v1', 'the data survives a restart');
    etcd.pause();
    assert.equal(await answers(etcd.endpoint), false, 'a paused member answers nothing');
    etcd.resume();
    assert.equal(await answers(etcd.endpoint), true);
  });
  const e = seen as RunningEtcd | null;
  assert.ok(e !== null);
  assert.equal(await answers(e.endpoint), false, 'stopped after the test');
  assert.equal(existsSync(e.dataDir), false, 'its data directory is removed');
});
