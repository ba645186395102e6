#!/usr/bin/env bash
# make demo: every seed experiment (the Skupper, Istio and Cilium tutorials
# and the Kuma multi-zone canary) reproduced in the local lab and judged by
# mesh-verify. For each one: `mesh-verify lab up --topology X` (real kwok
# API servers, tutorial apps, simulated mesh), `mesh-verify run` of the
# scenario kept in scenarios/catalog/, then `lab down`. Prints a summary
# table and exits non-zero when a verdict differs from what the tutorial
# reports. Everything listens on 127.0.0.1; the lab is always torn down.
#
#   MESH_VERIFY_DEMO_ONLY="skupper-1 kuma-canary"   run only these scenarios
#   MESH_VERIFY_DEMO_OUT=dir                        where reports go (default mesh-verify-runs/demo)
#   MESH_VERIFY_DEMO_SEED=N|random                  the labs' routing seed (default 1)
#
# The lab routes at random where the real data plane does (Envoy's weights
# and mirror fractions, per-connection picks); the demo brings every lab up
# with the same seed, printed in the summary, so a run can be replayed.
# `make calibrate` repeats the random experiments over many seeds.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

# scenario  lab topology  verdict the tutorial implies
# (skupper-2-per-pod judges scenario 2 against the wrong model on purpose:
# Skupper balances per cluster, so expecting equal per pod must FAIL.)
# (istio-mirror-sidecar checks the same mirroring from the istio-proxy access
# logs; istio-helloworld and cilium-rebel-base are the meshes' own
# multicluster checks, beside the tutorials'; kuma-canary runs twice, its
# split from a TrafficRoute and from the next Kuma release's MeshHTTPRoute;
# skupper-4 from v1 link Secrets and from v2 Links; istio-mirror-sidecar
# again on Istio 1.28's mirror copies without the -shadow authority;
# istio-multinetwork splits by cluster from the caller's outbound log, where
# a remote network's requests name its east-west gateway; cilium-affinity
# attacks from worker pods in c1 and in c2 and judges each apart.)
seeds=(
  "skupper-1             skupper-1          PASS"
  "skupper-2             skupper-2          PASS"
  "skupper-2-per-pod     skupper-2          FAIL"
  "skupper-3             skupper-3          PASS"
  "skupper-failover      skupper-3          PASS"
  "skupper-4             skupper-4          PASS"
  "skupper-4             skupper-4-v2       PASS"
  "istio-mirror          istio-mirror       PASS"
  "istio-mirror-sidecar  istio-mirror       PASS"
  "istio-mirror-sidecar  istio-mirror-noshadow  PASS"
  "istio-multinetwork    istio-multinetwork PASS"
  "cilium-c2             cilium-c2          PASS"
  "cilium-both           cilium-both        PASS"
  "cilium-affinity       cilium-affinity    PASS"
  "kuma-canary           kuma-canary        PASS"
  "kuma-canary           kuma-canary-v3     PASS"
  "istio-helloworld      istio-helloworld   PASS"
  "cilium-rebel-base     cilium-rebel-base  PASS"
  "cilium-failover       cilium-failover    PASS"
)

# What a tutorial does to the clusters while its traffic runs, which a
# scenario cannot do itself: "SECONDS CLUSTER KUBECTL-ARGS" steps, ";"
# apart, SECONDS after the attack started. cilium-failover: c1's
# rebel-base scaled to zero a third of the way into its 45 s attack and
# back at two thirds, as Cilium's docs show the failover of a global
# Service with local affinity; skupper-failover: c3's app (the cheaper
# site) scaled up a third of the way in and back to zero at two thirds,
# the tutorial's scenario 3. Each run follows its objects and judges
# before, during and after.
midrun() {
  local app="-n interconnect scale deployment sample-spring-kotlin-microservice"
  case "$1" in
    cilium-failover) echo "15 c1 scale deployment rebel-base --replicas 0;30 c1 scale deployment rebel-base --replicas 2" ;;
    skupper-failover) echo "15 c3 $app --replicas 1;30 c3 $app --replicas 0" ;;
  esac
}

