#!/usr/bin/env bash
# cmake --install of the build folder into a temporary prefix, then examples/api_example.c built
# against the installed tree two ways (pkg-config, find_package(qmm)) and run; the source tree's
# headers and libraries are not on any path. Usage: install_test.sh <build dir> <work dir>
set -euo pipefail
build=$1 work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/qmm.h lib/libqmm.a lib/pkgconfig/qmm.pc lib/cmake/qmm/qmmConfig.cmake bin/qmm; do
    [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
"$prefix/bin/qmm" info >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig

# 1. pkg-config, against the shared library when there is one (the SONAME must resolve)
if [ -e "$prefix/lib/libqmm.so" ]; then
    soname=$(readelf -d "$prefix/lib/libqmm.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    [ -e "$prefix/lib/$soname" ] || { echo "FAIL: SONAME $soname not installed"; exit 1; }
    cc -o "$work/ex_pc" "$src/examples/api_example.c" $(pkg-config --cflags --libs qmm) -lm
    LD_LIBRARY_PATH=$prefix/lib "$work/ex_pc"
    # nothing from the build tree: the program must load the installed library
    deps=$(LD_LIBRARY_PATH=$prefix/lib ldd "$work/ex_pc") # not piped into grep -q: pipefail
    [[ $deps == *"=> $prefix/lib/libqmm.so"* ]] \
        || { echo "FAIL: ex_pc does not load the installed libqmm.so"; exit 1; }
fi
# the static library through pkg-config --static (the dependencies come from qmm.pc)
link=cc
[[ $(pkg-config --static --libs qmm) == *cudart* ]] && link="c++"
cc -c -o "$work/ex.o" "$src/examples/api_example.c" $(pkg-config --cflags qmm)
$link -o "$work/ex_static" "$work/ex.o" -Wl,-Bstatic -lqmm -Wl,-Bdynamic \
    $(pkg-config --static --libs qmm | sed 's/-lqmm//') -lm
"$work/ex_static"

# 2. CMake: find_package(qmm) -> qmm::qmm, then qmm::qmm_static
for static in OFF ON; do
    b=$work/cmake-$static
    cmake -S "$src/examples" -B "$b" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
        -DQMM_EXAMPLE_STATIC=$static -DCMAKE_BUILD_TYPE=Release >"$b.log" 2>&1 \
        || { cat "$b.log"; exit 1; }
    cmake --build "$b" >>"$b.log" 2>&1 || { cat "$b.log"; exit 1; }
    "$b/api_example"
done
echo "install test: ok"
