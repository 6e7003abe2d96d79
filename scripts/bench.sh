#!/usr/bin/env bash
# Every performance number the issues ask for, in one run: Go benchmarks
# (ns/op, p50/p99 columns) and the in-sandbox latency tables. Needs what
# scripts/test.sh needs (Docker running). Timing is never asserted in tests;
# this is where it is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_dockerd
bench() { echo; echo "## $*"; go test -run '^$' "$@" 2>&1 | grep -E '^(Benchmark|ok|FAIL|---)' || true; }

bench -bench Decide20Rules -benchtime 20000x -benchmem ./internal/policy
bench -bench 'AppendSingle|AppendParallel64' -benchtime 2000x ./internal/audit
bench -bench GatewayOverhead -benchtime 2000x ./internal/daemon
bench -bench 'ExecTrue|ReadWrite1MiB' -benchtime 200x ./internal/daemon ./internal/sandbox/docker
bench -bench LargeFile -benchtime 10x ./internal/daemon
bench -bench OutputFrame -benchtime 2000x ./internal/sandbox/hostexec
bench -bench . -benchtime 1000x ./internal/agentsock
bench -bench HooksInSandbox -benchtime 500x ./internal/hooks/hookserver
bench -bench . -benchtime 2000x ./internal/mcp
bench -bench 'Download|Setup' -benchtime 200x ./internal/client
bench -bench . -benchtime 2000x ./internal/egress
echo; echo "## plugin calls from inside a sandbox (TestLauncherLatency)"
TOOLGATE_BENCH=1 go test -count=1 -run LauncherLatency -v ./internal/daemon | grep -vE '^(=== |--- |PASS)'
