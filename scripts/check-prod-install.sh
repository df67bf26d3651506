#!/usr/bin/env bash
# A production install runs the proxy: a fresh clone of this repository's HEAD (committed files
# only), `npm install --omit=dev` (no test or development package), then
#   1. `proxy serve` with an empty pipeline and the embedded development upstream, before any build,
#   2. `npm run build` (built-in plugins, native addon) and `proxy serve` with built-in steps,
# each answering a client's hello, insert and find over the wire (with the clone's own `bson`, since
# the driver is a development package). Called by .ci/run after `npm test`; about a minute with a
# warm npm cache (better-sqlite3 compiles from source), bounded by timeouts within 7 minutes.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/prodcheck.XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-prod-install: $*" >&2; exit 1; }

git clone -q "$root" "$work/app"
cd "$work/app"
echo "check-prod-install: npm install --omit=dev in a fresh clone of $(git rev-parse --short HEAD)"
timeout 300 npm install --omit=dev --prefer-offline --no-audit --no-fund --loglevel=error
# (typescript is absent from dependencies but may still be installed: valibot names it as an
# optional peer.)
for dev in mongodb mongosh smtp-server playwright-core assemblyscript-json; do
  [ ! -e "node_modules/$dev" ] || fail "node_modules/$dev is installed: a development package in dependencies"
done

# Serves `config` (JSON text), waits for the ready banner, and runs a hello, an insert and a find
# against the connection string it printed.
serve_and_query() {
  local name="$1" config="$2"
  printf '%s\n' "$config" > "$work/$name.json"
  node bin/proxy.mjs serve --config "$work/$name.json" > "$work/$name.out" 2> "$work/$name.err" &
  server_pid=$!
  local uri=""
  for _ in $(seq 1 600); do
    uri="$(grep -o 'mongodb://[^"]*' "$work/$name.out" || true)"
    [ -n "$uri" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/$name.err" >&2; fail "$name: proxy serve exited before it was ready"; }
    sleep 0.1
  done
  [ -n "$uri" ] || { cat "$work/$name.err" >&2; fail "$name: no ready banner within 60 s"; }
  timeout 30 node --input-type=module - "$uri" <<'EOF' || { cat "$work/$name.err" >&2; fail "$name: the proxy did not answer"; }
import { connect } from 'node:net';
import { serialize, deserialize } from 'bson';
const { hostname, port } = new URL(process.argv[2]);
const socket = connect(Number(port), hostname);
await new Promise((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
let buffered = Buffer.alloc(0);
let waiting = null;
socket.on('data', (d) => { buffered = Buffer.concat([buffered, d]); waiting?.(); });
let requestId = 0;
/** One OP_MSG (opcode 2013: header, flagBits, a kind-0 body section) and its reply's body. */
async function command(doc) {
  const body = serialize(doc);
  const header = Buffer.alloc(21);
  header.writeInt32LE(21 + body.length, 0);
  header.writeInt32LE(++requestId, 4);
  header.writeInt32LE(2013, 12);
  socket.write(Buffer.concat([header, body]));
  while (buffered.length < 4 || buffered.length < buffered.readInt32LE(0)) await new Promise((r) => { waiting = r; });
  const length = buffered.readInt32LE(0);
  const reply = deserialize(buffered.subarray(21, length));
  buffered = buffered.subarray(length);
  return reply;
}
const hello = await command({ hello: 1, $db: 'admin' });
if (hello.ok !== 1 || hello.msg !== 'isdbgrid') throw new Error(`hello: ${JSON.stringify(hello)}`);
const insert = await command({ insert: 'prodcheck', documents: [{ _id: 1, a: 'b' }], $db: 'test' });
if (insert.ok !== 1 || insert.n !== 1) throw new Error(`insert: ${JSON.stringify(insert)}`);
const find = await command({ find: 'prodcheck', filter: {}, $db: 'test' });
if (find.ok !== 1 || find.cursor.firstBatch[0]?.a !== 'b') throw new Error(`find: ${JSON.stringify(find)}`);
socket.end();
EOF
  kill "$server_pid"
  wait "$server_pid" || true
  server_pid=""
  echo "check-prod-install: $name: proxy serve answered hello, insert and find at $uri"
}

# 1. Before any build: an empty pipeline needs no compiled plugin.
serve_and_query empty '{ "listen": "127.0.0.1:0", "devdb": { "port": 0 }, "log": { "level": "warn" }, "pipeline": { "request": [], "response": [] } }'

# 2. The build works without development packages (an example needing one is skipped), and the
#    built-in steps it compiles run.
timeout 150 npm run build --silent
serve_and_query builtins '{ "listen": "127.0.0.1:0", "devdb": { "port": 0 }, "log": { "level": "warn" }, "pipeline": { "request": ["rate_limit", "filter"], "response": ["metrics"] }, "steps": { "rate_limit": { "config": { "max_rps": 1000 } } } }'
echo "check-prod-install: ok"