# during PROGRESS STEPS: waits for the run's first progress line in the
# file PROGRESS (`--progress plain` prints one every 5 s of attack, its
# elapsed time first; a run from worker pods says when their attack
# starts), then runs each step of STEPS (midrun) with kubectl against
# the demo's lab at its time. Fails if the attack is not seen within two
# minutes or a kubectl fails.
during() {
  local progress="$1" steps="$2" waited=0 elapsed="" t0 at cluster args
  while [ -z "$elapsed" ]; do
    # "  5.0s  199/~1800 requests ..." (a known total) or "  5.0s  77 requests ...".
    elapsed="$(sed -n 's/^ *\([0-9][0-9]*\)\.[0-9]s  *[0-9][0-9]*[/ ].*/\1/p' "$progress" | head -n1)"
    [ -n "$elapsed" ] && break
    # "workers: the attack starts in 1.9s": elapsed is minus that, rounded up.
    elapsed="$(sed -n 's/^workers: the attack starts in \([0-9]*\)\(\.[0-9]*\)\{0,1\}s$/-\1/p' "$progress" | head -n1)"
    [ -n "$elapsed" ] && { elapsed=$((elapsed - 1)); break; }
    [ "$waited" -ge 1200 ] && { echo "demo: no progress from the run in 2 minutes; nothing scaled" >&2; return 1; }
    sleep 0.1
    waited=$((waited + 1))
  done
  t0=$((SECONDS - elapsed))
  IFS=';' read -ra list <<<"$steps"
  for step in "${list[@]}"; do
    read -r at cluster args <<<"$step"
    while [ $((SECONDS - t0)) -lt "$at" ]; do sleep 0.2; done
    echo "demo: at ${at}s of the attack: kubectl --context kind-$cluster $args" >&2
    # shellcheck disable=SC2086 # args are words
    kubectl --kubeconfig "$LAB/kubeconfig" --context "kind-$cluster" $args >&2
  done
}

say "lab binaries (etcd, kube-apiserver, kwok, ...): several minutes on the first run, then cached"
MESH_VERIFY_LAB_BIN="$(bash tools/lab/build.sh | tail -n1)"
export MESH_VERIFY_LAB_BIN

say "mesh-verify"
${MAKE:-make} -s build >&2
MV="$PWD/bin/mesh-verify"
echo "$MV" >&2

# A lab of its own (short path: kwokctl puts unix sockets in it), so the
# demo never touches a lab you have up in the default directory.
LAB="$(mktemp -d /tmp/mvdemo-XXXXXX)"
OUT="${MESH_VERIFY_DEMO_OUT:-mesh-verify-runs/demo}"
mkdir -p "$OUT"
LOGS="$OUT/logs"
mkdir -p "$LOGS"
teardown() {
  "$MV" lab down --dir "$LAB" >&2 || echo "demo: lab down failed; see $LAB" >&2
  rmdir "$LAB" 2>/dev/null || true
}
trap teardown EXIT
trap 'exit 130' INT TERM

verdict_of() {
  case "$1" in
    0) echo PASS ;; 1) echo FAIL ;; 2) echo INCONCLUSIVE ;; 130) echo INTERRUPTED ;; *) echo "ERROR($1)" ;;
  esac
}

seed="${MESH_VERIFY_DEMO_SEED:-1}"
seed_flag=()
[ "$seed" = random ] || seed_flag=(--seed "$seed")

