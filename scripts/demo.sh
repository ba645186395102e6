#!/usr/bin/env bash
# make demo: every seed experiment (the Skupper, Istio and Cilium tutorials
# and the Kuma multi-zone canary) reproduced in the local lab and judged by
# mesh-verify. For each topology: `mesh-verify lab up --topology X` (real
# kwok API servers, tutorial apps, simulated mesh), `mesh-verify run` of
# each scenario kept in scenarios/catalog/ that uses it, then `lab down`.
# Labs of different topologies run side by side, each in a directory of its
# own (its own kubeconfig, kubectl cache, kwok state, daemon and ports).
# Prints one line per phase change with an estimate of what remains, then a
# summary table in the seeds' order, and exits non-zero when a verdict
# differs from what the tutorial reports. Everything listens on 127.0.0.1;
# every lab is torn down, also on failure or Ctrl-C.
#
#   MESH_VERIFY_DEMO_ONLY="skupper-1 kuma-canary"   run only these scenarios
#   MESH_VERIFY_DEMO_OUT=dir                        where reports go (default mesh-verify-runs/demo)
#   MESH_VERIFY_DEMO_SEED=N|random                  the labs' routing seed (default 1)
#   MESH_VERIFY_DEMO_JOBS=N                         labs at once (default three per CPU, at most 6, 1 GB each)
#   MESH_VERIFY_DEMO_LABUPS=N                       of them coming up at once (default one per CPU)
#
# The lab routes at random where the real data plane does (Envoy's weights
# and mirror fractions, per-connection picks); the demo brings every lab up
# with the same seed, printed in the summary, so a run can be replayed.
# `make calibrate` repeats the random experiments over many seeds.
#
# The estimate comes from the previous demo's times, kept per lab and row
# in $MESH_VERIFY_DEMO_OUT/demo-times.tsv; without them from each
# scenario's attack (its duration, or its requests at its rate) plus a
# guess for lab up and the run's set-up and collection.
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
    skupper-failover) echo "20 c3 $app --replicas 1;40 c3 $app --replicas 0" ;;
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
    KUBECACHEDIR="$LAB/kubecache" kubectl --kubeconfig "$LAB/kubeconfig" --context "kind-$cluster" $args >&2
  done
}


# attack_secs SCENARIO: how long the scenario's attack lasts by its own
# numbers: attack.duration, else attack.requests at attack.rate, else its
# requests (requests, or concurrency × repetitions) at a guessed 100/s.
# Only for the estimate of a demo without recorded times.
attack_secs() {
  awk '
    /^attack:/ { in_attack = 1; next }
    /^[^ #]/ { in_attack = 0 }
    in_attack && /^  [a-z]+:/ {
      key = $1; sub(/:$/, "", key); v = $2
      if (key == "duration") { d = v; sub(/s$/, "", d); if (v ~ /m$/) { sub(/m$/, "", d); d *= 60 } duration = d }
      if (key == "rate") { r = v; sub(/\/s$/, "", r); rate = r }
      if (key == "requests") requests = v
      if (key == "repetitions") reps = v
      if (key == "concurrency") conc = v
    }
    END {
      if (duration > 0) { print int(duration); exit }
      if (requests == "" && reps != "") requests = reps * (conc > 0 ? conc : 1)
      if (rate > 0 && requests > 0) { print int(requests / rate + 0.5); exit }
      print int((requests > 0 ? requests : 1000) / 100 + 0.5)
    }' "scenarios/catalog/$1.yaml"
}

# demo_jobs: labs at once, three per CPU and at most six, and no more
# than MemAvailable holds at 1 GB a lab (a three-cluster lab's API
# servers, etcds and controllers hold about 1 GB of private memory). A
# warm demo's runs wait mostly on the apps (tens of milliseconds a
# request, fixed-rate worker pods, the failovers' minute-long attacks)
# and its lab ups are bounded apart ($labups), so with two labs per CPU
# the CPUs idled for 20 s at a time while four long runs held every
# slot; with three they stay busy (README.md, "make demo").
demo_jobs() {
  local n mem
  n="$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)"
  n=$((n * 3))
  [ "$n" -gt 6 ] && n=6
  mem="$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo 2>/dev/null || true)"
  if [ -n "$mem" ] && [ "$mem" -lt "$n" ]; then
    n=$((mem > 1 ? mem : 1))
  fi
  echo "$n"
}

now() { echo "${EPOCHSECONDS:-$(date +%s)}"; } # EPOCHSECONDS: bash 5.0

fmt_secs() { # 125 -> 2m05s
  if [ "$1" -ge 60 ]; then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi
}

jobs="${MESH_VERIFY_DEMO_JOBS:-$(demo_jobs)}"
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || [ "$jobs" -gt 32 ]; then
  echo "demo: MESH_VERIFY_DEMO_JOBS=$jobs: want a whole number from 1 to 32" >&2
  exit 4
fi
# Lab ups at once: a lab up is mostly CPU (kube-apiservers starting,
# controllers, kubectl applies), so no more of them than CPUs; the other
# labs run their scenarios meanwhile.
labups="${MESH_VERIFY_DEMO_LABUPS:-$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}"
if ! [[ "$labups" =~ ^[1-9][0-9]*$ ]] || [ "$labups" -gt 32 ]; then
  echo "demo: MESH_VERIFY_DEMO_LABUPS=$labups: want a whole number from 1 to 32" >&2
  exit 4
fi
[ "$labups" -gt "$jobs" ] && labups="$jobs"
# wait -n -p (bash 5.1) takes whichever lab finishes first; an older bash
# waits for the labs in the order they started, and is slower only.
wait_any=0
if [ "${BASH_VERSINFO[0]}" -gt 5 ] || { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -ge 1 ]; }; then
  wait_any=1
