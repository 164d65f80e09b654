#!/bin/sh
# Times `topoc compile` under `auto` on the machines of the BENCHMARKS.md section "`auto`
# compile time: small machines and 1,024-node meshes": elapsed and user CPU seconds and peak
# resident memory (KiB) per file, and each phase's pick.
#
# Usage: bench/auto/time.sh TOPOC OUT_DIR [small|large|all]
# Writes OUT_DIR/<machine>.report.json (the `--report json` of every phase) and prints one line
# per machine: name, elapsed s, user s, peak KiB, picks.
set -eu
topoc=$1
out=$2
which=${3:-all}
here=$(cd "$(dirname "$0")" && pwd)
examples=$here/../../examples
mkdir -p "$out"
sed 's/dims: \[4, 4\]/dims: [8, 8]/' "$examples/torus4x4.ron" >"$out/torus8x8.ron"
sed 's/dims: \[4, 4\]/dims: [32, 32]/' "$examples/torus4x4.ron" >"$out/torus32x32.ron"
sed 's/Torus(dims: \[4, 4\]/Mesh(dims: [32, 32]/' "$examples/torus4x4.ron" >"$out/mesh32x32.ron"
python3 "$here/grid.py" torus 32 32 >"$out/graph-torus32x32.ron"
python3 "$here/grid.py" mesh 32 32 >"$out/graph-mesh32x32.ron"
small="$out/torus8x8.ron"
for f in dgx1-v100 dgx-a100-2x8 mi250x-node nvswitch-2x8 nvswitch-4x8 ladder8 ladder26 ring8 \
    mesh8x8 torus4x4 cube hypercube16 graph-hypercube64 graph-petersen; do
    small="$small $examples/$f.ron"
done
large="$out/torus32x32.ron $out/mesh32x32.ron $out/graph-torus32x32.ron $out/graph-mesh32x32.ron"
case $which in
small) files=$small ;;
large) files=$large ;;
*) files="$small $large" ;;
esac
for f in $files; do
    name=$(basename "$f" .ron)
    /usr/bin/time -f "%e %U %M" -o "$out/$name.time" \
        "$topoc" compile "$f" -o "$out/$name.sched.ron" --report json 2>"$out/$name.report.json"
    # With --report json, standard error holds the report alone.
    picks=$(python3 -c 'import json,sys
print(",".join(p["method"] for p in json.load(open(sys.argv[1]))))' "$out/$name.report.json")
    printf '%-20s %s %s\n' "$name" "$(cat "$out/$name.time")" "$picks"
done
