#!/usr/bin/env bash
# `make bench`: mesh-verify side by side with the vegeta CLI, hey, siege and
# wrk in one run, written to BENCHMARKS.md (bench/bench.py does the runs and
# the report; README.md, "Benchmarks", lists the knobs). This script makes
# sure the peer tools and the vegeta CLI (built from the vegeta module
# version mesh-verify uses) are there. BENCH_QUICK=1 is a ~2-minute run for
# development.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${BENCH_OUT:-bench/out}
mkdir -p "$OUT"

missing=()
for t in hey siege wrk nginx python3; do command -v "$t" >/dev/null || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=$(printf '%s\n' "${missing[@]}" | sed 's/^nginx$/nginx-light/' | tr '\n' ' ')
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing $pkgs" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs >/dev/null
  else
    echo "bench: missing $pkgs: install them (Debian: sudo apt-get install -y $pkgs) and run make bench again" >&2
    exit 3
  fi
fi

[ -x bin/mesh-verify ] || { echo "bench: bin/mesh-verify missing: run make build (make bench does)" >&2; exit 3; }
echo "== building the vegeta CLI from the module mesh-verify uses" >&2
OUTABS=$(cd "$OUT" && pwd)
(cd bench/vegeta && go build -o "$OUTABS/vegeta" github.com/tsenart/vegeta/v12)

# The tunnel comparison needs the lab's binaries (kube-apiserver, etcd,
# kwok, kubectl): tools/lab/build.sh builds them once into a cache.
if [ -z "${MESH_VERIFY_LAB_BIN:-}" ]; then
  MESH_VERIFY_LAB_BIN=$(bash tools/lab/build.sh | tail -n1)
fi
export MESH_VERIFY_LAB_BIN BENCH_OUT="$OUT"
exec python3 bench/bench.py
