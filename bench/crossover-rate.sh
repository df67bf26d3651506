#!/usr/bin/env bash
# Crossover A/B at a fixed offered load: proxy CPU per request of state A and state B, both running
# AT THE SAME TIME (pinned to core 1, worker processes included), each driven by its own load
# generator (bench/scaling.ts --role load, pinned to core 0 with the stub upstream) at the same
# request rate, window by window. Half-way both proxies are started again with the states
# exchanged, so process identity (JIT luck, memory placement) cancels too.
#
# Why a fixed rate: a load generator that sends as fast as the proxy answers (one request
# outstanding per connection, ../shared/bench/crossover.sh) runs each state at its own operating
# point. A proxy that does less per request waits on round trips more and pays one wake-up and one
# read/write pair per request, while a busier one gets several requests per wake-up; CPU per request
# then compares two different things. At the same offered load below saturation both states serve
# the same requests per second with the same batching, and the ratio is the work each request adds.
# Both rates are printed per window: if they differ by more than a few percent, the rate is too
# close to saturation for one state — lower it.
#
# A state is a config fragment (JSON deep-merged into bench/crossover-config.mjs's eight built-ins,
# 16 MiB cache, stub upstream; PROFPORT becomes a free port) and a worker count.
# Run from the project root after npm run build:
#   bench/crossover-rate.sh [--rate 6000] [--windows 6] [--secs 10] [--conns 8] [--workers 1,1] A-fragment B-fragment
#   bench/crossover-rate.sh '{"pipeline":{"request":[],"response":[]}}' '{}'        # empty vs the eight built-ins
#   bench/crossover-rate.sh --workers 1,2 '{}' '{}'                                   # the worker machinery
#   bench/crossover-rate.sh --rate 0 …                                                # as fast as answered
#   bench/crossover-rate.sh --warmup 60 …   # each start warmed 60 s at the rate (default 3): see below
#   TREE_A=/path/to/other/checkout bench/crossover-rate.sh '{}' '{}'  # two builds of the code, same state
#
# TREE_A / TREE_B: the project root whose bin/proxy.mjs runs state A / B (default: this one), each
# built (npm run build): compares a change of the code itself, both builds running at once.
# NODE_A / NODE_B: node options of state A's / B's proxy (e.g. NODE_B=--min-semi-space-size=16).
#
# --warmup: the load both proxies get after each start, before the first window. V8 compiles a
# function once it is hot, and code that runs for only some requests (a sampled request's spans, a
# kept flame-graph frame, a step's rare branch) gets hot late: at 1 % sampling it is still being
# compiled (tens of ms of TurboFan work) 30–60 s after start, long after the common path. A short
# warm-up therefore charges that one-off compilation to the state with more rare code; a long one
# reads the steady state. Report which was used.
set -u
RATE=6000; W=6; SECS=10; C=8; WK=1,1; WARM=3
while [ $# -gt 2 ]; do
  case $1 in
    --rate) RATE=$2 ;; --windows) W=$2 ;; --secs) SECS=$2 ;; --conns) C=$2 ;; --workers) WK=$2 ;; --warmup) WARM=$2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac; shift 2
