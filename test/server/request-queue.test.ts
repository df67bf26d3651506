// A connection's intake (runtime/server/request-queue.ts): requests come out in arrival order with
// their read times, and reading pauses past the bound or while replies are blocked, resuming only
// at or below half the bound (hysteresis) and once replies drain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { RequestQueue } from '../../runtime/server/request-queue.ts';

function fakeSocket(): { socket: Socket; calls: string[] } {
  const calls: string[] = [];
  const socket = { pause: () => calls.push('pause'), resume: () => calls.push('resume') } as unknown as Socket;
  return { socket, calls };
}

test('requests come out in arrival order, each with when it was read; lastReadAt is the newest', () => {
  const q = new RequestQueue(fakeSocket().socket, 4);
  q.push(Buffer.from('a'), 10);
  q.push(Buffer.from('b'), 20);
  assert.equal(q.lastReadAt, 20);
  assert.equal(q.length, 2);
  assert.equal(q.shift().toString(), 'a');
  assert.equal(q.readAt, 10);
  assert.equal(q.shift().toString(), 'b');
  assert.equal(q.readAt, 20);
  assert.equal(q.length, 0);
});

test('push says when the queue goes over its bound; reading pauses then, and resumes at or below half the bound', () => {
  const { socket, calls } = fakeSocket();
  const q = new RequestQueue(socket, 4);
  for (let i = 0; i < 4; i++) assert.equal(q.push(Buffer.alloc(1), i), false, `request ${i + 1} of 4 is within the bound`);
  assert.equal(q.push(Buffer.alloc(1), 4), true, 'the fifth request is over the bound');
  q.updateReading(false);
  assert.equal(q.paused, true);
  q.updateReading(false);
  assert.deepEqual(calls, ['pause'], 'paused once');
  q.shift();
  q.shift();
  q.updateReading(false);
  assert.equal(q.paused, true, '3 queued: above half the bound, still paused');
  q.shift();
  q.updateReading(false);
  assert.equal(q.paused, false, '2 queued: half the bound, reading resumes');
  assert.deepEqual(calls, ['pause', 'resume']);
});

test('blocked replies pause reading whatever the queue holds; clear empties it', () => {
  const { socket, calls } = fakeSocket();
  const q = new RequestQueue(socket, 4);
  q.updateReading(true);
  assert.equal(q.paused, true);
  q.updateReading(false);
  assert.equal(q.paused, false);
  assert.deepEqual(calls, ['pause', 'resume']);
  q.push(Buffer.alloc(1), 1);
  q.clear();
  assert.equal(q.length, 0);
});

test('resumeToDrain: a paused queue reads again and its quiet time starts then; a reading one is left as it is', () => {
  const { socket, calls } = fakeSocket();
  const q = new RequestQueue(socket, 2);
  for (let i = 0; i < 3; i++) q.push(Buffer.alloc(1), 10);
  q.updateReading(false);
  assert.equal(q.paused, true);
  q.clear();
  q.resumeToDrain(500);
  assert.equal(q.paused, false);
  assert.equal(q.lastReadAt, 500, 'the quiet time counts from the resume');
  q.resumeToDrain(900);
  assert.equal(q.lastReadAt, 500, 'not paused: nothing changes');
  assert.deepEqual(calls, ['pause', 'resume']);
});

test('the queue is bounded in bytes too: a push past the byte bound pauses reading, which resumes at or below half of it', () => {
  const { socket, calls } = fakeSocket();
  const q = new RequestQueue(socket, 64, 100);
  assert.equal(q.push(Buffer.alloc(60), 1), false, '60 of 100 bytes');
  assert.equal(q.push(Buffer.alloc(60), 2), true, '120 bytes: over the byte bound, although 2 requests are far below 64');
  assert.equal(q.bytes, 120);
  q.updateReading(false);
  assert.equal(q.paused, true);
  q.push(Buffer.alloc(40), 3);
  q.shift();
  q.updateReading(false);
  assert.equal(q.paused, true, '100 bytes: above half the byte bound, still paused');
  q.shift();
  q.updateReading(false);
  assert.equal(q.paused, false, '40 bytes: at most half the byte bound, reading resumes');
  assert.deepEqual(calls, ['pause', 'resume']);
  q.clear();
  assert.equal(q.bytes, 0);
});