fi

say "lab binaries (etcd, kube-apiserver, kwok, ...): several minutes on the first run, then cached"
MESH_VERIFY_LAB_BIN="$(bash tools/lab/build.sh | tail -n1)"
export MESH_VERIFY_LAB_BIN

say "mesh-verify"
${MAKE:-make} -s build >&2
MV="$PWD/bin/mesh-verify"
echo "$MV" >&2

OUT="${MESH_VERIFY_DEMO_OUT:-mesh-verify-runs/demo}"
mkdir -p "$OUT"
LOGS="$OUT/logs"
mkdir -p "$LOGS"
# stamp WHAT: one line of $LOGS/timeline.tsv, the time (to the
# microsecond) and what happens then, for a breakdown of where a row's or
# a lab's time goes beside report.json's attack start and end.
: >"$LOGS/timeline.tsv"
stamp() { printf '%s\t%s\n' "${EPOCHREALTIME:-$(date +%s.%N)}" "$*" >>"$LOGS/timeline.tsv"; }
TIMES="$OUT/demo-times.tsv"

seed="${MESH_VERIFY_DEMO_SEED:-1}"
seed_flag=()
[ "$seed" = random ] || seed_flag=(--seed "$seed")

# The rows to run and their groups: consecutive rows of one topology share
# a lab, in the seeds' order (skupper-failover after skupper-3: it scales
# c3's app up and back to zero, the manifests' state).
row_scenario=() row_topology=() row_want=() row_name=()
group_topology=() group_rows=()
for line in "${seeds[@]}"; do
  read -r scenario topology want <<<"$line"
  if [ -n "${MESH_VERIFY_DEMO_ONLY:-}" ] && [[ " $MESH_VERIFY_DEMO_ONLY " != *" $scenario "* ]]; then
    continue
  fi
  i=${#row_scenario[@]}
  # A scenario run again on a variant of its topology (skupper-4-v2,
  # istio-mirror-noshadow) is named with it, so rows and logs stay apart.
  name="$scenario"
  [[ "$topology" == "$scenario"?* || "$topology" == "istio-mirror-noshadow" ]] && name="$scenario@$topology"
  row_scenario+=("$scenario") row_topology+=("$topology") row_want+=("$want") row_name+=("$name")
  g=$((${#group_topology[@]} - 1))
  if [ "$g" -lt 0 ] || [ "${group_topology[$g]}" != "$topology" ]; then
    group_topology+=("$topology") group_rows+=("")
    g=$((g + 1))
  fi
  group_rows[g]+="$i "
done
if [ "${#row_scenario[@]}" -eq 0 ]; then
  echo "demo: MESH_VERIFY_DEMO_ONLY=\"${MESH_VERIFY_DEMO_ONLY:-}\" names no seed scenario" >&2
  exit 4
fi

# The demo's own state: the plan (what each phase is expected to take),
# the events (when each phase started and ended), each row's result, the
# times measured; removed at the end. Labs are directories of their own
# (short paths: kwokctl puts unix sockets in them), so the demo never
# touches a lab you have up in the default directory.
STATE="$(mktemp -d /tmp/mvdemo-state-XXXXXX)"
trap 'rm -rf "$STATE"' EXIT # until the labs start (cleanup)

# recorded KEY: the previous demo's seconds for KEY ("lab up skupper-2",
# "run skupper-2-per-pod", "lab down skupper-2"), else nothing.
recorded() {
  [ -f "$TIMES" ] || return 0
  awk -F'\t' -v k="$1" '$1 == k { v = $2 } END { if (v != "") print v }' "$TIMES"
}
{
  for g in "${!group_topology[@]}"; do
    t="${group_topology[$g]}"
    est="$(recorded "lab up $t")"
    printf 'g%s:up\t%s\n' "$g" "${est:-20}"
    for i in ${group_rows[$g]}; do
      est="$(recorded "run ${row_name[$i]}")"
      # set-up (inventory, warm-up of the logs) and collection around the attack
      [ -n "$est" ] || est=$(($(attack_secs "${row_scenario[$i]}") + 8))
      printf 'g%s:run%s\t%s\n' "$g" "$i" "$est"
    done
    est="$(recorded "lab down $t")"
    printf 'g%s:down\t%s\n' "$g" "${est:-2}"
  done
} >"$STATE/plan"
: >"$STATE/events"
: >"$STATE/times"

# eta: seconds left by the plan and the events: each group's phases not
# ended (a started one less the time it has run), and the demo as long as
# its longest group or its total spread over the jobs, whichever is more.
eta() {
  awk -F'\t' -v now="$(now)" -v jobs="$jobs" '
    FILENAME == ARGV[1] { want[$1] = $2; next }
    $2 == "start" { started[$3] = $1 } $2 == "end" { ended[$3] = 1 }
    END {
      for (k in want) {
        if (k in ended) continue
        left = want[k]
        if (k in started) { left -= now - started[k]; if (left < 1) left = 1 }
        g = k; sub(/:.*/, "", g); group[g] += left; total += left
      }
      longest = 0
      for (g in group) if (group[g] > longest) longest = group[g]
      spread = total / jobs
      print int((longest > spread ? longest : spread) + 0.5)
    }' "$STATE/plan" "$STATE/events"
}

# phase KEY WHAT LABEL: KEY ("g3:run5") starts, named LABEL in the times
# recorded ("run skupper-2"); ends the previous phase of the same lab
# (LAST_KEY) and records its time; prints one line, WHAT, with what remains
# of the whole demo. An empty KEY only ends the previous phase.
LAST_KEY="" LAST_LABEL="" LAST_START=0
phase() {
  local key="$1" what="$2" t
  t="$(now)"
  if [ -n "$LAST_KEY" ]; then
    printf '%s\tend\t%s\n' "$t" "$LAST_KEY" >>"$STATE/events"
    printf '%s\t%s\n' "$LAST_LABEL" "$((t - LAST_START))" >>"$STATE/times"
  fi
  LAST_KEY="$key" LAST_LABEL="$3" LAST_START="$t"
  if [ -n "$key" ]; then printf '%s\tstart\t%s\n' "$t" "$key" >>"$STATE/events"; fi
  printf '[demo %6s] %-48s ~%s left\n' "$(fmt_secs $((t - demo_start)))" "$what" "$(fmt_secs "$(eta)")" >&2
}

verdict_of() {
  case "$1" in
    0) echo PASS ;; 1) echo FAIL ;; 2) echo INCONCLUSIVE ;; 130) echo INTERRUPTED ;; *) echo "ERROR($1)" ;;
  esac
}

