#!/usr/bin/env bash
# Smoke test of the lab tool binaries (see NOTES.md): builds them if needed, creates two kwok
# clusters c1 and c2 side by side with the binary runtime, checks node/pod/Deployment,
# ClusterLogs (kubectl logs --timestamps/--since-time/-f) and ClusterPortForward
# (kubectl port-forward + curl) on both, deletes them and checks no process is left.
# Everything lives in a temp dir (kwok workdir, kubeconfig, kubectl cache); never ~/.kube or ~/.kwok.
# Usage: tools/lab/smoke.sh            (exit 0 and "smoke: N passed, 0 failed" on success)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
B="$("$here/build.sh" | tail -n1)"

T="$(mktemp -d /tmp/mesh-verify-lab-smoke.XXXXXX)"
export KWOK_WORKDIR="$T/kwok" KUBECONFIG="$T/kubeconfig" KUBECACHEDIR="$T/kubecache"
export PATH="$B:$PATH"             # kwokctl runs `kubectl` from PATH first; make it ours
pids=()
clusters=()
passed=0 failed=0
ok()   { passed=$((passed + 1)); echo "PASS $*"; }
bad()  { failed=$((failed + 1)); echo "FAIL $*"; }
now()  { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
# wait_until SECONDS WHAT COMMAND...: polls COMMAND every 0.1s; after SECONDS the smoke test fails
wait_until() {
  local limit="$1" what="$2" end=$((SECONDS + $1)); shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      bad "$what: not within ${limit}s (waiting for: $*)"
      echo "smoke: $passed passed, $failed failed (gave up waiting)"
      exit 1
    fi
    sleep 0.1
  done
}
# forget PID: drop a pid already stopped and reaped, so cleanup never signals a reused pid
forget() { local p keep=(); for p in "${pids[@]}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done; pids=("${keep[@]}"); }

cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for c in "${clusters[@]}"; do "$B/kwokctl" --name "$c" delete cluster --kubeconfig "$KUBECONFIG" >/dev/null 2>&1; done
  rm -rf "$T"
}
trap cleanup EXIT

cat >"$T/kwok.yaml" <<EOF
kind: KwokctlConfiguration
apiVersion: config.kwok.x-k8s.io/v1alpha1
options:
  bindAddress: 127.0.0.1     # default is 0.0.0.0 and there is no CLI flag for it
  kubectlBinary: $B/kubectl  # used when no kubectl is on PATH (else it downloads one)
EOF

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# create_cluster NAME: sequential only (concurrent creates pick the same ports)
create_cluster() {
  local t0; t0="$(now)"
  clusters+=("$1")
  "$B/kwokctl" -c "$T/kwok.yaml" --name "$1" create cluster --runtime binary \
    --etcd-binary "$B/etcd" --kube-apiserver-binary "$B/kube-apiserver" \
    --kube-controller-manager-binary "$B/kube-controller-manager" \
    --kube-scheduler-binary "$B/kube-scheduler" --kwok-controller-binary "$B/kwok" \
    --enable-crds=ClusterPortForward,ClusterLogs,PortForward,Logs \
    --kubeconfig "$KUBECONFIG" >"$T/$1.create.log" 2>&1
  echo "created $1 in $(since "$t0")s"
}

# setup_and_check NAME BODY: node, namespace, pod, deployment, logs, port-forward
setup_and_check() {
  local c="$1" body="$2" k="kubectl --context kwok-$1" t0 port lport log
  $k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: kwok-node-0, kubernetes.io/os: linux, type: kwok}
spec:
  taints: [{effect: NoSchedule, key: kwok.x-k8s.io/node, value: fake}]
EOF
  $k create namespace demo >/dev/null
  t0="$(now)"
  wait_until 60 "$c default ServiceAccount" $k -n demo get serviceaccount default   # made by kube-controller-manager
  echo "$c: default ServiceAccount after $(since "$t0")s"
  $k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: x, namespace: demo, labels: {app: x}}