done
FA=${1:-'{}'}; FB=${2:-'{}'}; WA=${WK%,*}; WB=${WK#*,}
D=$(mktemp -d /tmp/xover-rate.XXXX); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; sleep 0.5; for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp); P1=$(fp); P2=$(fp); H1=$(fp); H2=$(fp)
taskset -c 0 node --import tsx bench/scaling.ts --role stub --port $S & PIDS+=($!)
cfg() { node bench/crossover-config.mjs $1 $S "${3//PROFPORT/$2}"; } # port profport fragment
cpu() { # "user system total" CPU µs of a process and its children: user and system from /proc/PID/stat
  # (clock ticks: 10 ms, ±0.2 µs per request over a 50,000-request window), the total from the
  # scheduler's run time of each of their threads (/proc/PID/task/TID/schedstat, ns): the ratio uses the total.
  local u=0 s=0 t=0; for p in $1 $(ps -o pid= --ppid $1); do
    read -r a b < <(awk '{print $14, $15}' /proc/$p/stat 2>/dev/null || echo 0 0); u=$(( u + a )); s=$(( s + b ))
    for f in /proc/$p/task/*/schedstat; do read -r n _ < $f 2>/dev/null && t=$(( t + n )); done; done
  echo $(( u * 1000000 / $(getconf CLK_TCK) )) $(( s * 1000000 / $(getconf CLK_TCK) )) $(( t / 1000 )); }
TA="${NODE_A:-} ${TREE_A:-.}"; TB="${NODE_B:-} ${TREE_B:-.}"
start() { # port config workers "node-options tree": starts the proxy (its pid in $X), waits until every worker listens (the ready banner)
  rm -f $D/$1.out
  local o=${4% *} t=${4##* }
  taskset -c 1 node $o $t/bin/proxy.mjs serve --config $2 --workers $3 > $D/$1.out 2> $D/$1.log & X=$!; PIDS+=($X)
  for i in $(seq 1 1200); do grep -q mongodb:// $D/$1.out 2>/dev/null && break; sleep 0.1; done; }
load() { taskset -c 0 node --import tsx bench/scaling.ts --role load --port $1 --connections $C --ms $2 --rate $RATE; }
both() { # A on P1 and B on P2, or exchanged; then the warm-up
  if [ $1 = 0 ]; then cfg $P1 $H1 "$FA" > $D/p1.json; cfg $P2 $H2 "$FB" > $D/p2.json; start $P1 $D/p1.json $WA "$TA"; X1=$X; start $P2 $D/p2.json $WB "$TB"; X2=$X
  else cfg $P1 $H1 "$FB" > $D/p1.json; cfg $P2 $H2 "$FA" > $D/p2.json; start $P1 $D/p1.json $WB "$TB"; X1=$X; start $P2 $D/p2.json $WA "$TA"; X2=$X; fi
  load $P1 $((WARM*1000)) >/dev/null & L=$!; load $P2 $((WARM*1000)) >/dev/null; wait $L; }
both 0
for w in $(seq 1 $W); do
  swapped=$([ $w -gt $(( W / 2 )) ] && echo 1 || echo 0)
  if [ $w = $(( W / 2 + 1 )) ]; then kill $X1 $X2; wait $X1 $X2 2>/dev/null; both 1; fi
  read -r u1 s1 n1 < <(cpu $X1); read -r u2 s2 n2 < <(cpu $X2)
  load $P1 $((SECS*1000)) > $D/w$w.1 & L=$!; load $P2 $((SECS*1000)) > $D/w$w.2; wait $L
  read -r v1 t1 m1 < <(cpu $X1); read -r v2 t2 m2 < <(cpu $X2)
  d1="$(( v1 - u1 )) $(( t1 - s1 )) $(( m1 - n1 ))"; d2="$(( v2 - u2 )) $(( t2 - s2 )) $(( m2 - n2 ))"
  node -e '
const fs=require("fs");const [d,w,sw,d1,d2]=process.argv.slice(1);const us=(x)=>x.split(" ").map(Number);
const a={...JSON.parse(fs.readFileSync(d+"/w"+w+".1")),cpu:us(d1)},b={...JSON.parse(fs.readFileSync(d+"/w"+w+".2")),cpu:us(d2)};
const [A,B]=sw==="1"?[b,a]:[a,b];const ca=A.cpu[2]/A.n,cb=B.cpu[2]/B.n;
console.log(JSON.stringify({w:+w,swapped:+sw,A_rps:Math.round(A.n/A.ms*1000),B_rps:Math.round(B.n/B.ms*1000),A_cpu_us:+ca.toFixed(1),B_cpu_us:+cb.toFixed(1),
 cpu_ratio_B_over_A:+(cb/ca).toFixed(3),ticks_ratio:+(((B.cpu[0]+B.cpu[1])/B.n)/((A.cpu[0]+A.cpu[1])/A.n)).toFixed(3),A_user_us:+(A.cpu[0]/A.n).toFixed(1),B_user_us:+(B.cpu[0]/B.n).toFixed(1),A_p50_us:Math.round(A.p50),
 B_p50_us:Math.round(B.p50),errors:A.errors+B.errors}))' $D $w $swapped "$d1" "$d2" | tee -a $D/rows
done
node -e '
const rows=require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n").map(JSON.parse);
const r=rows.map(x=>x.cpu_ratio_B_over_A).sort((a,b)=>a-b);const med=r[r.length>>1];
const gm=Math.exp(r.reduce((s,x)=>s+Math.log(x),0)/r.length);
const mean=(k)=>rows.reduce((s,x)=>s+x[k],0)/rows.length;
console.log(`B/A proxy CPU per request ${process.argv[2]==="0"?"driven as fast as each answers":"at "+process.argv[2]+" req/s offered"}: median ${med.toFixed(3)}, geomean ${gm.toFixed(3)}, range ${r[0]}–${r[r.length-1]} over ${r.length} windows (mean rps A ${Math.round(mean("A_rps"))}, B ${Math.round(mean("B_rps"))}; mean µs/request A ${mean("A_cpu_us").toFixed(1)} of which user ${mean("A_user_us").toFixed(1)}, B ${mean("B_cpu_us").toFixed(1)} of which user ${mean("B_user_us").toFixed(1)})`);' $D/rows $RATE
grep -il 'error\|fatal' $D/*.log >/dev/null && { echo "proxy logs:"; tail -n 3 $D/*.log; }
exit 0
