#!/usr/bin/env bash
# The quick suite: `go test -short ./...` with nothing but Go — no Docker,
# Postgres, Kubernetes, Chromium or builds of the binaries — in about a
# minute, then what it skipped and why (testenv.Long). The whole suite is
# scripts/test.sh, which CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
rc=0
go test -short -count=1 -v "$@" ./... >"$log" 2>&1 || rc=$?
grep -E '^(ok|FAIL|---  ?FAIL|panic:)|^\s+--- FAIL' "$log" | grep -v '^ok .*no test files' || true
echo
echo "go test -short: $(( $(date +%s) - start )) s; $(grep -c -- '--- PASS' "$log") passed, $(grep -c -- '--- SKIP' "$log") skipped:"
grep -oE -- '-short: needs .*' "$log" | sort | uniq -c | sort -rn || true
other=$(( $(grep -c -- '--- SKIP' "$log") - $(grep -c -- '-short: needs' "$log") ))
[ "$other" -le 0 ] || echo "  $other skipped for another reason (go test -short -v shows them)"
if [ "$rc" -ne 0 ]; then grep -B2 -A20 -- '--- FAIL' "$log" | head -80; fi
exit "$rc"
