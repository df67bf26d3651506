// Running Python clients (Debian's python3-pymongo, python3-mockupdb on /usr/bin/python3) from tests.
import { execFile, spawnSync } from 'node:child_process';

export const PY = '/usr/bin/python3';

/**
 * The `skip` value of a test that needs these Python modules: false when they import (always under
 * CI, where a missing module must fail the test, not skip it), else the reason.
 */
export function pythonSkip(modules: readonly string[], packages: string): string | false {
  const probe = spawnSync(PY, ['-c', `import ${modules.join(', ')}`], { timeout: 30_000 });
  return probe.status === 0 || process.env.CI ? false : `${modules.join(', ')} not installed for ${PY} (apt-get install ${packages})`;
}

/** Runs `script` (python3 -c) with `args`; resolves with the JSON object its last stdout line prints. */
export function runPythonJson(script: string, args: readonly string[], timeoutMs = 90_000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    execFile(PY, ['-c', script, ...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`python script failed: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>);
    });
  });
}

const LOGIN_CHECK = `
import json, sys, pymongo
from pymongo.errors import OperationFailure
good, bad_uri, db, coll = sys.argv[1:5]
out = {}
c = pymongo.MongoClient(good, serverSelectionTimeoutMS=10000)
col = c[db][coll]
col.delete_many({})
col.insert_one({"_id": 1, "by": "pymongo"})
out["doc"] = col.find_one({"_id": 1})
c.close()
bad = pymongo.MongoClient(bad_uri, serverSelectionTimeoutMS=10000)
try:
    bad[db][coll].find_one({})
    out["bad"] = None
except OperationFailure as e:
    out["bad"] = e.code
bad.close()
print(json.dumps(out))
`;

/**
 * PyMongo logs in with `goodUri`, writes `{_id: 1, by: "pymongo"}` to db.coll and reads it back
 * (`doc`); then a client with `badUri` tries a find (`bad`: the error code it got, or null).
 */
export function pymongoLoginCheck(goodUri: string, badUri: string, db: string, coll: string): Promise<{ doc: unknown; bad: unknown }> {
  return runPythonJson(LOGIN_CHECK, [goodUri, badUri, db, coll]) as Promise<{ doc: unknown; bad: unknown }>;
}
