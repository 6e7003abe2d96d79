#!/bin/sh
# build.sh PROGRAM OUT builds one of the C programs into OUT: launch
# (toolgate-launch, the sandbox's launcher) or front (toolgate, the CLI's
# front); both include client.c. Static with musl (Debian's musl-tools),
# stripped, every warning an error. The one recipe: scripts/lib.sh and
# internal/guest/launcher.Build run it.
set -eu
prog=${1:?usage: build.sh launch|front OUT}
out=${2:?usage: build.sh launch|front OUT}
case $prog in
launch|front) ;;
*) echo "build.sh: no program $prog (launch or front)" >&2; exit 2 ;;
esac
exec "${MUSL_GCC:-musl-gcc}" -std=c11 -static -Os -s -fstack-protector-strong \
  -Wall -Wextra -Werror -o "$out" "$(dirname "$0")/$prog.c"
