#!/usr/bin/env bash
# Runs every fuzz target of the repository for a bounded number of inputs
# (FUZZTIME, go test's -fuzztime: "500x" inputs, or a duration like "30s").
# CI runs it after `make test` with a count, not a duration: a duration's
# deadline can end a worker mid-input on a loaded machine and fail the run
# for nothing. Run longer locally: FUZZTIME=5m scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-500x}"
# FUZZPKGS limits the run to some packages (space-separated, like
# "./scenarios ./reports"). With -fuzz, go test rebuilds every dependency
# with coverage instrumentation: for a package that imports client-go
# (cmd/mesh-verify, podlogs) that alone takes minutes, so CI fuzzes the
# parsers of user input that do not, and `make test` runs every target's
# seed corpus.
pkgs="${FUZZPKGS:-}"
fail=0
while IFS=: read -r file name; do
  pkg="./$(dirname "${file#./}")"
  if [ -n "$pkgs" ] && ! printf ' %s ' $pkgs | grep -qF " $pkg "; then
    continue
  fi
  start=$(date +%s)
  if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -parallel 1 "$pkg" >/tmp/fuzz-$$.log 2>&1; then
    echo "fuzz ${pkg} ${name}: ok ($(( $(date +%s) - start ))s)"
  else
    echo "fuzz ${pkg} ${name}: FAILED"; cat /tmp/fuzz-$$.log; fail=1
  fi
done < <(grep -rho --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+' --with-filename . | grep -v '^./tools/' | sed -E 's/:func /:/' | sort -u)
rm -f /tmp/fuzz-$$.log
exit "$fail"
