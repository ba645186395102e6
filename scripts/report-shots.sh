#!/usr/bin/env bash
# make report-shots: screenshots of report.html for the README, from real
# lab runs: a PASS (Skupper scenario 2), a FAIL (the same lab judged per pod
# against the wrong model) and an INCONCLUSIVE (scenario 2 with only 60
# requests). Writes docs/images/report-{pass,fail,inconclusive}.png with
# headless Chromium (apt-get install chromium), the network cut off.
# Everything listens on 127.0.0.1; the lab is always torn down.
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "report-shots: chromium not found (apt-get install chromium)" >&2; exit 3; }
MESH_VERIFY_LAB_BIN="$(bash tools/lab/build.sh | tail -n1)"
export MESH_VERIFY_LAB_BIN
${MAKE:-make} -s build >&2
MV="$PWD/bin/mesh-verify"
LAB="$(mktemp -d /tmp/mvshots-XXXXXX)"
WORK="$(mktemp -d)"
teardown() {
  "$MV" lab down --dir "$LAB" >&2 || true
  rmdir "$LAB" 2>/dev/null || true
  rm -rf "$WORK"
}
trap teardown EXIT
trap 'exit 130' INT TERM

"$MV" lab up --dir "$LAB" --topology skupper-2 --seed 1 >"$WORK/lab.txt"
sed 's/repetitions: 200/repetitions: 10/; s/name: skupper-2$/name: skupper-2-short/' \
  scenarios/catalog/skupper-2.yaml >"$WORK/skupper-2-short.yaml"

shot() { # name scenario-file
  local code=0 dir
  KUBECONFIG="$LAB/kubeconfig" "$MV" run "$2" --out "$WORK/runs" --progress plain -o json >"$WORK/$1.json" 2>"$WORK/$1.log" || code=$?
  dir="$(sed -n 's/^wrote \(.*\)\/report\.json$/\1/p' "$WORK/$1.log" | tail -n1)"
  [ -n "$dir" ] || { cat "$WORK/$1.log" >&2; exit 1; }
  echo "$1: exit $code, $dir/report.html" >&2
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$WORK/profile" --disable-background-networking --disable-component-update \
    --proxy-server=http://127.0.0.1:9 --window-size=1200,2200 \
    --screenshot="$PWD/docs/images/report-$1.png" "file://$(realpath "$dir")/report.html" 2>"$WORK/chromium.log" || { cat "$WORK/chromium.log" >&2; exit 1; }
}
shot pass scenarios/catalog/skupper-2.yaml
shot fail scenarios/catalog/skupper-2-per-pod.yaml
shot inconclusive "$WORK/skupper-2-short.yaml"
ls -l docs/images/report-*.png
