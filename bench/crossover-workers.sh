#!/usr/bin/env bash
# Crossover for the cost of the worker machinery: one proxy with `--workers A` and one with
# `--workers B` (default 1 and 2) run AT THE SAME TIME, both pinned to core 1 (their workers
# inherit the pinning), each driven by its own load generator (bench/scaling.ts --role load) pinned
# to core 0 with the stub upstream, over the same windows; the figure is proxy CPU per request of
# each whole process tree (primary + workers, /proc), compared window by window. Half-way both
# proxies are started again with the worker counts exchanged (`workers` applies at start only), so
# process identity cancels too. Config: the eight built-ins of bench/crossover-config.mjs.
# Run from the project root: bench/crossover-workers.sh [A=1] [B=2] [windows=6] [secs=10] [conns=8]
set -u
WA=${1:-1}; WB=${2:-2}; W=${3:-6}; SECS=${4:-10}; C=${5:-8}
D=$(mktemp -d /tmp/xover-workers.XXXX); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; sleep 0.5; for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp); P1=$(fp); P2=$(fp)
taskset -c 0 node --import tsx bench/scaling.ts --role stub --port $S & PIDS+=($!)
node bench/crossover-config.mjs $P1 $S > $D/p1.json; node bench/crossover-config.mjs $P2 $S > $D/p2.json
cpu() { # CPU µs of a process and its children
  local t=0; for p in $1 $(ps -o pid= --ppid $1); do
    t=$(( t + $(awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null || echo 0) )); done
  echo $(( t * 1000000 / $(getconf CLK_TCK) )); }
start() { # port config workers: starts the proxy (its pid in $X), waits until every worker listens (the ready banner)
  rm -f $D/$1.out
  taskset -c 1 node bin/proxy.mjs serve --config $2 --workers $3 > $D/$1.out 2> $D/$1.log & X=$!; PIDS+=($X)
  for i in $(seq 1 1200); do grep -q mongodb:// $D/$1.out 2>/dev/null && break; sleep 0.1; done; }
load() { taskset -c 0 node --import tsx bench/scaling.ts --role load --port $1 --connections $C --ms $2; }
start $P1 $D/p1.json $WA; X1=$X; start $P2 $D/p2.json $WB; X2=$X
load $P1 2000 >/dev/null & L=$!; load $P2 2000 >/dev/null; wait $L
for w in $(seq 1 $W); do
  if [ $w = $(( W / 2 + 1 )) ]; then # exchange the worker counts
    kill $X1 $X2; wait $X1 $X2 2>/dev/null
    start $P1 $D/p1.json $WB; X1=$X; start $P2 $D/p2.json $WA; X2=$X
    load $P1 2000 >/dev/null & L=$!; load $P2 2000 >/dev/null; wait $L
  fi
  c1=$(cpu $X1); c2=$(cpu $X2)
  load $P1 $((SECS*1000)) > $D/w$w.1 & L=$!; load $P2 $((SECS*1000)) > $D/w$w.2; wait $L
  d1=$(( $(cpu $X1) - c1 )); d2=$(( $(cpu $X2) - c2 ))
  swapped=$([ $w -gt $(( W / 2 )) ] && echo 1 || echo 0)
  node -e '
const fs=require("fs");const [d,w,sw,d1,d2]=process.argv.slice(1);
const a={...JSON.parse(fs.readFileSync(d+"/w"+w+".1")),cpu:+d1},b={...JSON.parse(fs.readFileSync(d+"/w"+w+".2")),cpu:+d2};
const [A,B]=sw==="1"?[b,a]:[a,b];const ca=A.cpu/A.n,cb=B.cpu/B.n;
console.log(JSON.stringify({w:+w,swapped:+sw,A_rps:Math.round(A.n/A.ms*1000),B_rps:Math.round(B.n/B.ms*1000),A_cpu_us:+ca.toFixed(1),B_cpu_us:+cb.toFixed(1),
 cpu_ratio_B_over_A:+(cb/ca).toFixed(3),errors:A.errors+B.errors}))' $D $w $swapped $d1 $d2 | tee -a $D/rows
done
node -e '
const rows=require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n").map(JSON.parse);
const r=rows.map(x=>x.cpu_ratio_B_over_A).sort((a,b)=>a-b);const med=r[r.length>>1];
const gm=Math.exp(r.reduce((s,x)=>s+Math.log(x),0)/r.length);
console.log(`workers '$WB' / workers '$WA' proxy CPU per request: median ${med.toFixed(3)}, geomean ${gm.toFixed(3)}, range ${r[0]}–${r[r.length-1]} over ${r.length} windows`);' $D/rows
