#!/bin/sh
# build.sh OUT builds the launcher (launch.c) into OUT: static with musl
# (Debian's musl-tools), stripped, every warning an error. The one recipe:
# scripts/lib.sh and internal/launcher.Build run it.
set -eu
out=${1:?usage: build.sh OUT}
exec "${MUSL_GCC:-musl-gcc}" -std=c11 -static -Os -s -fstack-protector-strong \
  -Wall -Wextra -Werror -o "$out" "$(dirname "$0")/launch.c"
