#!/usr/bin/env bash
# Every check the project has, on a fresh Debian machine: installs what the
# tests need, starts dockerd, then go vet and the whole test suite. Tests that
# need Docker fail (not skip) here because TOOLGATE_REQUIRE_DOCKER=1.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_packages docker.io busybox-static make patch xz-utils bzip2 iproute2 git mmdebstrap chromium postgresql bc curl openssl python3
# The launcher is C: musl-gcc builds it, clang's libFuzzer fuzzes its
# response reader (internal/guest/launcher).
ensure_packages musl-tools clang-14 libclang-rt-14-dev
# The agent images take their CLIs from npm (any Node.js install will do).
command -v npm >/dev/null || ensure_packages npm
ensure_dockerd
ensure_claude_cli
# A real single-node Kubernetes cluster for the Kubernetes backend's tests.
k8s_up
export TOOLGATE_REQUIRE_DOCKER=1 TOOLGATE_REQUIRE_CLAUDE=1
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed: $unformatted" >&2; exit 1; fi
# go.mod lists what the code imports, direct dependencies as direct.
go mod tidy -diff
go vet ./...
go test -count=1 -timeout 30m "$@" ./...
