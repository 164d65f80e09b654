#!/bin/bash
# Side by side with TACOS (all-gather): builds TACOS's public code from the work tree given,
# with our driver, and runs both tools on the same 2-D meshes and tori (compare.py).
#
#   bench/tacos/run.sh TACOS_DIR [compare.py options]
#
# TACOS_DIR is a checkout of github.com/astra-sim/tacos. It is built without CMake: its
# sources under src/ (all but its main.cpp, whose machine is fixed) with driver.cpp, by g++
# -std=c++17 -O2. topoc is the release binary of this workspace (built when missing; set
# TOPOC to use another). Scratch files go to $OUT (default /tmp/topoc-tacos).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ $# -lt 1 || ! -d "$1/src/synthesizer" ]]; then
    echo "usage: $0 TACOS_DIR [compare.py options]" >&2
    exit 2
fi
tacos="$(cd "$1" && pwd)"
shift
out="${OUT:-/tmp/topoc-tacos}"
mkdir -p "$out"

driver="$out/tacos-driver"
sources=$(find "$tacos/src" -name '*.cpp' ! -path '*/src/main.cpp' | sort)
if [[ ! -x "$driver" || "$here/driver.cpp" -nt "$driver" ]]; then
    echo "building TACOS with the driver into $driver" >&2
    # shellcheck disable=SC2086
    g++ -std=c++17 -O2 -DNDEBUG -I"$tacos/include" $sources "$here/driver.cpp" -o "$driver"
fi

topoc="${TOPOC:-$root/target/release/topoc}"
if [[ ! -x "$topoc" ]]; then
    echo "building topoc (release)" >&2
    (cd "$root" && cargo build --release -p topoc)
fi

exec python3 "$here/compare.py" --tacos "$driver" --topoc "$topoc" --out "$out" "$@"
