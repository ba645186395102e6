#!/usr/bin/env bash
# Builds the local lab's tool binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, kwokctl) from the Go modules pinned in this directory's
# go.mod/go.sum, into a cache directory, and prints that directory on the last line of stdout.
# Progress goes to stderr, so `bin="$(tools/lab/build.sh)"` works.
#
#   MESH_VERIFY_LAB_BIN    output dir (default ~/.cache/mesh-verify/lab/bin-<hash of pins>)
#   MESH_VERIFY_LAB_JOBS   go build -p (default: number of CPUs)
#   MESH_VERIFY_LAB_QUIET  set to 1 to drop the "still building" heartbeat lines
#
# A binary is skipped when it exists and its stamp (module@version, ldflags, Go version)
# matches; a cold build takes ~9 minutes on 2 cores (see NOTES.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# Our own settings, whatever the caller's GOFLAGS says: go.sum is committed, so never
# rewrite go.mod/go.sum, and don't stamp VCS info (the repo may be dirty or not a repo).
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOWORK=off
export CGO_ENABLED="${CGO_ENABLED:-0}"

log() { printf '[lab-build %4ds] %s\n' "$((SECONDS - start))" "$*" >&2; }
start=$SECONDS

go_version="$(go env GOVERSION)"
kube_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"     # e.g. v1.36.1
kwok_version="$(go list -m -f '{{.Version}}' sigs.k8s.io/kwok)"
etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
kube_minor="$(echo "$kube_version" | cut -d. -f2)"

# kwokctl runs `<binary> --version` and picks flags by the version it reads: without these the
# kube binaries report v0.0.0-master and kwokctl falls back to "unknown" version handling.
kube_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $p.gitVersion=$kube_version -X $p.gitMajor=1 -X $p.gitMinor=$kube_minor"
  kube_ldflags+=" -X $p.gitTreeState=clean"
done
plain_ldflags="-s -w"

# name|package|module version|ldflags
targets=(
  "etcd|./cmd/etcd|$etcd_version|$plain_ldflags"
  "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|$kube_version|$kube_ldflags"
  "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|$kube_version|$kube_ldflags"
  "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|$kube_version|$kube_ldflags"
  "kubectl|k8s.io/kubernetes/cmd/kubectl|$kube_version|$kube_ldflags"
  "kwok|sigs.k8s.io/kwok/cmd/kwok|$kwok_version|$plain_ldflags"
  "kwokctl|sigs.k8s.io/kwok/cmd/kwokctl|$kwok_version|$plain_ldflags"
)

# The bin dir is keyed by the resolved build list (not go.mod's text: comments don't count).
pins_hash="$( { go list -m -f '{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}' all
  cat cmd/etcd/main.go; echo "$go_version $(go env GOOS GOARCH) $CGO_ENABLED"
  printf '%s\n' "${targets[@]}"; } | sha256sum | cut -c1-12)"
bin_dir="${MESH_VERIFY_LAB_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/mesh-verify/lab/bin-$pins_hash}"
mkdir -p "$bin_dir"

# Serialise concurrent builds into the same dir (e.g. parallel test packages).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$bin_dir/.lock"
  if ! flock -n 9; then
    log "another build into $bin_dir is running; waiting for it"
    flock 9
  fi
fi

heartbeat_pid=""
cleanup() {
  if [[ -n "$heartbeat_pid" ]]; then kill "$heartbeat_pid" 2>/dev/null || true; fi
  rm -f "$bin_dir"/.tmp-*."$$"
}
trap cleanup EXIT

jobs="${MESH_VERIFY_LAB_JOBS:-$(nproc 2>/dev/null || echo 2)}"
log "kubernetes $kube_version, etcd $etcd_version, kwok $kwok_version, $go_version, -p $jobs -> $bin_dir"

run_step() { # label, command...: runs it with a "still ..." line every 20s
  local label="$1" t0=$SECONDS; shift
  if [[ "${MESH_VERIFY_LAB_QUIET:-}" != 1 ]]; then
    # $$ is this script even in the subshell: the heartbeat ends with it, also when the
    # script is killed outright (SIGKILL, no EXIT trap), instead of logging forever.
    ( exec 9>&-   # don't hold the build lock; stop the sleep too when killed
      trap 'kill "$sp" 2>/dev/null; exit 0' TERM INT HUP
      while kill -0 $$ 2>/dev/null; do
        sleep 20 & sp=$!; wait "$sp"
        kill -0 $$ 2>/dev/null || exit 0
        log "$label: still running, $((SECONDS - t0))s"
      done ) &
    heartbeat_pid=$!
  fi
  "$@"
  if [[ -n "$heartbeat_pid" ]]; then
    kill "$heartbeat_pid" 2>/dev/null || true; wait "$heartbeat_pid" 2>/dev/null || true; heartbeat_pid=""
  fi
}

stamp_of() { echo "$1 $2@$3 $go_version CGO_ENABLED=$CGO_ENABLED ldflags=[$4]"; }
up_to_date() { [[ -x "$bin_dir/$1" && "$(cat "$bin_dir/.stamp-$1" 2>/dev/null)" == "$2" ]]; }

todo=0
for t in "${targets[@]}"; do
  IFS='|' read -r name pkg ver ldflags <<<"$t"
  up_to_date "$name" "$(stamp_of "$name" "$pkg" "$ver" "$ldflags")" || todo=$((todo + 1))
done
if [[ $todo -gt 0 ]]; then
  log "$todo of ${#targets[@]} binaries to build; downloading modules (cold: ~0.9 GB into $(go env GOMODCACHE))"
  run_step "module download" go mod download
fi

i=0
for t in "${targets[@]}"; do
  i=$((i + 1))
  IFS='|' read -r name pkg ver ldflags <<<"$t"
  stamp="$(stamp_of "$name" "$pkg" "$ver" "$ldflags")"
  if up_to_date "$name" "$stamp"; then
    log "($i/${#targets[@]}) $name: up to date"
    continue
  fi
  t0=$SECONDS
  log "($i/${#targets[@]}) $name: building $pkg@$ver"
  tmp="$bin_dir/.tmp-$name.$$"
  run_step "($i/${#targets[@]}) $name" go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg"
  mv -f "$tmp" "$bin_dir/$name"
  printf '%s' "$stamp" >"$bin_dir/.stamp-$name"
  log "($i/${#targets[@]}) $name: built in $((SECONDS - t0))s ($(du -h "$bin_dir/$name" | cut -f1))"
done

log "done in $((SECONDS - start))s"
echo "$bin_dir"
