// The fleet's pipeline configuration when etcd cannot be reached: reading the current generation
// (GET /api/v1/fleet/pipelines) and publishing one (POST) answer 503
// PROXY_ERR_CANARY_STORE_UNREACHABLE, not an internal error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CanaryError } from '../../runtime/canary/errors.ts';
import { FleetPipelines } from '../../runtime/fleet/pipelines.ts';
import type { FleetStore } from '../../runtime/fleet/store.ts';
import type { FleetMember } from '../../runtime/fleet/member.ts';
import { parseConfig } from '../../runtime/config/index.ts';

const silent = { info: () => {}, warn: () => {}, error: () => {} };

function pipelinesOver(store: Partial<FleetStore>): FleetPipelines {
  return new FleetPipelines({ store: { instanceId: 'i1', ...store } as unknown as FleetStore, member: {} as FleetMember,
    running: { config: parseConfig({}, null), reload: async () => {} }, log: silent });
}

const down = () => Promise.reject(new Error('Execution prevented because the circuit breaker is open'));
const unreachable = (err: unknown) => err instanceof CanaryError && err.code === 'PROXY_ERR_CANARY_STORE_UNREACHABLE' &&
  /the fleet store cannot be reached: .*circuit breaker/.test(err.message);

test('GET /api/v1/fleet/pipelines with the store unreachable: PROXY_ERR_CANARY_STORE_UNREACHABLE', async () => {
  await assert.rejects(pipelinesOver({ get: down }).current(), unreachable);
});

test('a publication whose write fails because the store went away: PROXY_ERR_CANARY_STORE_UNREACHABLE', async () => {
  const p = pipelinesOver({ get: () => Promise.resolve(null), cas: down });
  await assert.rejects(p.publish({ pipeline: { request: [] } }), unreachable);
  await assert.rejects(pipelinesOver({ get: down }).publish({ pipeline: { request: [] } }), unreachable);
});
