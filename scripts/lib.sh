# Shared set-up for the scripts: Debian packages, Go on PATH, a running dockerd.
# Sourced, not run.

export PATH="/usr/local/go/bin:$PATH"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# ensure_packages PKG... installs the Debian packages that are missing.
ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# ensure_dockerd starts the Docker Engine when nothing answers on its socket.
ensure_dockerd() {
  if docker info >/dev/null 2>&1; then return 0; fi
  echo "starting dockerd" >&2
  as_root sh -c 'nohup dockerd >/var/log/toolgate-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "dockerd did not come up; see /var/log/toolgate-dockerd.log" >&2
  tail -20 /var/log/toolgate-dockerd.log >&2 || true
  return 1
}

# ensure_claude_cli installs the real Claude Code CLI the hook tests run
# (its native binary; npm only fetches it) and exports TOOLGATE_CLAUDE.
ensure_claude_cli() {
  local dir="${TOOLGATE_CLAUDE_DIR:-$HOME/.cache/toolgate-claude-code}"
  local bin="$dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
  if [ ! -x "$bin" ]; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund @anthropic-ai/claude-code@2.1.328 >&2
  fi
  export TOOLGATE_CLAUDE="$bin"
}

# build puts the CLI — toolgate, a C front that makes `toolgate exec`
# itself, and toolgate-cli, the Go CLI it runs for everything else — with
# toolgate-gateway (which toolgate-cli runs for serve, policy, audit …) and
# the static in-sandbox binaries (the client and the launcher, which the
# daemon finds beside it) into bin/, side by side. toolgate-cli is static
# too: no dynamic loader at each command's start. The front and the
# launcher are C, built static with musl (musl-tools): a Go program's start
# alone costs ~1 ms, most of a plugin call or of a scripted exec.
build() {
  ensure_packages musl-tools
  mkdir -p bin
  CGO_ENABLED=0 go build -o bin/toolgate-cli ./cmd/toolgate-cli
  go build -o bin/toolgate-gateway ./cmd/toolgate-gateway
  CGO_ENABLED=0 go build -o bin/toolgate-client ./cmd/toolgate-client
  sh internal/proto/cclient/c/build.sh internal/cli/front/c/front.c bin/toolgate
  sh internal/proto/cclient/c/build.sh internal/guest/launcher/c/launch.c bin/toolgate-launch
}

# k8s_up builds the single-node Kubernetes cluster of scripts/kubernetes
# (once: its binaries are cached under /tmp keyed by the version), starts
# it, tears it down when the calling script exits, and exports
# TOOLGATE_K8S_DIR so the backend's tests (internal/host/sandbox/kube) run
# against it; TOOLGATE_REQUIRE_K8S=1 makes them fail, not skip, without it.
k8s_up() {
  local kv=v1.35.4
  export K8S_DIR="${TOOLGATE_K8S_DIR:-/tmp/toolgate-k8s-$kv}"
  mkdir -p "$K8S_DIR"
  if [ ! -f "$K8S_DIR/built-$kv" ]; then
    echo "building Kubernetes $kv into $K8S_DIR (once; minutes)" >&2
    KV=$kv scripts/kubernetes/build.sh >"$K8S_DIR/build.log" 2>&1 || { tail -30 "$K8S_DIR/build.log" >&2; return 1; }
    touch "$K8S_DIR/built-$kv"
  fi
  scripts/kubernetes/down.sh >/dev/null 2>&1 || true   # what a killed run left
  trap 'scripts/kubernetes/down.sh >/dev/null 2>&1 || true' EXIT
  scripts/kubernetes/up.sh >"$K8S_DIR/up.log" 2>&1 || { tail -30 "$K8S_DIR/up.log" >&2; return 1; }
  export TOOLGATE_K8S_DIR="$K8S_DIR" TOOLGATE_REQUIRE_K8S=1
}
