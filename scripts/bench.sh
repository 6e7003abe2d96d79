#!/usr/bin/env bash
# Every performance number the issues ask for, in one run: Go benchmarks
# (ns/op, p50/p99 columns) and, last, one table of issue 13's goals, each
# beside its baseline measured in the same process. Needs what
# scripts/test.sh needs (Docker running). Timing is never asserted in tests;
# this is where it is measured. `scripts/bench.sh goals` runs only the table.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_dockerd
bench() { echo; echo "## $*"; go test -run '^$' "$@" 2>&1 | grep -E '^(Benchmark|ok|FAIL|---)' || true; }

# goal NAME PKG BENCHTIME "UNIT…" TARGET runs BenchmarkGoal<NAME> (its
# toolgate and baseline sides in one process) and adds a row per unit to the
# goals table printed at the end.
goals=$(mktemp); trap 'rm -f "$goals"' EXIT
goal() {
  local name=$1 pkg=$2 bt=$3 units=$4 target=$5 out u
  echo "## goal $name ($pkg)" >&2
  out=$(go test -run '^$' -bench "^BenchmarkGoal$name\$" -benchtime "$bt" -timeout 30m "$pkg" 2>&1) || { echo "$out" >&2; echo "| $name | – | failed | | | $target |" >>"$goals"; return 0; }
  echo "$out" | grep -E '^BenchmarkGoal' >&2 || true
  for u in $units; do echo "$out" | awk -v goal="$name" -v unit="$u" -v target="$target" -f scripts/goal.awk >>"$goals"; done
}
print_goals() {
  echo; echo "## Goals of issue 13: toolgate beside its baseline, same run (ratio = toolgate ÷ baseline)"
  echo "| goal | unit | toolgate | baseline | ratio | target |"
  echo "|---|---|---|---|---|---|"
  cat "$goals"
}

if [ "${1:-}" != goals ]; then
  bench -bench Decide20Rules -benchtime 20000x -benchmem ./internal/host/policy
  # Issue 28: a decision with session facts beside the same call without; the labels of a
  # 1M-entry log beside decoding it whole; what the tracker adds per call; an ask answered by link.
  bench -bench DecideSession -benchtime 20000x -benchmem ./internal/host/policy
  bench -bench Rebuild1M -benchtime 3x ./internal/host/session
  bench -bench CallPath -benchtime 200000x -benchmem ./internal/host/session
  bench -bench ApprovalRoundTrip -benchtime 500x ./internal/host/door/adminapi
  bench -bench 'AppendSingle|AppendParallel64' -benchtime 2000x ./internal/host/audit
  bench -bench GatewayOverhead -benchtime 2000x ./internal/host/systemtest
  bench -bench 'ExecTrue|ReadWrite1MiB' -benchtime 200x ./internal/host/systemtest ./internal/host/sandbox/docker
  bench -bench OutputFrame -benchtime 2000x ./internal/host/sandbox/hostexec
  bench -bench . -benchtime 1000x ./internal/host/door/agentsock
  bench -bench HooksInSandbox -benchtime 500x ./internal/host/door/hookserver
  bench -bench . -benchtime 2000x ./internal/host/door/mcp
  bench -bench 'Download|Setup' -benchtime 200x ./internal/guest
  bench -bench . -benchtime 2000x ./internal/host/door/egress
  bench -bench QueryLatency -benchtime 500x ./internal/host/auditindex
  bench -bench LiveFeed -benchtime 100x ./internal/host/systemtest
  echo; echo "## plugin calls from inside a sandbox (TestLauncherLatency)"
  TOOLGATE_BENCH=1 go test -count=1 -run LauncherLatency -v ./internal/host/systemtest | grep -vE '^(=== |--- |PASS)'
fi

large="ratio ≤ 1.0 (aim 0.5), CLI memory flat; baseline docker cp"
goal Write16MiB ./internal/host/systemtest 10x "ms peak-MiB" "$large"
goal Read16MiB ./internal/host/systemtest 10x "ms peak-MiB" "$large"
goal Write256MiB ./internal/host/systemtest 10x "ms peak-MiB" "$large"
goal Read256MiB ./internal/host/systemtest 10x "ms peak-MiB" "$large"
goal CLIExec ./internal/host/systemtest 200x "p50-ms p99-ms" "p50 ≤ 4 ms; baseline the same admin API call in-process"
goal AdminReady ./internal/host/systemtest 5x p50-ms "≤ 200 ms with 30 agents starting; baseline no agents"
goal Start30 ./internal/host/systemtest 3x p50-ms "ratio ≤ 1.2; baseline 30 parallel docker run -d, same flags"
goal Reattach30 ./internal/host/systemtest 5x p50-ms "≤ 300 ms; baseline one docker inspect of the 30"
goal PluginCall ./internal/host/systemtest 2000x "p50-ms p99-ms" "p50 ≤ 2 ms, p99 ≤ 4 ms; baseline /bin/true in the sandbox"
goal Exec64 ./internal/host/systemtest 2000x "p99-ms calls/s sandbox-cpu-µs/call" "p99 ≤ 100 ms at the same calls/s; baseline /bin/true 64 at a time in the sandbox"
goal AuditVerify ./internal/host/audit 3x "entries/s entries/cpu-s" "≥ 500k entries/s; baseline the old full decode"
goal AuditTail ./internal/host/audit 3x peak-MiB "flat in the log's size; baseline decode the file, keep 20"
goal CheckpointAppend64 ./internal/host/audit 20000x entries/s "ratio ≥ 0.95 (issue 27); baseline the chain alone, no tree"
goal ProofVerify ./internal/host/audit 3x "entries/s entries/cpu-s" "≥ 500k entries/s at 1M with tree and signatures; baseline the chain alone"
goal Receipt ./internal/host/audit 20x ms "≤ 50 ms for a 1,000-call session; baseline the same lines as JSON, no proofs"
goal ReceiptVerify ./internal/host/audit 20x ms "≤ 20 ms; baseline parsing it only"
print_goals
