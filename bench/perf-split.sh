#!/usr/bin/env bash
# Where one proxy's CPU goes per request, by kind of code: runs `proxy serve` with the crossover
# base configuration plus a fragment, drives it with ../shared/bench/rawload-vary.mjs (8
# connections), records `perf record -F 2000 -g` for 10 s, and prints µs per request for the
# kernel's network and other work, WebAssembly, V8 builtins, libc, Node, and each runtime/ file.
# Run from the project root after npm run build; needs `perf` (Debian linux-perf).
# Usage: bench/perf-split.sh ['<fragment JSON>']   e.g. '{"pipeline":{"request":[],"response":[]}}'
set -eu
D=$(mktemp -d /tmp/perf-split.XXXX); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null || true; done; rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp); P=$(fp)
node ../shared/bench/stub.mjs $S & PIDS+=($!)
FRAGMENT=${1:-"{}"}
node bench/crossover-config.mjs $P $S "$FRAGMENT" > $D/proxy.json
node --perf-basic-prof bin/proxy.mjs serve --config $D/proxy.json --workers 1 > $D/proxy.log 2>&1 & X=$!; PIDS+=($X)
for i in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.1; done
node ../shared/bench/rawload-vary.mjs $P 8 4000 $X > /dev/null
perf record -F 2000 -g -p $X -o $D/perf.data -- sleep 10 > /dev/null 2>&1 & R=$!
node ../shared/bench/rawload-vary.mjs $P 8 10000 $X > $D/load.json; wait $R
cat $D/load.json
N=$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(Math.round(r.rps*10))' $D/load.json)
perf report -i $D/perf.data --no-children --sort dso,sym --stdio -g none -n 2>/dev/null | grep -v '^#' | grep -v '^$' |
awk -v N=$N '{ n=$2; dso=$3; $1=""; $2=""; $3=""; s=$0; f=dso
  if (dso ~ /kernel/) { f="kernel: other"; if (s ~ /tcp|ip_|skb|net_|sock|napi|dev_queue|inet|bbr/) f="kernel: network" }
  else if (s ~ /JS:.*file:\/\/.*\/runtime\//) { match(s, /runtime\/[a-z-]+\/[a-z-]+\.ts/); f=substr(s, RSTART, RLENGTH) }
  else if (s ~ /wasm-function|__proxy_entry|wasm-to-js|js-to-wasm/) f="WebAssembly"
  else if (s ~ /JS:.*node:/) f="Node JS library"
  else if (s ~ /Builtins_/) f="V8 builtins"
  else if (s ~ /Scavenge|Sweep|Mark|Evacuat/) f="V8 GC"
  else if (s ~ /malloc|free|calloc|_int_|unlink_chunk|memcpy|memmove|memset/) f="libc alloc/copy"
  else if (dso ~ /node/) f="Node/V8 native"
  a[f] += n } END { for (k in a) printf "%7.2f µs/request  %s\n", a[k] * 500 / N, k }' | sort -rn
