#!/usr/bin/env bash
# Benchmarks mesh-verify side by side with the vegeta CLI (built from the
# same vegeta module version) against one local nginx target, in one run,
# and reports ratios; then the resident memory of a 1,000,000-request run.
# Everything stays on 127.0.0.1 and every process started here is stopped
# by its pid on exit. Every run is bounded: the rate runs by duration and a
# request cap, the memory run by a request count and a duration (whichever
# comes first), and each mesh-verify run by an outer timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=bench/out
mkdir -p "$OUT"
DUR=${BENCH_DURATION:-10s}
CONC=${BENCH_CONCURRENCY:-32}
MEM_REQUESTS=${BENCH_MEM_REQUESTS:-1000000}
MEM_DURATION=${BENCH_MEM_DURATION:-300s}        # bound of the memory run, whichever comes first
RATE_REQUESTS=${BENCH_RATE_REQUESTS:-2000000}   # cap of the rate run (far above what $DUR reaches)
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-420s}          # outer bound of each mesh-verify run
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "bench: nginx not found (apt-get install nginx-light)" >&2; exit 3; }

pids=()
NDIR=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$NDIR" ]; then rm -rf "$NDIR"; fi
}
trap cleanup EXIT

echo "== building vegeta CLI from the module mesh-verify uses"
VEGETA_VERSION=$(go list -m -f '{{.Version}}' github.com/tsenart/vegeta/v12)
(cd bench/vegeta && go build -o "../../$OUT/vegeta" github.com/tsenart/vegeta/v12)
echo "vegeta $VEGETA_VERSION"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
NDIR=$(mktemp -d)
cat > "$NDIR/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $NDIR/nginx.pid;
error_log $NDIR/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $NDIR/body; proxy_temp_path $NDIR/proxy; fastcgi_temp_path $NDIR/fcgi;
  uwsgi_temp_path $NDIR/uwsgi; scgi_temp_path $NDIR/scgi;
  server {
    listen 127.0.0.1:$port;
    keepalive_requests 10000000;
    location / { return 200 "I'm callme-service v1 (pod callme-c1-0 in c1)\n"; }
  }
}
EOF
"$NGINX" -p "$NDIR" -c "$NDIR/nginx.conf" &
pids+=($!)
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
TARGET="http://127.0.0.1:$port/callme/ping"

scenario() { # $1 = attack block
  cat <<EOF
apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: bench}
clusters: [{name: c1}]
target: {url: "$TARGET"}
attack:
$1
attribution:
  preset: tutorial
  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
expect:
  - reached: {buckets: [c1]}
EOF
}

echo "== max request rate, $CONC connections for $DUR each (same target, one after the other)"
echo "GET $TARGET" > "$OUT/targets.txt"
"$OUT/vegeta" attack -targets="$OUT/targets.txt" -rate=0 -workers="$CONC" -max-workers="$CONC" -duration="$DUR" \
  | "$OUT/vegeta" report -type=json > "$OUT/vegeta.json"
scenario "  concurrency: $CONC
  duration: $DUR
  requests: $RATE_REQUESTS" > "$OUT/rate.yaml"
rm -rf "$OUT/runs"
timeout -k 10s "$RUN_TIMEOUT" bin/mesh-verify run "$OUT/rate.yaml" --quiet --out "$OUT/runs" > "$OUT/mesh-verify-rate.txt" || true

python3 - "$OUT" <<'EOF'
import json, sys, glob
out = sys.argv[1]
v = json.load(open(f"{out}/vegeta.json"))
m = json.load(open(glob.glob(f"{out}/runs/*/report.json")[0]))
vr = v["requests"] / (v["duration"] / 1e9)
mr = m["attack"]["achievedRate"]
print(f"{'tool':<28}{'requests':>10}{'req/s':>12}{'success':>9}")
print(f"{'vegeta attack | report':<28}{v['requests']:>10}{vr:>12.0f}{100*v['success']:>8.1f}%")
print(f"{'mesh-verify (attribution)':<28}{m['metrics']['requests']:>10}{mr:>12.0f}{100*m['metrics']['success']:>8.1f}%")
ratio = mr / vr
print(f"ratio mesh-verify / vegeta: {ratio:.2f} (target >= 0.90) {'OK' if ratio >= 0.9 else 'BELOW TARGET'}")
attributed = [d for d in m["dimensions"] if d["name"] == "cluster"][0]["attributed"]
print(f"attributed by mesh-verify: {attributed} of {m['metrics']['requests']}")
EOF