# attack SCENARIO NAME STEPS: `mesh-verify run` of the scenario against the
# lab in $LAB, with the steps of midrun done meanwhile; its exit code, or
# 125 when a step failed.
attack() {
  local scenario="$1" name="$2" steps="$3" scaler="" code=0
  if [ -n "$steps" ]; then
    during "$LOGS/progress-$name.txt" "$steps" 2>"$LOGS/run-$name.txt.steps" &
    scaler=$!
  fi
  KUBECONFIG="$LAB/kubeconfig" KUBECACHEDIR="$LAB/kubecache" "$MV" run "scenarios/catalog/$scenario.yaml" \
    --out "$OUT" --progress plain >"$LOGS/run-$name.txt" 2>"$LOGS/progress-$name.txt" || code=$?
  if [ -n "$scaler" ] && ! wait "$scaler"; then
    code=125
  fi
  return "$code"
}

# A lab up costs seconds of CPU (each cluster's kube-apiserver, its
# controllers, kubectl applies): at most $labups labs come up at once (a
# token each from the FIFO on fd 3, which the demo fills with $labups: the
# demo takes one before it starts a lab's job, so labs come up in the
# order they start, longest first, and the job gives it back once its lab
# is up). The commands do not get the descriptor (a lab daemon would hold
# it on).
#
# labup LOG KEY WHAT LABEL COMMAND...: COMMAND (the lab up, output to LOG)
# as phase KEY.
labup() {
  local log="$1" key="$2" what="$3" label="$4" rc=0
  shift 4
  phase "$key" "$what" "$label"
  stamp "$label: start"
  "$@" >"$log" 2>&1 3>&- || rc=$?
  stamp "$label: end"
  return "$rc"
}

