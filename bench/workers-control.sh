#!/usr/bin/env bash
# The worker machinery's own cost, separated from the cost of running two processes on one core.
# bench/crossover-rate.sh --workers 1,2 compares one process with a primary and two workers on the
# same core; on a machine without spare cores that reading includes what any two processes sharing
# a core pay (two heaps, two JIT code sets, two sets of plugin instances and caches, context
# switches), which a host with a core per worker does not. This script runs, at the same time and
# pinned to core 1:
#   A: two independent single-process proxies (`--workers 1`), each offered half the rate on half
#      the connections — the same two-processes-on-one-core shape, with no cluster at all;
#   B: one proxy with `--workers 2`, offered the whole rate on all the connections.
# Both serve the same total requests per second; the figure is proxy CPU per request (user +
# system, whole process trees, from /proc), B over A, per window. Half-way every proxy is started
# again. Load generators (bench/scaling.ts --role load) and the stub upstream run on core 0.
# Run from the project root after npm run build:
#   bench/workers-control.sh [--rate 5000] [--windows 6] [--secs 10] [--conns 8] ['<fragment JSON>']
set -u
RATE=5000; W=6; SECS=10; C=8
while [ $# -gt 1 ]; do
  case $1 in
    --rate) RATE=$2 ;; --windows) W=$2 ;; --secs) SECS=$2 ;; --conns) C=$2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac; shift 2
done
F=${1:-'{}'}
D=$(mktemp -d /tmp/workers-control.XXXX); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; sleep 0.5; for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp); PA=$(fp); PB=$(fp); P2=$(fp); HA=$(fp); HB=$(fp); H2=$(fp)
taskset -c 0 node --import tsx bench/scaling.ts --role stub --port $S & PIDS+=($!)
cfg() { node bench/crossover-config.mjs $1 $S "${F//PROFPORT/$2}"; } # port profport
cpu() { # "user system" CPU µs of a process and its children
  local u=0 s=0; for p in $1 $(ps -o pid= --ppid $1); do
    read -r a b < <(awk '{print $14, $15}' /proc/$p/stat 2>/dev/null || echo 0 0); u=$(( u + a )); s=$(( s + b )); done
  echo $(( u * 1000000 / $(getconf CLK_TCK) )) $(( s * 1000000 / $(getconf CLK_TCK) )); }
start() { # port workers: starts a proxy (its pid in $X), waits for its ready banner
  cfg $1 $3 > $D/$1.json; rm -f $D/$1.out
  taskset -c 1 node bin/proxy.mjs serve --config $D/$1.json --workers $2 > $D/$1.out 2> $D/$1.log & X=$!; PIDS+=($X)
  for i in $(seq 1 1200); do grep -q mongodb:// $D/$1.out 2>/dev/null && break; sleep 0.1; done; }
load() { taskset -c 0 node --import tsx bench/scaling.ts --role load --port $1 --connections $2 --ms $3 --rate $4; }
all() { start $PA 1 $HA; XA=$X; start $PB 1 $HB; XB=$X; start $P2 2 $H2; X2=$X
  load $PA $((C/2)) 3000 $((RATE/2)) >/dev/null & L1=$!; load $PB $((C/2)) 3000 $((RATE/2)) >/dev/null & L2=$!
  load $P2 $C 3000 $RATE >/dev/null; wait $L1 $L2; }
all
for w in $(seq 1 $W); do
  if [ $w = $(( W / 2 + 1 )) ]; then kill $XA $XB $X2; wait $XA $XB $X2 2>/dev/null; all; fi
  read -r ua sa < <(cpu $XA); read -r ub sb < <(cpu $XB); read -r u2 s2 < <(cpu $X2)
  load $PA $((C/2)) $((SECS*1000)) $((RATE/2)) > $D/w$w.a & L1=$!
  load $PB $((C/2)) $((SECS*1000)) $((RATE/2)) > $D/w$w.b & L2=$!
  load $P2 $C $((SECS*1000)) $RATE > $D/w$w.2; wait $L1 $L2
  read -r va ta < <(cpu $XA); read -r vb tb < <(cpu $XB); read -r v2 t2 < <(cpu $X2)
  node -e '
const fs=require("fs");const [d,w,ua,sa,ub,sb,u2,s2]=process.argv.slice(1);const j=(f)=>JSON.parse(fs.readFileSync(d+"/w"+w+"."+f));
const a=j("a"),b=j("b"),c=j("2");const nA=a.n+b.n,nB=c.n;
const cA=(+ua + +sa + +ub + +sb)/nA,cB=(+u2 + +s2)/nB;
console.log(JSON.stringify({w:+w,A_rps:Math.round(a.n/a.ms*1000+b.n/b.ms*1000),B_rps:Math.round(nB/c.ms*1000),A_cpu_us:+cA.toFixed(1),B_cpu_us:+cB.toFixed(1),
 cpu_ratio_B_over_A:+(cB/cA).toFixed(3),A_user_us:+((+ua + +ub)/nA).toFixed(1),B_user_us:+(+u2/nB).toFixed(1),errors:a.errors+b.errors+c.errors}))' \
    $D $w $(( va - ua )) $(( ta - sa )) $(( vb - ub )) $(( tb - sb )) $(( v2 - u2 )) $(( t2 - s2 )) | tee -a $D/rows
done
node -e '
const rows=require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n").map(JSON.parse);
const r=rows.map(x=>x.cpu_ratio_B_over_A).sort((a,b)=>a-b);
const gm=Math.exp(r.reduce((s,x)=>s+Math.log(x),0)/r.length);
const mean=(k)=>rows.reduce((s,x)=>s+x[k],0)/rows.length;
console.log(`one proxy with 2 workers over two independent 1-worker proxies, proxy CPU per request at ${process.argv[2]} req/s offered in all: geomean ${gm.toFixed(3)}, range ${r[0]}–${r[r.length-1]} over ${r.length} windows (mean rps A ${Math.round(mean("A_rps"))}, B ${Math.round(mean("B_rps"))}; mean µs/request A ${mean("A_cpu_us").toFixed(1)} of which user ${mean("A_user_us").toFixed(1)}, B ${mean("B_cpu_us").toFixed(1)} of which user ${mean("B_user_us").toFixed(1)})`);' $D/rows $RATE
grep -il 'error\|fatal' $D/*.log >/dev/null && { echo "proxy logs:"; tail -n 3 $D/*.log; }
exit 0
