#!/usr/bin/env bash
# An experiment build in seconds: recompile a few sources of an existing build with extra
# defines and relink qmm (and any test programs named in TESTS) into /tmp/var/NAME, leaving
# the build folder untouched. Needs a Ninja build of the same source tree.
#   bench/variant.sh NAME "DEFINES" SRC...      e.g.
#   TESTS="gpu_llm test_ops" bench/variant.sh b5 "-DQMM_MV_BOUND4=5" cuda/matvec.cu
# SRC paths are relative to src/. BUILD (default build) names the build folder.
set -euo pipefail
name=${1:?usage: bench/variant.sh NAME "DEFINES" SRC...}
defs=${2:?usage: bench/variant.sh NAME "DEFINES" SRC...}
shift 2
[ $# -gt 0 ] || { echo "variant.sh: no source named" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/${BUILD:-build}"
out=/tmp/var/$name
mkdir -p "$out/obj"
cmds=$(ninja -t commands qmm)
arcmd=$(echo "$cmds" | grep " qc libqmm.a ")
for f in "$@"; do
    o="CMakeFiles/qmm_obj.dir/src/$f.o"
    c=$(echo "$cmds" | grep -- "-o $o" | head -1 || true)
    [ -n "$c" ] || { echo "variant.sh: no compile command for src/$f" >&2; exit 2; }
    vo=$out/obj/$(echo "$f" | tr / _).o
    c="${c//-o $o/-o $vo}"
    c="${c/ -c / $defs -c }"
    eval "$c"
    arcmd="${arcmd// $o / $vo }"
done
eval "${arcmd//libqmm.a/$out/libqmm.a}"
for t in qmm ${TESTS:-}; do
    l=$(ninja -t commands "$t" | tail -1)
    l="${l// libqmm.a/ $out/libqmm.a}"
    eval "${l/ -o $t / -o $out/$t }"
done
echo "variant.sh: $out"
