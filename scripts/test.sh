#!/usr/bin/env bash
# make test: lint (go vet), the tool modules' tests (tools/release,
# tools/image) and the race detector over the packages whose goroutines
# share a request's state (RACE_PKGS: the attack's engines and transport,
# the sink, the tally, the fleet's merge) run beside the main
# `go test ./...`, their output shown after it. The race detector needs
# cgo, which the Makefile turns off for the static binaries. The main
# run's long pole is the e2e package, whose labs mostly wait on API
# servers and pods; CI has 30 minutes. Every part must pass.
set -uo pipefail
GO=${GO:-go}
MAKE=${MAKE:-make}
PKGS=${PKGS:-./... ./lab/... ./e2e/...}
RACE_PKGS=${RACE_PKGS:-./attack/ ./measure/ ./tally/ ./fleet/}
side=$(mktemp -d)
trap 'rm -rf "$side"' EXIT
( $GO vet $PKGS >"$side/lint.log" 2>&1; echo $? >"$side/lint.rc" ) &
lint=$!
( "$MAKE" --no-print-directory test-tools >"$side/tools.log" 2>&1; echo $? >"$side/tools.rc" ) &
tools=$!
( CGO_ENABLED=1 $GO test -race -count=1 -timeout 10m $RACE_PKGS >"$side/race.log" 2>&1; echo $? >"$side/race.rc" ) &
race=$!
$GO test -count=1 -timeout 28m $PKGS
rc=$?
wait "$lint" "$tools" "$race"
echo "== go vet $PKGS (make lint)"; cat "$side/lint.log"
echo "== make test-tools"; cat "$side/tools.log"
echo "== go test -race $RACE_PKGS"; cat "$side/race.log"
lrc=$(cat "$side/lint.rc"); trc=$(cat "$side/tools.rc"); xrc=$(cat "$side/race.rc")
echo "go test: exit $rc; go vet: exit $lrc; test-tools: exit $trc; go test -race: exit $xrc"
[ "$rc" -eq 0 ] && [ "$lrc" -eq 0 ] && [ "$trc" -eq 0 ] && [ "$xrc" -eq 0 ]
