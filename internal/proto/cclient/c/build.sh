#!/bin/sh
# build.sh SOURCE.c OUT builds one of toolgate's C programs — the sandbox's
# launcher (internal/guest/launcher/launch.c) or the CLI's front
# (internal/cli/front/front.c) — into OUT; both include client.c, beside
# this script. Static with musl (Debian's musl-tools), stripped, every
# warning an error. The one recipe: scripts/lib.sh and cclient.Build run it.
set -eu
src=${1:?usage: build.sh SOURCE.c OUT}
out=${2:?usage: build.sh SOURCE.c OUT}
exec "${MUSL_GCC:-musl-gcc}" -std=c11 -static -Os -s -fstack-protector-strong \
  -Wall -Wextra -Werror -I "$(dirname "$0")" -o "$out" "$src"
