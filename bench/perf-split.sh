#!/usr/bin/env bash
# Where one proxy's CPU goes per request, by kind of code: runs `proxy serve` with the crossover
# base configuration plus a fragment, drives it with ../shared/bench/rawload-vary.mjs (8
# connections), records `perf record -k mono -F 2000 -g` for 10 s, and prints µs per request for
# the kernel's network and other work, WebAssembly, V8 builtins, libc, Node, and each runtime/ file.
# JavaScript and WebAssembly code is named from a JIT dump: the proxy runs `node --perf-prof`, which
# writes jit-<pid>.dump into its working directory (a directory of its own under the temp dir), and
# `perf inject --jit` (which needs the `-k mono` clock) resolves each sample against the code at that
# address when it was taken. --perf-basic-prof's /tmp/perf-<pid>.map is not used: it keeps every
# name an address ever had, so once V8 reuses a code address perf names its samples after the wrong
# function (and file). The proxy is stopped (SIGINT) before the inject: V8 writes the rest of the
# dump as it exits. Other compiled code (node_modules, V8 stubs, regular expressions): "other JIT code".
# Run from the project root after npm run build; needs `perf` (Debian linux-perf).
# Usage: bench/perf-split.sh ['<fragment JSON>']   e.g. '{"pipeline":{"request":[],"response":[]}}'
set -eu
# Not /tmp/perf-…: perf takes any file whose name starts so for a perf-<pid>.map and reads no ELF
# symbols from it (the jitted-*.so files perf inject writes beside the dump would stay unnamed).
D=$(mktemp -d /tmp/split-perf.XXXX); PIDS=()
# perf's build-id cache (a copy of each of those thousands of .so files) goes with $D, not to ~/.debug.
perf() { command perf --buildid-dir $D/.debug "$@"; }
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null || true; done; rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp); P=$(fp)
node ../shared/bench/stub.mjs $S & PIDS+=($!)
FRAGMENT=${1:-"{}"}
node bench/crossover-config.mjs $P $S "$FRAGMENT" > $D/proxy.json
ROOT=$(pwd); mkdir $D/proxy
# Its working directory is its own (node --perf-prof writes jit-<pid>.dump there); exec: $! is node's pid.
(cd $D/proxy && exec node --perf-prof "$ROOT/bin/proxy.mjs" serve --config $D/proxy.json --workers 1 > $D/proxy.log 2>&1) & X=$!; PIDS+=($X)
for i in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.1; done
node ../shared/bench/rawload-vary.mjs $P 8 4000 $X > /dev/null
perf record -k mono -F 2000 -g -p $X -o $D/perf.data -- sleep 10 > /dev/null 2>&1 & R=$!
node ../shared/bench/rawload-vary.mjs $P 8 10000 $X > $D/load.json; wait $R
# Stop the proxy (≤ 15 s) so V8 flushes its JIT dump, then resolve the samples against it.
kill -INT $X || true
for i in $(seq 1 150); do [ "$(ps -o stat= -p $X | grep -vc Z || true)" = 0 ] && break; sleep 0.1; done
[ "$(ps -o stat= -p $X | grep -vc Z || true)" = 0 ] || { echo "perf-split: the proxy did not exit on SIGINT; its JIT dump may be incomplete" >&2; kill -KILL $X; }
wait $X || true
perf inject --jit -i $D/perf.data -o $D/perf.jit.data > $D/inject.log 2>&1 || { echo "perf-split: perf inject --jit failed:" >&2; cat $D/inject.log >&2; exit 1; }
cat $D/load.json
N=$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(Math.round(r.rps*10))' $D/load.json)
perf report -i $D/perf.jit.data --no-children --sort dso,sym --stdio -g none -n 2>/dev/null | grep -v '^#' | grep -v '^$' |
awk -v N=$N '{ n=$2; dso=$3; $1=""; $2=""; $3=""; s=$0; f=dso
  if (dso ~ /kernel/) { f="kernel: other"; if (s ~ /tcp|ip_|skb|net_|sock|napi|dev_queue|inet|bbr/) f="kernel: network" }
  else if (s ~ /JS:.*file:\/\/.*\/runtime\//) { match(s, /runtime\/[a-z-]+\/[a-z-]+\.ts/); f=substr(s, RSTART, RLENGTH) }
  else if (s ~ /wasm-function|__proxy_entry|wasm-to-js|js-to-wasm/) f="WebAssembly"
  else if (s ~ /JS:.*node:/) f="Node JS library"
  else if (s ~ /Builtins_/) f="V8 builtins"
  else if (s ~ /Scavenge|Sweep|Mark|Evacuat/) f="V8 GC"
  else if (s ~ /malloc|free|calloc|_int_|unlink_chunk|memcpy|memmove|memset/) f="libc alloc/copy"
  else if (dso ~ /node/) f="Node/V8 native"
  else if (dso ~ /^jitted-[0-9]+-[0-9]+\.so$|^\[JIT\]$/) f="other JIT code"
  a[f] += n } END { for (k in a) printf "%7.2f µs/request  %s\n", a[k] * 500 / N, k }' | sort -rn