echo "== resident memory over $MEM_REQUESTS requests or $MEM_DURATION, whichever comes first ($CONC connections)"
scenario "  concurrency: $CONC
  requests: $MEM_REQUESTS
  duration: $MEM_DURATION" > "$OUT/mem.yaml"
rm -rf "$OUT/runs-mem"
timeout -k 10s "$RUN_TIMEOUT" bin/mesh-verify run "$OUT/mem.yaml" --quiet --out "$OUT/runs-mem" > "$OUT/mesh-verify-mem.txt" &
tpid=$!
pids+=($tpid)
# The RSS is mesh-verify's: timeout's child.
mv=""
for _ in $(seq 50); do mv=$(pgrep -P "$tpid" | head -n1 || true); [ -n "$mv" ] && break; sleep 0.1; done
: > "$OUT/rss.txt"
start=$(date +%s)
while [ -n "$mv" ] && kill -0 "$tpid" 2>/dev/null; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$mv/status 2>/dev/null || true)
  [ -n "$rss" ] && echo "$(( $(date +%s) - start )) $rss" >> "$OUT/rss.txt"
  sleep 1
done
wait "$tpid" || true
python3 - "$OUT" <<'EOF'
import json, sys, glob
out = sys.argv[1]
m = json.load(open(glob.glob(f"{out}/runs-mem/*/report.json")[0]))
rows = [tuple(map(int, l.split())) for l in open(f"{out}/rss.txt") if l.strip()]
n = m["metrics"]["requests"]
peak = max(r for _, r in rows) / 1024
print(f"requests {n} in {m['attack']['elapsed']/1e9:.0f}s; RSS samples (MB):",
      " ".join(f"{r/1024:.0f}" for _, r in rows[:: max(1, len(rows)//10)]))
third = max(1, len(rows)//3)
early = max(r for _, r in rows[:third]) / 1024
late = max(r for _, r in rows[-third:]) / 1024
print(f"peak RSS {peak:.0f} MB (target < 150 MB) {'OK' if peak < 150 else 'ABOVE TARGET'}; "
      f"first third max {early:.0f} MB, last third max {late:.0f} MB ({'flat' if late <= early*1.25+5 else 'GROWING'})")
EOF

echo "== the in-process port-forward tunnel vs kubectl port-forward (lab kube-apiserver, same pod and backend)"
MESH_VERIFY_LAB_BIN="${MESH_VERIFY_LAB_BIN:-$(bash tools/lab/build.sh 2>/dev/null | tail -n1)}"
export MESH_VERIFY_LAB_BIN
go test ./kube/ -run '^$' -bench 'LabTunnelVsKubectl' -benchtime 3s -count 1 2>&1 | grep -E 'Benchmark|ratio|req/s' || true
echo "== sustained 500 req/s for 30 s through the tunnel"
MESH_VERIFY_LONG=1 go test ./kube/ -run 'TestLabTunnelSustained500rps' -count 1 -v 2>&1 | grep -E 'requests|rate|fail|PASS|FAIL|ok' | head -20 || true

echo "== reports: rendering every format of a 1,000,000-request run (goal < 2 s, report.html < 3 MB)"
go test ./reports/ -run 'TestHTMLOfTheLargestRunStaysSmall' -bench 'RenderAll1M' -benchtime 5x -count 1 -v 2>&1 | grep -E 'Benchmark|report.html:' || true
echo "== streaming every result to results.bin and attribution.jsonl: throughput with / without (goal >= 0.95)"
go test ./runlog/ -run '^$' -bench 'Throughput' -benchtime 6x -count 1 2>&1 | grep -E 'Benchmark' || true
go test ./runlog/ -run '^$' -bench 'Record' -count 1 2>&1 | grep -E 'Benchmark' || true