# give_token: gives back the lab-up token the demo took for this job
# (run_group's $token), once.
give_token() {
  [ "$token" = 1 ] || return 0
  token=0
  printf x >&3
}

# row I: runs row I's scenario against the lab in $LAB, a phase of its
# own, and writes its result (name|want|got|report) to $STATE/result-I.
row() {
  local i="$1" scenario="${row_scenario[$1]}" want="${row_want[$1]}" name="${row_name[$1]}"
  local froms from code=0 steps progress got report
  phase "g$g:run$i" "run $name (expect $want)" "run $name"
  stamp "run $name: rbac"
  # A scenario that attacks from worker pods (istio-helloworld,
  # cilium-rebel-base and cilium-failover from inside c1 as the tutorials'
  # client pods do, cilium-affinity from c1 and c2) needs the workers'
  # ServiceAccount and Roles in each of their clusters (attack.from,
  # attack.sources) first, as a user applies them: what `mesh-verify rbac
  # --cluster` prints. validate -o json names the clusters (workerClusters;
  # names are DNS labels, so no quoting), as mesh-verify reads the scenario.
  froms="$("$MV" validate -o json "scenarios/catalog/$scenario.yaml" | tr -d ' \n' |
    sed -n 's/.*"workerClusters":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' ' ')"
  : >"$LOGS/rbac-$name.txt"
  for from in $froms; do
    "$MV" rbac "scenarios/catalog/$scenario.yaml" --cluster "$from" |
      KUBECACHEDIR="$LAB/kubecache" kubectl --kubeconfig "$LAB/kubeconfig" --context "kind-$from" apply -f - >>"$LOGS/rbac-$name.txt"
  done
  steps="$(midrun "$scenario")"
  progress="$LOGS/progress-$name.txt"
  : >"$progress"
  stamp "run $name: start"
  attack "$scenario" "$name" "$steps" || code=$?
  stamp "run $name: end"
  got="$(verdict_of "$code")"
  [ "$code" = 125 ] && got="DEMO-ERROR"
  [ -n "$steps" ] && sed "s/^/  $name: /" "$LOGS/run-$name.txt.steps" >&2
  # The report directory is the one `run` says it wrote to.
  report="$(sed -n 's/^wrote \(.*\)\/report\.json$/\1/p' "$LOGS/run-$name.txt" | tail -n1)"
  { grep -E '^(VERDICT|.*: (PASS|FAIL|INCONCLUSIVE)$)' "$LOGS/run-$name.txt" || tail -n 5 "$LOGS/run-$name.txt"; } |
    sed "s/^/  $name: /" >&2
  printf '%s|%s|%s|%s\n' "$name" "$want" "$got" "${report:-$LOGS/run-$name.txt}" >"$STATE/result-$i"
}

