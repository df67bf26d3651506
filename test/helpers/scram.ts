// Test helper: what a SCRAM-SHA-256 conversation's first step shows of a proxy with client
// authentication (`auth`): the salt named for a user — a real user's, or an unknown user's decoy.
import assert from 'node:assert/strict';
import { Binary } from 'bson';
import { ScramClient } from '../../runtime/upstream/index.ts';
import { RawClient, opMsg } from './wire.ts';

/** The salt the server-first message of a SCRAM conversation for `user` names, and the worker that answered (a load-balanced hello's serviceId). */
export async function saltOf(port: number, user: string): Promise<{ salt: string; worker: string }> {
  const raw = await RawClient.connect(port);
  try {
    const hello = await raw.hello({ loadBalanced: true });
    const c = new ScramClient({ username: user, password: 'whatever', source: 'admin', mechanism: 'SCRAM-SHA-256' });
    const first = (await raw.roundTrip(opMsg({
      saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(c.first()), options: { skipEmptyExchange: true }, $db: 'admin',
    }))).body!;
    assert.equal(first.ok, 1, JSON.stringify(first));
    const salt = /(?:^|,)s=([^,]+)/.exec(Buffer.from((first.payload as Binary).buffer).toString('utf8'))?.[1];
    assert.ok(salt !== undefined);
    return { salt, worker: String(hello.serviceId) };
  } finally {
    raw.destroy();
  }
}
