#!/usr/bin/env bash
# What a shadow canary costs: proxy CPU per request with a shadow canary at shadow_pct 100 (B)
# against no canary (A), the eight built-ins in both graphs — the candidate is the same eight
# steps with the logging step's config given again (a new version that behaves the same, so every
# comparison is a byte-equality hit and the figure is the candidate's steps plus the compare).
# The method is ../shared/bench/crossover.sh's (two proxies of one build at the same time, both
# pinned to core 1, each with its own load generator on core 0 and a stub upstream; half-way they
# swap states), except that the state is a canary, not configuration: B is entered by POST
# /api/v1/canary and left by POST …/rollback. Also printed: each side's p50/p99 latency as the load
# generator saw it, so the baseline's reply latency with the shadow can be read beside it.
# Target (issue 25): B/A ≤ 2.1.
# Run from the project root after npm run build:
#   bench/shadow-crossover.sh [windows=6] [secs=10] [conns=8] ['<canary start body fragment JSON>']
set -u
SB=../shared/bench
W=${1:-6}; SECS=${2:-10}; C=${3:-8}; EXTRA=${4:-"{}"}
TOKEN=shadow-bench-token-0123456789
D=$(mktemp -d /tmp/shadow-xover.XXXX); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; sleep 0.3; for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf $D' EXIT
fp() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
S=$(fp); P1=$(fp); P2=$(fp); K1=$(fp); K2=$(fp)
taskset -c 0 node "$SB/stub.mjs" $S & PIDS+=($!)
cfg() { # listen port, control-plane port, data dir
  node bench/crossover-config.mjs $1 $S "{\"control_plane\":{\"port\":$2,\"tokens\":[\"$TOKEN\"]},\"canary\":{\"data_dir\":\"$3\"}}"; }
cfg $P1 $K1 $D/c1 > $D/p1.json; cfg $P2 $K2 $D/c2 > $D/p2.json
taskset -c 1 node bin/proxy.mjs serve --config $D/p1.json --workers 1 > $D/p1.log 2>&1 & PIDS+=($!); X1=$!
taskset -c 1 node bin/proxy.mjs serve --config $D/p2.json --workers 1 > $D/p2.log 2>&1 & PIDS+=($!); X2=$!
for p in $P1 $P2 $K1 $K2; do for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done
# shadow <control port> on|off: starts the shadow canary, or rolls back the pipeline's canary.
shadow() {
  node -e '
const [port, what, token, extra] = process.argv.slice(1);
const base = `http://127.0.0.1:${port}/api/v1/canary`;
const h = { authorization: `Bearer ${token}`, "content-type": "application/json" };
const merge = (a, b) => { for (const k in b) { if (b[k] && typeof b[k] === "object" && !Array.isArray(b[k]) && a[k] && typeof a[k] === "object") merge(a[k], b[k]); else a[k] = b[k]; } return a; };
(async () => {
  if (what === "on") {
    const body = merge({ pipeline_id: "default", mode: "shadow", shadow_pct: 100, auto_promote: false,
      candidate_config: { steps: [{ type: "logging", config: { sample_rate: 0.1 } }] },
      stages: [{ traffic_pct: 0, min_duration: "24h", min_requests: 1000000000 }, { traffic_pct: 100, min_duration: "0", min_requests: 0 }],
      rollback_rules: { check_interval: "5s" } }, JSON.parse(extra));
    const r = await fetch(base, { method: "POST", headers: h, body: JSON.stringify(body) });
    if (r.status !== 201) { console.error(await r.text()); process.exit(1); }
  } else {
    const l = await (await fetch(`${base}?status=active`, { headers: h })).json();
    for (const c of l.canaries) await fetch(`${base}/${c.canary_id}/rollback`, { method: "POST", headers: h, body: JSON.stringify({ reason: "bench swap" }) });
  }
})();' $1 $2 $TOKEN "$EXTRA"; }
run() { taskset -c 0 node "$SB/rawload-vary.mjs" "$@"; }
shadow $K2 on
run $P1 $C 2000 $X1 >/dev/null & L=$!; run $P2 $C 2000 $X2 >/dev/null; wait $L; sleep 0.5
for w in $(seq 1 $W); do
  if [ $w = $(( W / 2 + 1 )) ]; then # swap states
    shadow $K2 off; shadow $K1 on; sleep 1
    run $P1 $C 2000 $X1 >/dev/null & L=$!; run $P2 $C 2000 $X2 >/dev/null; wait $L; sleep 0.5
  fi
  run $P1 $C $((SECS*1000)) $X1 > $D/w$w.1 & L=$!; run $P2 $C $((SECS*1000)) $X2 > $D/w$w.2; wait $L
  swapped=$([ $w -gt $(( W / 2 )) ] && echo 1 || echo 0)
  node -e '
const fs=require("fs");const [d,w,sw]=process.argv.slice(1);const a=JSON.parse(fs.readFileSync(d+"/w"+w+".1")),b=JSON.parse(fs.readFileSync(d+"/w"+w+".2"));
const [A,B]=sw==="1"?[b,a]:[a,b];
console.log(JSON.stringify({w:+w,swapped:+sw,A_rps:A.rps,B_rps:B.rps,A_cpu:A.proxy_cpu_us_per_req,B_cpu:B.proxy_cpu_us_per_req,A_p50_us:A.p50_us,B_p50_us:B.p50_us,
  A_p99_us:A.p99_us,B_p99_us:B.p99_us,cpu_ratio_B_over_A:+(B.proxy_cpu_us_per_req/A.proxy_cpu_us_per_req).toFixed(3),errors:A.errors+B.errors}))' $D $w $swapped | tee -a $D/rows
done
node -e '
const rows=require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n").map(JSON.parse);
const r=rows.map(x=>x.cpu_ratio_B_over_A).sort((a,b)=>a-b);const med=r[r.length>>1];
const gm=Math.exp(r.reduce((s,x)=>s+Math.log(x),0)/r.length);
console.log(`shadow (B) / no canary (A) proxy CPU per request: median ${med.toFixed(3)}, geomean ${gm.toFixed(3)}, range ${r[0]}–${r[r.length-1]} over ${r.length} windows (target ≤ 2.1)`);' $D/rows
# The canary really shadowed: its divergence counters (a behaviour-identical candidate: 0 diverged).
node -e '
const [port, token] = process.argv.slice(1);
(async () => { const h = { authorization: `Bearer ${token}` };
  const l = await (await fetch(`http://127.0.0.1:${port}/api/v1/canary?status=active`, { headers: h })).json();
  for (const c of l.canaries) { const d = await (await fetch(`http://127.0.0.1:${port}/api/v1/canary/${c.canary_id}/diffs`, { headers: h })).json();
    console.log(`shadow canary ${c.canary_id}: ${d.sampled} shadowed, ${d.diverged} diverged ${JSON.stringify(d.by_kind)}`); } })();' $K1 $TOKEN
grep -il 'error\|fatal' $D/p1.log $D/p2.log >/dev/null && { echo "proxy logs:"; tail -n 3 $D/p1.log $D/p2.log; }
exit 0