spec:
  nodeName: kwok-node-0
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
  containers: [{name: app, image: callme-service:v1, ports: [{containerPort: 8080}]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: callme, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: callme}}
  template:
    metadata: {labels: {app: callme}}
    spec:
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: app, image: callme-service:v1}]
EOF
  if $k -n demo wait --for=jsonpath='{.status.phase}'=Running pod/x --timeout=30s >/dev/null; then ok "$c pod Running"; else bad "$c pod Running"; fi
  if $k -n demo rollout status deploy/callme --timeout=30s >/dev/null; then ok "$c Deployment rolled out"; else bad "$c Deployment"; fi

  log="$T/$c-x.log"
  printf '%s\n' "2026-01-02T03:04:05.123456789Z stdout F message from $c" \
    "2026-01-02T03:04:06.000000001Z stdout F second line" >"$log"
  $k apply -f - >/dev/null <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata: {name: demo-x}
spec:
  selector: {matchNamespaces: [demo], matchNames: [x]}
  logs:
  - containers: [app]
    logsFile: $log
EOF
  port="$(free_port)"
  (cd "$T" && mkdir -p "www-$c" && echo "$body" >"www-$c/index.html" && cd "www-$c" &&
    exec python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1) &
  pids+=($!)
  $k apply -f - >/dev/null <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata: {name: demo-x}
spec:
  selector: {matchNamespaces: [demo], matchNames: [x]}
  forwards:
  - ports: [8080]
    target: {port: $port, address: 127.0.0.1}
EOF
  # kwok-controller picks the objects up through a watch: poll, don't sleep a fixed time
  t0="$(now)"
  wait_until 30 "$c ClusterLogs served" $k -n demo logs x
  echo "$c: ClusterLogs served after $(since "$t0")s"
  [[ "$($k -n demo logs x --timestamps | head -n1)" == "2026-01-02T03:04:05.123456789Z message from $c" ]] \
    && ok "$c logs --timestamps" || bad "$c logs --timestamps"
  [[ "$($k -n demo logs x --since-time=2026-01-02T03:04:06Z)" == "second line" ]] \
    && ok "$c logs --since-time" || bad "$c logs --since-time"
  $k -n demo logs -f x >"$T/$c.follow" 2>&1 &
  local fp=$!
  pids+=("$fp")
  sleep 1
  echo "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ) stdout F appended" >>"$log"
  for _ in $(seq 50); do grep -q appended "$T/$c.follow" && break; sleep 0.1; done
  kill "$fp"; wait "$fp" 2>/dev/null || true
  forget "$fp"
  grep -q appended "$T/$c.follow" && ok "$c logs -f" || bad "$c logs -f"

  lport="$(free_port)"
  $k -n demo port-forward --address 127.0.0.1 pod/x "$lport:8080" >"$T/$c.pf" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do grep -q Forwarding "$T/$c.pf" && break; sleep 0.1; done
  PF_PORT[$c]="$lport"
}

declare -A PF_PORT
create_cluster c1
setup_and_check c1 "I'm callme-service v1"
create_cluster c2
setup_and_check c2 "I'm callme-service v2"
# both side by side
[[ "$(curl -s -m 5 "127.0.0.1:${PF_PORT[c1]}/")" == "I'm callme-service v1" ]] && ok "c1 port-forward" || bad "c1 port-forward"
[[ "$(curl -s -m 5 "127.0.0.1:${PF_PORT[c2]}/")" == "I'm callme-service v2" ]] && ok "c2 port-forward" || bad "c2 port-forward"
[[ "$(ss -ltnH | awk '{print $4}' | grep -E ':32[0-9]{3}$' | grep -vc '^127\.0\.0\.1:')" == 0 ]] \
  && ok "all kwok ports on 127.0.0.1" || bad "a kwok port is not on 127.0.0.1"
echo "processes per cluster (RSS):"
ps -eo rss,args | awk -v t="$KWOK_WORKDIR" 'index($2, t) == 1 {n=split($2,a,"/"); printf "  %-8s %-24s %5.0f MB\n", a[n-2], a[n], $1/1024}'

# teardown
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
pids=()
for c in "${clusters[@]}"; do "$B/kwokctl" --name "$c" delete cluster --kubeconfig "$KUBECONFIG" >/dev/null 2>&1; done
clusters=()
sleep 1
left="$(ps -eo stat=,args= | awk -v t="$KWOK_WORKDIR" '$1 !~ /^Z/ && index($2, t) == 1' || true)"
[[ -z "$left" ]] && ok "no process left" || bad "processes left: $left"

echo "smoke: $passed passed, $failed failed"
[[ $failed == 0 ]]
