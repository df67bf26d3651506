#!/usr/bin/env bash
# Where two states' CPU per request differs, by function: runs two proxies at once on core 1 (the
# crossover base configuration plus fragment A and B, as crossover-rate.sh), each offered RATE
# req/s by its own load generator on core 0, warms them WARM s, records both with
# `perf record -k mono -F 3000 -g` for SECS s, and prints per symbol µs per request: B − A, A, B
# (the 45 largest increases and the 10 largest decreases). JavaScript and WebAssembly functions are
# named from a JIT dump: each proxy runs `node --perf-prof`, which writes jit-<pid>.dump into its
# working directory (a directory of its own under the temp dir), and `perf inject --jit` (which
# needs the `-k mono` clock) resolves each sample against the code at that address when it was
# taken. --perf-basic-prof's /tmp/perf-<pid>.map is not used: it keeps every name an address ever
# had, so once V8 reuses a code address perf names its samples after the wrong function. The
# proxies are stopped (SIGINT) before the inject: V8 writes the rest of the dump as it exits. A
# function inlined in one proxy and not the other moves its time to its caller.
# Run from the project root after npm run build; needs `perf` (Debian linux-perf).
# Usage: [RATE=5000] [WARM=40] [SECS=20] [TREE_A=dir] [TREE_B=dir] [KEEP=1] bench/perf-ab.sh A-fragment B-fragment
# TREE_A / TREE_B: the (built) project root whose bin/proxy.mjs runs A / B, to compare two builds of
# the code; KEEP=1 keeps the perf data (its directory is printed on stderr) for `perf report -i`:
# a.jit.data / b.jit.data are the injected ones (their symbols are the jitted-*.so files in a/, b/).
# Function names have the tree's root replaced by <tree>, so one function of two trees is one row.
# MATCH=regex also prints every row whose name matches (e.g. MATCH='profiling|settle').
set -u
FA=$1; FB=$2; RATE=${RATE:-5000}; WARM=${WARM:-40}; SECS=${SECS:-20}
# Not /tmp/perf-…: perf takes any file whose name starts so for a perf-<pid>.map and reads no ELF
# symbols from it (the jitted-*.so files perf inject writes beside the dumps would stay unnamed).
D=$(mktemp -d /tmp/ab-perf.XXXX); PIDS=()
# perf's build-id cache (a copy of each of those thousands of .so files) goes with $D, not to ~/.debug.
perf() { command perf --buildid-dir $D/.debug "$@"; }
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; [ -n "${KEEP:-}" ] && echo "kept $D" >&2 || rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp); P1=$(fp); P2=$(fp); H1=$(fp); H2=$(fp)
taskset -c 0 node --import tsx bench/scaling.ts --role stub --port $S & PIDS+=($!)
node bench/crossover-config.mjs $P1 $S "${FA//PROFPORT/$H1}" > $D/a.json
node bench/crossover-config.mjs $P2 $S "${FB//PROFPORT/$H2}" > $D/b.json
TA=$(cd "${TREE_A:-.}" && pwd); TB=$(cd "${TREE_B:-.}" && pwd); mkdir $D/a $D/b
# Each proxy's working directory is its own (node --perf-prof writes jit-<pid>.dump there); exec: $! is node's pid.
(cd $D/a && exec taskset -c 1 node --perf-prof "$TA/bin/proxy.mjs" serve --config $D/a.json --workers 1 > $D/a.out 2>$D/a.log) & XA=$!; PIDS+=($XA)
(cd $D/b && exec taskset -c 1 node --perf-prof "$TB/bin/proxy.mjs" serve --config $D/b.json --workers 1 > $D/b.out 2>$D/b.log) & XB=$!; PIDS+=($XB)
for i in $(seq 1 300); do grep -q mongodb:// $D/a.out 2>/dev/null && grep -q mongodb:// $D/b.out 2>/dev/null && break; sleep 0.1; done
load() { taskset -c 0 node --import tsx bench/scaling.ts --role load --port $1 --connections 8 --ms $2 --rate $RATE; }
load $P1 $((WARM*1000)) >/dev/null & L=$!; load $P2 $((WARM*1000)) > /dev/null; wait $L
perf record -k mono -F 3000 -g -p $XA -o $D/a.data -- sleep $SECS > /dev/null 2>&1 & RA=$!
perf record -k mono -F 3000 -g -p $XB -o $D/b.data -- sleep $SECS > /dev/null 2>&1 & RB=$!
load $P1 $((SECS*1000)) > $D/la.json & L=$!; load $P2 $((SECS*1000)) > $D/lb.json; wait $L; wait $RA $RB
# Stop both proxies (≤ 15 s) so V8 flushes their JIT dumps, then resolve the samples against them.
kill -INT $XA $XB 2>/dev/null
for i in $(seq 1 150); do [ "$(ps -o stat= -p "$XA $XB" | grep -vc Z)" = 0 ] && break; sleep 0.1; done
[ "$(ps -o stat= -p "$XA $XB" | grep -vc Z)" = 0 ] || { echo "perf-ab: a proxy did not exit on SIGINT; its JIT dump may be incomplete" >&2; kill -KILL $XA $XB 2>/dev/null; }
wait $XA $XB 2>/dev/null
for s in a b; do
  perf inject --jit -i $D/$s.data -o $D/$s.jit.data > $D/$s.inject.log 2>&1 || { echo "perf-ab: perf inject --jit failed for $s:" >&2; cat $D/$s.inject.log >&2; exit 1; }
  perf report -i $D/$s.jit.data --no-children --sort sym --stdio -g none -n 2>/dev/null | grep -v '^#' | grep -v '^$' > $D/$s.rep
