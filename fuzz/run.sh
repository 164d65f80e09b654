#!/usr/bin/env bash
# Runs one cargo-fuzz target for a given time and prints a one-line summary.
#
#   fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
#   fuzz/run.sh topology 300
#   fuzz/run.sh schedule 60 -jobs=2 -workers=2
#
# Targets: `topology` (topology text → machine → compile with every method → verify → run)
# and `schedule` (schedule text → cost model → verify → run what verifies). See fuzz/README.md.
#
# The corpus grows in fuzz/corpus/TARGET (not committed); each run also reads the seeds: the
# files of examples/ and compiler/tests/bad/ (topology), schedule-ir/tests/bad/ (schedule),
# and fuzz/seeds/TARGET/; fuzz/dict/TARGET.dict lists the tokens of the input language.
# Crashes land in fuzz/artifacts/TARGET/, the log in fuzz/logs/.
#
# Toolchain: cargo-fuzz needs nightly rustc flags. With a nightly toolchain installed it uses
# `cargo +nightly fuzz`; otherwise the stable toolchain with RUSTC_BOOTSTRAP=1. Builds go to
# $CARGO_TARGET_DIR/fuzz when CARGO_TARGET_DIR is set, else fuzz/target.
set -euo pipefail

# libFuzzer names what it saves by kind: crash-, timeout-, oom- and leak- files are failures;
# slow-unit- files are inputs that merely ran slowly (-report_slow_units) and are no crash.
# Prints "CRASHES SLOW" for the artifact directory $1.
count_findings() {
    local crashes slow
    crashes=$(find "$1" -type f \( -name 'crash-*' -o -name 'timeout-*' \
        -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
    slow=$(find "$1" -type f -name 'slow-unit-*' | wc -l)
    echo "$crashes $slow"
}

# `fuzz/run.sh --count-findings DIR` only counts (tested by fuzz/tests/run_sh.rs).
if [[ ${1:-} == --count-findings && $# -eq 2 ]]; then
    count_findings "$2"
    exit 0
fi

if [[ $# -lt 2 ]]; then
    echo "usage: fuzz/run.sh TARGET SECONDS [libFuzzer flags...]" >&2
    exit 2
fi
target=$1
seconds=$2
shift 2

fuzz=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$fuzz")

case $target in
    topology) sources=("$root/examples" "$root/compiler/tests/bad" "$fuzz/seeds/topology") ;;
    schedule) sources=("$root/schedule-ir/tests/bad" "$fuzz/seeds/schedule") ;;
    *)
        echo "unknown target \`$target\`; the targets are: topology, schedule" >&2
        exit 2
        ;;
esac

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    cargo=(cargo +nightly)
else
    export RUSTC_BOOTSTRAP=1
    cargo=(cargo)
fi
target_dir=${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}
target_dir=${target_dir:-$fuzz/target}

# Seeds are copied fresh every run: edited or added files are picked up.
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
for dir in "${sources[@]}"; do
    cp "$dir"/*.ron "$seeds"/
done
mkdir -p "$fuzz/corpus/$target" "$fuzz/artifacts/$target" "$fuzz/logs"
log="$fuzz/logs/$target-$(date +%Y%m%d-%H%M%S).log"

cd "$fuzz"
# Safe Rust only: no sanitizer (memory errors cannot happen; panics, overflows, hangs and
# memory blow-ups are what we look for). Debug assertions and overflow checks stay on.
# The targets assert their own budgets per compile and per run (src/lib.rs); libFuzzer's
# -timeout only catches a hang, so it allows every method's compile budget of one input.
set +e
"${cargo[@]}" fuzz run "$target" "$fuzz/corpus/$target" "$seeds" \
    --sanitizer none --target-dir "$target_dir" \
    -- -max_total_time="$seconds" -timeout=120 -rss_limit_mb=2048 -max_len=16384 \
    -dict="$fuzz/dict/$target.dict" -print_final_stats=1 \
    -artifact_prefix="$fuzz/artifacts/$target/" "$@" \
    2>&1 | tee "$log" | grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|==[0-9]+== ERROR|stat::|SUMMARY|thread .* panicked|Test unit|error)'
status=${PIPESTATUS[0]}
set -e

execs=$(grep -ho 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
corpus=$(find "$fuzz/corpus/$target" -type f | wc -l)
read -r crashes slow < <(count_findings "$fuzz/artifacts/$target")
echo "fuzz/run.sh $target: ${seconds}s, $execs executions, corpus $corpus files, $crashes crash file(s) and $slow slow unit(s) in fuzz/artifacts/$target, log $log"
exit "$status"
