#!/usr/bin/env bash
# Run every fuzz target (or those named after SECONDS) for SECONDS each (default 600), one after
# another, then write a summary (target, seconds, executions, crashes) to fuzz/last-run.txt.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Works on the stable toolchain: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags, and
# `-s none` skips the sanitizer (the gateway forbids `unsafe`; libFuzzer still catches panics,
# overflow checks via `-a`, hangs and memory blow-ups). Logs go to fuzz/run-logs/.
set -u
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1
SECONDS_EACH="${1:-600}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    mapfile -t TARGETS < <(cargo fuzz list)
fi
FLAGS=(-s none -a)
mkdir -p run-logs
cargo fuzz build "${FLAGS[@]}" || exit 1

# last-run.txt keeps one line per target: a run replaces the lines of the targets it ran.
header=$(printf '%-18s %8s %12s %8s %12s  %s' target seconds executions crashes "corpus files" "finished (UTC)")
[ -f last-run.txt ] || echo "$header" > last-run.txt
for t in "${TARGETS[@]}"; do
    log="run-logs/$t.log"
    mkdir -p "corpus/$t" "artifacts/$t"
    before=$(ls "artifacts/$t" | wc -l)
    start=$(date +%s)
    # -timeout: one input taking 10 s is a hang; -rss_limit_mb: a blow-up is a finding.
    cargo fuzz run "${FLAGS[@]}" "$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        > "$log" 2>&1
    took=$(( $(date +%s) - start ))
    # Fuzzing time as libFuzzer reports it (the wall time above includes building).
    fuzzed=$(grep -oE '^Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' | grep -oE '[0-9]+' | tail -1)
    took="${fuzzed:-$took}"
    after=$(ls "artifacts/$t" | wc -l)
    execs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    if [ -z "$execs" ]; then
        execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    fi
    line=$(printf '%-18s %8s %12s %8s %12s  %s' "$t" "$took" "${execs:-?}" "$((after - before))" \
        "$(ls "corpus/$t" | wc -l)" "$(date -u +%FT%TZ)")
    { echo "$header"; grep -v -e "^target " -e "^$t " last-run.txt; echo "$line"; } > last-run.tmp
    mv last-run.tmp last-run.txt
done
cat last-run.txt
