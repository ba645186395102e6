#!/usr/bin/env bash
# make test: lint (go vet) and the tool modules' tests (tools/release,
# tools/image) run beside the main `go test ./...`, their output shown
# after it. The main run's long pole is the e2e package, whose labs mostly
# wait on API servers and pods; CI has 30 minutes. Every part must pass.
set -uo pipefail
GO=${GO:-go}
MAKE=${MAKE:-make}
PKGS=${PKGS:-./... ./lab/... ./e2e/...}
side=$(mktemp -d)
trap 'rm -rf "$side"' EXIT
( $GO vet $PKGS >"$side/lint.log" 2>&1; echo $? >"$side/lint.rc" ) &
lint=$!
( "$MAKE" --no-print-directory test-tools >"$side/tools.log" 2>&1; echo $? >"$side/tools.rc" ) &
tools=$!
$GO test -count=1 -timeout 28m $PKGS
rc=$?
wait "$lint" "$tools"
echo "== go vet $PKGS (make lint)"; cat "$side/lint.log"
echo "== make test-tools"; cat "$side/tools.log"
lrc=$(cat "$side/lint.rc"); trc=$(cat "$side/tools.rc")
echo "go test: exit $rc; go vet: exit $lrc; test-tools: exit $trc"
[ "$rc" -eq 0 ] && [ "$lrc" -eq 0 ] && [ "$trc" -eq 0 ]
