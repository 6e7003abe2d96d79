# goal.awk picks one metric of a BenchmarkGoal<Name> run out of `go test
# -bench` output and prints one table row: the toolgate and baseline values
# and their ratio (toolgate ÷ baseline). ns/op is shown in milliseconds.
# Variables: goal (the name), unit (any metric the benchmark reports: ms,
# p99-ms, calls/s, peak-MiB …), target (the issue's words).
$1 ~ /^BenchmarkGoal/ {
  split($1, part, "/")
  side = part[2]; sub(/-[0-9]+$/, "", side)
  for (i = 3; i < NF; i += 2) {
    u = $(i + 1); v = $i
    if (u == "ns/op") { u = "ms"; v = v / 1e6 }
    if (u == unit) val[side] = v
  }
}
function show(v) { return v >= 1000 ? sprintf("%.0f", v) : sprintf("%.3g", v) }
END {
  t = ("toolgate" in val) ? show(val["toolgate"]) : "missing"
  b = ("baseline" in val) ? show(val["baseline"]) : "missing"
  r = (("toolgate" in val) && ("baseline" in val) && val["baseline"] != 0) ? sprintf("%.2f", val["toolgate"] / val["baseline"]) : "–"
  printf "| %s | %s | %s | %s | %s | %s |\n", goal, unit, t, b, r, target
}
