// The first hello's client metadata, bounded as a mongos bounds it: a document over 512 bytes and an
// application name over 128 bytes are refused with the server's codes (the connection keeps its
// metadata for its life, so a client could otherwise make it hold up to a whole message). The
// connection stays usable: a hello with metadata a driver would send then succeeds. Real drivers'
// metadata passes (the Node driver below).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { startStack, type Stack } from '../helpers/stack.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';

const T = { timeout: 30_000 };
const DRIVER = { driver: { name: 'raw-test', version: '1.0' }, os: { type: 'Linux' } };

describe('client metadata limits', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({ logLevel: 'error' });
  });

  after(async () => {
    await stack?.close();
  });

  const cases: Array<[string, Record<string, unknown>, number, string]> = [
    ['a 129-byte application name', { application: { name: 'a'.repeat(129) }, ...DRIVER }, 184, 'ClientMetadataAppNameTooLarge'],
    ['a 65-character name of two-byte characters (130 bytes)', { application: { name: 'é'.repeat(65) }, ...DRIVER }, 184, 'ClientMetadataAppNameTooLarge'],
    ['a 600-byte platform (document over 512 bytes)', { ...DRIVER, platform: 'p'.repeat(600) }, 185, 'ClientMetadataDocumentTooLarge'],
    ['a 100 KB application name', { application: { name: 'x'.repeat(100_000) }, ...DRIVER }, 185, 'ClientMetadataDocumentTooLarge'],
  ];
  for (const [name, client, code, codeName] of cases) {
    test(`${name} → ${codeName} (${code}); a later hello with a driver's metadata succeeds`, T, async () => {
      const c = await RawClient.connect(stack.proxy.port);
      try {
        const refused = await c.hello({ client });
        assert.equal(refused.ok, 0);
        assert.equal(refused.code, code);
        assert.equal(refused.codeName, codeName);
        const ok = await c.hello({ client: { application: { name: 'a'.repeat(128) }, ...DRIVER } });
        assert.equal(ok.ok, 1);
        assert.equal(ok.msg, 'isdbgrid');
        const ping = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
        assert.equal(ping.body!.ok, 1);
      } finally {
        c.destroy();
      }
    });
  }

  test('the Node driver with a 128-byte appName connects and is served', T, async () => {
    const driver = new MongoClient(stack.uri, { serverSelectionTimeoutMS: 5000, appName: 'n'.repeat(128) });
    try {
      const r = await driver.db('admin').command({ ping: 1 });
      assert.equal(r.ok, 1);
    } finally {
      await driver.close();
    }
  });
});
