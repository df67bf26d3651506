#!/usr/bin/env bash
# CPU per request of two states with the proxy CPU-bound: one proxy at a time on core 1, driven by
# ../shared/bench/rawload-vary.mjs (a distinct find filter per request, one request outstanding per
# connection, enough connections to keep the proxy's core busy) on core 0 with the stub upstream.
# The states run one after the other, A B B A A B … (each window a fresh proxy, 3 s of warm-up
# then the measured seconds), so slow drift cancels in the pairs; the figure is B's CPU per request
# over A's (user + system, from /proc) per pair, and the proxy's core utilisation is printed so a
# window that was not CPU-bound shows.
#
# Why this beside bench/crossover-rate.sh: at a fixed 5,000 req/s both proxies sit at about 15% of
# a core and share it with each other, so every request starts with cold caches; a state that
# touches more code and memory per request (ten plugin instances) pays for that coldness on every
# request. A CPU-bound proxy keeps its working set warm. The two readings bracket the cost.
# Run from the project root after npm run build:
#   bench/saturated-ab.sh [--pairs 3] [--secs 8] [--conns 16] A-fragment B-fragment
set -u
PAIRS=3; SECS=8; C=16
while [ $# -gt 2 ]; do
  case $1 in --pairs) PAIRS=$2 ;; --secs) SECS=$2 ;; --conns) C=$2 ;; *) echo "unknown option $1" >&2; exit 2 ;; esac; shift 2
done
FA=${1:-'{}'}; FB=${2:-'{}'}
D=$(mktemp -d /tmp/saturated-ab.XXXX); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; sleep 0.3; for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp)
taskset -c 0 node ../shared/bench/stub.mjs $S & PIDS+=($!)
window() { # state-letter fragment
  local P H; P=$(fp); H=$(fp)
  node bench/crossover-config.mjs $P $S "${2//PROFPORT/$H}" > $D/p.json
  taskset -c 1 node bin/proxy.mjs serve --config $D/p.json --workers 1 > $D/p.out 2> $D/p.log & local X=$!; PIDS+=($X)
  for i in $(seq 1 600); do grep -q mongodb:// $D/p.out 2>/dev/null && break; sleep 0.1; done
  taskset -c 0 node ../shared/bench/rawload-vary.mjs $P $C 3000 > /dev/null
  local t0; t0=$(date +%s%N)
  taskset -c 0 node ../shared/bench/rawload-vary.mjs $P $C $((SECS*1000)) $X > $D/r.json
  local t1; t1=$(date +%s%N)
  node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));const ms=(process.argv[3]-process.argv[2])/1e6;
console.log(JSON.stringify({state:process.argv[4],rps:r.rps,cpu_us:r.proxy_cpu_us_per_req,core:+(r.rps*r.proxy_cpu_us_per_req/1e6).toFixed(2),errors:r.errors}))' $D/r.json $t0 $t1 $1 | tee -a $D/rows
  kill $X; wait $X 2>/dev/null; }
for p in $(seq 1 $PAIRS); do
  if [ $((p % 2)) = 1 ]; then window A "$FA"; window B "$FB"; else window B "$FB"; window A "$FA"; fi
done
node -e '
const rows=require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n").map(JSON.parse);
const A=rows.filter(r=>r.state==="A"),B=rows.filter(r=>r.state==="B");const r=A.map((a,i)=>B[i].cpu_us/a.cpu_us);
const gm=Math.exp(r.reduce((s,x)=>s+Math.log(x),0)/r.length);const mean=(xs,k)=>xs.reduce((s,x)=>s+x[k],0)/xs.length;
console.log(`B/A proxy CPU per request, CPU-bound (one proxy at a time): geomean ${gm.toFixed(3)}, pairs ${r.map(x=>x.toFixed(3)).join(" ")} (mean µs/request A ${mean(A,"cpu_us").toFixed(1)} at ${Math.round(mean(A,"rps"))} req/s, ${mean(A,"core").toFixed(2)} core; B ${mean(B,"cpu_us").toFixed(1)} at ${Math.round(mean(B,"rps"))} req/s, ${mean(B,"core").toFixed(2)} core)`);' $D/rows
exit 0