rows=()
bad=0
current=""
start=$SECONDS
for line in "${seeds[@]}"; do
  read -r scenario topology want <<<"$line"
  if [ -n "${MESH_VERIFY_DEMO_ONLY:-}" ] && [[ " $MESH_VERIFY_DEMO_ONLY " != *" $scenario "* ]]; then
    continue
  fi
  if [ "$topology" != "$current" ]; then
    [ -n "$current" ] && { "$MV" lab down --dir "$LAB" >&2; }
    say "lab up --topology $topology"
    if ! "$MV" lab up --dir "$LAB" --topology "$topology" "${seed_flag[@]}" >"$LOGS/lab-$topology.txt"; then
      cat "$LOGS/lab-$topology.txt" >&2
      rows+=("$scenario|$want|LAB-ERROR|$LOGS/lab-$topology.txt")
      bad=1
      current=""
      continue
    fi
    grep -E '^(entry|  [a-z].* routes)' "$LOGS/lab-$topology.txt" >&2 || true
    current="$topology"
  fi
  # A scenario run again on a variant of its topology (skupper-4-v2,
  # istio-mirror-noshadow) is named with it, so rows and logs stay apart.
  name="$scenario"
  [[ "$topology" == "$scenario"?* || "$topology" == "istio-mirror-noshadow" ]] && name="$scenario@$topology"
  say "mesh-verify run scenarios/catalog/$scenario.yaml   (expect $want)"
  # A scenario that attacks from worker pods (istio-helloworld,
  # cilium-rebel-base and cilium-failover from inside c1 as the tutorials'
  # client pods do, cilium-affinity from c1 and c2) needs the workers'
  # ServiceAccount and Roles in each of their clusters (attack.from,
  # attack.sources) first, as a user applies them: what `mesh-verify rbac
  # --cluster` prints. validate -o json names the clusters (workerClusters;
  # names are DNS labels, so no quoting), as mesh-verify reads the scenario.
  froms="$("$MV" validate -o json "scenarios/catalog/$scenario.yaml" | tr -d ' \n' |
    sed -n 's/.*"workerClusters":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' ' ')"
  : >"$LOGS/rbac-$scenario.txt"
  for from in $froms; do
    "$MV" rbac "scenarios/catalog/$scenario.yaml" --cluster "$from" |
      kubectl --kubeconfig "$LAB/kubeconfig" --context "kind-$from" apply -f - >>"$LOGS/rbac-$scenario.txt"
  done
  code=0
  steps="$(midrun "$scenario")"
  progress="$LOGS/progress-$name.txt"
  : >"$progress"
  scaler=""
  if [ -n "$steps" ]; then
    during "$progress" "$steps" 2>>"$LOGS/run-$name.txt.steps" &
    scaler=$!
  fi
  KUBECONFIG="$LAB/kubeconfig" "$MV" run "scenarios/catalog/$scenario.yaml" --out "$OUT" --progress plain \
    >"$LOGS/run-$name.txt" 2> >(tee "$progress" >&2) || code=$?
  got="$(verdict_of "$code")"
  if [ -n "$scaler" ] && ! wait "$scaler"; then
    got="DEMO-ERROR"
  fi
  [ -n "$scaler" ] && cat "$LOGS/run-$name.txt.steps" >&2
  # The report directory is the one `run` says it wrote to.
  report="$(sed -n 's/^wrote \(.*\)\/report\.json$/\1/p' "$LOGS/run-$name.txt" | tail -n1)"
  grep -E '^(VERDICT|.*: (PASS|FAIL|INCONCLUSIVE)$)' "$LOGS/run-$name.txt" >&2 || tail -n 5 "$LOGS/run-$name.txt" >&2
  [ "$got" = "$want" ] || bad=1
  rows+=("$name|$want|$got|${report:-$LOGS/run-$name.txt}")
done

say "summary ($((SECONDS - start))s; routing seed $seed; reports under $OUT)"
{
  printf 'SEED|EXPECTED (tutorial)|GOT|REPORT\n'
  for r in "${rows[@]}"; do
    IFS='|' read -r s w g p <<<"$r"
    mark=""
    [ "$w" = "$g" ] || mark="  <-- differs"
    printf '%s|%s|%s%s|%s\n' "$s" "$w" "$g" "$mark" "$p"
  done
} | awk -F'|' '{ for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } n = NR; nf = NF }
  END { for (r = 1; r <= n; r++) { line = ""; for (i = 1; i <= nf; i++) line = line sprintf("%-" (w[i] + 2) "s", cell[r, i]); sub(/ +$/, "", line); print line } }'
if [ "$bad" -ne 0 ]; then
  echo "demo: some verdicts differ from the tutorials (see the logs in $LOGS)" >&2
  exit 1
fi
echo "demo: every seed experiment gives the verdict its tutorial reports"
