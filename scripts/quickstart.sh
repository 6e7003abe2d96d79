#!/usr/bin/env bash
# The main job on a fresh Debian machine: installs Docker if needed, builds,
# builds the sandbox image (busybox compiled against musl, once), runs the gateway with the demo agent,
# makes a few calls (one denied by a rule) and shows the audit tail.
# TOOLGATE_HOME defaults to ./.demo-home so it never touches ~/.toolgate.
# It ends with nothing running: the gateway stops and, as it was started
# with --rm, removes the demo's sandbox (the workspace stays in the home).
# Pass --keep to leave the gateway and the sandbox running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_packages docker.io musl-tools make patch xz-utils bzip2 # the default image compiles busybox
ensure_dockerd
build
export TOOLGATE_HOME="${TOOLGATE_HOME:-$PWD/.demo-home}"
tg=bin/toolgate
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step toolgate init;            $tg init
# With a model key in the environment, the agent session below uses the real
# model: uncomment its provider and secret in the config and put it first.
for p in anthropic openai; do
  var="$(echo "$p" | tr a-z A-Z)_API_KEY"
  if [ -n "${!var:-}" ] && grep -q 'providers: \[scripted\]' "$TOOLGATE_HOME/config.yaml"; then
    sed -i -e "s/^    # $p: /    $p: /" -e "s/^  # ${p}_key: /  ${p}_key: /" \
      -e "s/providers: \[scripted\]/providers: [$p, scripted]/" "$TOOLGATE_HOME/config.yaml"
    echo "($var is set: the agent session uses $p's real model)"
  fi
done
step toolgate config check;    $tg config check
step toolgate sandbox image;   $tg sandbox image
keep=false; [ "${1:-}" = --keep ] && keep=true
rmflag=--rm; $keep && rmflag=
step toolgate serve $rmflag;   $tg serve $rmflag >"$TOOLGATE_HOME/serve.log" 2>&1 &
serve=$!
# At the end, stop the gateway and wait for it: with --rm it removes the
# sandbox once the calls in flight have ended, on the audit record.
finish() {
  if $keep; then
    printf '\nleft running: the gateway (pid %s, log %s) and its sandboxes:\n' "$serve" "$TOOLGATE_HOME/serve.log"
    $tg sandbox ls || true
    echo "stop them with: kill $serve; TOOLGATE_HOME=$TOOLGATE_HOME $tg sandbox rm demo"
    return
  fi
  kill $serve 2>/dev/null && wait $serve 2>/dev/null || true
  printf '\n\033[1m$ toolgate sandbox ls   # the gateway stopped and removed its sandbox: nothing is left running\033[0m\n'
  $tg sandbox ls || true
}
trap finish EXIT
# The admin API answers at once; the sandbox shows `starting` until it is up.
for _ in $(seq 1 150); do $tg agents 2>/dev/null | grep -qw running && break; sleep 0.2; done
$tg agents

step "toolgate exec demo -- sh -c 'echo hi; exit 3'"
$tg exec demo -- sh -c 'echo hi; exit 3' || echo "(exit status $?)"
step "echo 'hello, sandbox' | toolgate write demo notes/a.txt"
echo 'hello, sandbox' | $tg write demo notes/a.txt
step toolgate patch demo notes/a.txt --old hello --new goodbye
$tg patch demo notes/a.txt --old hello --new goodbye
step toolgate read demo notes/a.txt
$tg read demo notes/a.txt
step "toolgate exec demo -c 'rm -rf /workspace'   # denied by a rule"
$tg exec demo -c 'rm -rf /workspace' || echo "(exit status $? — denied)"
step "toolgate policy eval --agent demo --tool exec --args '{\"command\":\"rm -rf /\"}'"
$tg policy eval --agent demo --tool exec --args '{"command":"rm -rf /"}' || true
step toolgate audit tail -n 12;  $tg audit tail -n 12
step toolgate audit verify;      $tg audit verify

step "toolgate agent demo \"make the calculator's test pass\"   # toolgate's own agent loop"
$tg agent demo "make the calculator's test pass" || echo "(exit status $?)"
step "toolgate audit tail -n 6   # the session's model and tool calls, on the record"
$tg audit tail -n 6