done
node -e '
const fs=require("fs");const D=process.argv[1];
const n=(s)=>{const j=JSON.parse(fs.readFileSync(D+"/l"+s+".json"));return j.n*('$SECS'*1000)/j.ms};
const rd=(s)=>{const m=new Map();for(const l of fs.readFileSync(D+"/"+s+".rep","utf8").split("\n")){const x=l.trim().match(/^\S+%\s+(\d+)\s+\[.\]\s+(.*)$/);if(!x)continue;let k=x[2].replace(/\s+$/,"");k=k.split(process.argv[2]).join("<tree>").split(process.argv[3]).join("<tree>");k=k.replace(/^(LazyCompile|Function|JS):[~*^+]?/,"").replace(/-\d+-(turbofan|liftoff)$/,"").replace(/^ (?=file:)/,"(anonymous) ");m.set(k,(m.get(k)||0)+ +x[1]);}return m};
const A=rd("a"),B=rd("b");const na=JSON.parse(fs.readFileSync(D+"/la.json")).n,nb=JSON.parse(fs.readFileSync(D+"/lb.json")).n;
const us=(c,N)=>c/3000*1e6/N;let ta=0,tb=0;for(const v of A.values())ta+=v;for(const v of B.values())tb+=v;
console.log("requests",na,nb,"total µs/req A",us(ta,na).toFixed(2),"B",us(tb,nb).toFixed(2));
const keys=new Set([...A.keys(),...B.keys()]);const rows=[...keys].map(k=>[k,us(A.get(k)||0,na),us(B.get(k)||0,nb)]).map(r=>[...r,r[2]-r[1]]).sort((a,b)=>b[3]-a[3]);
for(const r of rows.slice(0,45))console.log(r[3].toFixed(3).padStart(7),r[1].toFixed(3).padStart(7),r[2].toFixed(3).padStart(7)," ",r[0].slice(0,110));
console.log("...");for(const r of rows.slice(-10))console.log(r[3].toFixed(3).padStart(7),r[1].toFixed(3).padStart(7),r[2].toFixed(3).padStart(7)," ",r[0].slice(0,110));
if(process.env.MATCH){console.log("matching "+process.env.MATCH+":");const re=new RegExp(process.env.MATCH);for(const r of rows)if(re.test(r[0]))console.log(r[3].toFixed(3).padStart(7),r[1].toFixed(3).padStart(7),r[2].toFixed(3).padStart(7)," ",r[0].slice(0,110));}
' $D "file://$TA/" "file://$TB/"