# run_group G: one lab for group G's rows, in a process group of its own
# (the demo stops it with a signal to the group); the lab is always torn
# down, by `lab down` of its directory (the daemon by its pid file).
# Its state is global, not local: the job is a subshell of its own, and
# when set -e ends it inside a row, the EXIT trap runs after the
# function's locals are gone (an unbound LAB left the lab up).
run_group() {
  g="$1" topology="${group_topology[$1]}" LAB="" down=0 token=1
  local i
  set +m # the lab's children stay in this job's process group
  teardown() {
    [ -n "$LAB" ] && [ "$down" = 0 ] || return 0
    down=1
    stamp "lab down $topology: start"
    "$MV" lab down --dir "$LAB" >"$LOGS/lab-down-$topology.txt" 2>&1 ||
      { cat "$LOGS/lab-down-$topology.txt" >&2; echo "demo: lab down failed; see $LAB" >&2; }
    stamp "lab down $topology: end"
    rmdir "$LAB" 2>/dev/null || true
  }
  trap teardown EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  LAB="$(mktemp -d /tmp/mvdemo-XXXXXX)"
  if ! labup "$LOGS/lab-$topology.txt" "g$g:up" "lab up $topology ($LAB)" "lab up $topology" \
    "$MV" lab up --dir "$LAB" --topology "$topology" "${seed_flag[@]}"; then
    give_token
    sed "s/^/  lab $topology: /" "$LOGS/lab-$topology.txt" >&2
    for i in ${group_rows[$g]}; do
      printf '%s|%s|LAB-ERROR|%s\n' "${row_name[$i]}" "${row_want[$i]}" "$LOGS/lab-$topology.txt" >"$STATE/result-$i"
    done
  else
    give_token
    grep -E '^(daemon|  [a-z].* routes)' "$LOGS/lab-$topology.txt" | sed "s/^/  lab $topology: /" >&2 || true
    for i in ${group_rows[$g]}; do
      row "$i"
    done
  fi
  give_token
  phase "g$g:down" "lab down $topology" "lab down $topology"
  teardown
  phase "" "lab $topology done" ""
}

# Longest lab first (by the plan), so the long ones do not start last.
order="$(awk -F'\t' '{ g = $1; sub(/:.*/, "", g); sub(/^g/, "", g); t[g] += $2 }
  END { for (g in t) print t[g], g }' "$STATE/plan" | sort -k1,1nr -k2,2n | awk '{ print $2 }')"

running=()
stop_all() {
  trap '' INT TERM
  echo "demo: interrupted; stopping ${#running[@]} lab(s)" >&2
  for pid in "${running[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${running[@]}"; do wait "$pid" 2>/dev/null || true; done
  running=()
}
cleanup() {
  [ "${#running[@]}" -gt 0 ] && stop_all
  rm -rf "$STATE"
}
trap cleanup EXIT
trap 'stop_all; exit 130' INT TERM

wait_one() {
  local done_pid="" p left=()
  if [ "$wait_any" = 1 ]; then
    wait -n -p done_pid "${running[@]}" || true
  else
    done_pid="${running[0]}"
    wait "$done_pid" || true
  fi
  for p in "${running[@]}"; do [ "$p" = "$done_pid" ] || left+=("$p"); done
  running=("${left[@]}")
}

mkfifo "$STATE/labup-tokens"
exec 3<>"$STATE/labup-tokens"
for ((k = 0; k < labups; k++)); do printf x >&3; done
demo_start="$(now)"
say "${#row_scenario[@]} scenarios on ${#group_topology[@]} labs, up to $jobs at once ($labups coming up); estimate $(fmt_secs "$(eta)")"
for g in $order; do
  while [ "${#running[@]}" -ge "$jobs" ]; do wait_one; done
  read -r -n 1 -u 3 _ # a lab-up token for this lab's job
  # Job control on for the launch only: the lab gets a process group of
  # its own, which Ctrl-C in the terminal does not reach; stop_all stops it.
  set -m
  run_group "$g" &
  running+=("$!")
  set +m
done
while [ "${#running[@]}" -gt 0 ]; do wait_one; done

# The times measured become the next demo's estimate (rows not run this
# time keep theirs).
if [ -s "$STATE/times" ]; then
  { [ -f "$TIMES" ] && cat "$TIMES"; cat "$STATE/times"; } |
    awk -F'\t' 'NF == 2 && $1 != "" { v[$1] = $2; if (!($1 in seen)) { seen[$1] = 1; k[++n] = $1 } }
      END { for (i = 1; i <= n; i++) printf "%s\t%s\n", k[i], v[k[i]] }' >"$TIMES.new"
  mv -f "$TIMES.new" "$TIMES"
fi

bad=0
rows=()
for i in "${!row_scenario[@]}"; do
  if [ -f "$STATE/result-$i" ]; then
    r="$(cat "$STATE/result-$i")"
  else
    # its lab's job ended before the row did (a command of the demo failed)
    r="${row_name[$i]}|${row_want[$i]}|DEMO-ERROR|$LOGS"
  fi
  IFS='|' read -r _ w got _ <<<"$r"
  [ "$got" = "$w" ] || bad=1
  rows+=("$r")
done

say "summary ($(fmt_secs $(($(now) - demo_start))), $jobs labs at once; routing seed $seed; reports under $OUT)"
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
