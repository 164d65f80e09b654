#!/bin/sh
# NVSwitch hosts on a leaf/spine network, from 8 to 128 hosts of 8 GPUs: `examples/fabric-spines.ron`
# with `hosts: H`, `leaf_switches: H/2` (two hosts per leaf) and `spines: ceil(H/4)`. Compiles
# each allreduce at 256 MiB under `auto` and prints one line per machine: hosts, GPUs, user CPU
# seconds, peak KiB, the pick, its estimate in µs and the shape (`--report json`).
#
# Usage: bench/fabric/scale.sh TOPOC OUT_DIR [HOSTS...]   (default hosts: 8 16 24 32 48 64 128)
set -eu
topoc=$1
out=$2
shift 2
hosts=${*:-8 16 24 32 48 64 128}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for h in $hosts; do
    f="$out/fabric-$h.ron"
    sed -e "s/hosts: 8,/hosts: $h,/" -e "s/leaf_switches: 4/leaf_switches: $((h / 2))/" \
        -e "s/spines: 2/spines: $(((h + 3) / 4))/" "$here/../../examples/fabric-spines.ron" >"$f"
    /usr/bin/time -f "%U %M" -o "$out/fabric-$h.time" "$topoc" compile "$f" --size 256MiB \
        -o "$out/fabric-$h.sched.ron" --report json 2>"$out/fabric-$h.report.json" >/dev/null
    python3 - "$out/fabric-$h.report.json" "$out/fabric-$h.time" "$h" <<'PY'
import json, sys
report, timed, hosts = sys.argv[1], sys.argv[2], int(sys.argv[3])
phase = json.load(open(report))[0]
estimate = next(w["estimate_seconds"] for w in phase["weighed"] if w["method"] == phase["method"])
user, peak = open(timed).read().split()[-2:]
shape = phase["reason"].rsplit("; ", 1)[-1]
print(f"{hosts:4d} {8 * hosts:5d} {user:>7s} {peak:>8s} {phase['method']} {estimate * 1e6:.1f} {shape}")
PY
done
