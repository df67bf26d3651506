// `proxy devdb --replica-set 3`: devdb as a replica set in its own process, checked by the Node
// driver's own Server Discovery and Monitoring (connected straight to the members, no proxy): it
// finds the primary from the hello fields, writes there, reads a secondary, and follows a
// `replSetStepDown` to the new primary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';

const bin = join(process.cwd(), 'bin/proxy.mjs');

test('proxy devdb --replica-set 3: the Node driver discovers it, writes to the primary, reads a secondary, follows a step-down', async () => {
  const child = spawn(process.execPath, [bin, 'devdb', '--port', '0', '--replica-set', '3'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let c: MongoClient | null = null;
  try {
    const uri = await new Promise<string>((resolve, reject) => {
      let text = '';
      const timer = setTimeout(() => reject(new Error(`no URI printed: ${text}`)), 60_000);
      child.stdout!.on('data', (d) => {
        text += d;
        const m = /^(mongodb:\/\/\S+)$/m.exec(text);
        if (m !== null) { clearTimeout(timer); resolve(m[1]); }
      });
      child.once('exit', (code) => reject(new Error(`exited ${code}: ${text}`)));
    });
    assert.match(uri, /^mongodb:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/\?replicaSet=rs0$/);
    c = new MongoClient(uri, { serverSelectionTimeoutMS: 15000, heartbeatFrequencyMS: 500 });
    const col = c.db('app').collection<{ _id: number }>('cli');
    await col.insertOne({ _id: 1 });
    const hello = await c.db('admin').command({ hello: 1 });
    assert.equal(hello.setName, 'rs0');
    assert.equal(hello.hosts.length, 3);
    const first = hello.primary as string;
    assert.ok(await col.findOne({ _id: 1 }, { readPreference: 'secondary' }));
    // Step down: the driver sees another primary and the next write goes there.
    const direct = new MongoClient(`mongodb://${first}/?directConnection=true`);
    try {
      await direct.db('admin').command({ replSetStepDown: 60 });
      const again = await direct.db('admin').command({ hello: 1 });
      assert.equal(again.isWritablePrimary, false);
      assert.notEqual(again.primary, first);
    } finally {
      await direct.close();
    }
    await col.insertOne({ _id: 2 });
    const after = await c.db('admin').command({ hello: 1 });
    assert.notEqual(after.primary, first);
    assert.equal(await col.countDocuments(), 2);
  } finally {
    await c?.close();
    child.kill('SIGTERM');
  }
});
