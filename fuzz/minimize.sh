#!/usr/bin/env bash
# Minimize the committed corpora: keep the smallest set of inputs that covers every edge the
# corpus covers (libFuzzer's merge with hit counters off; `cargo fuzz cmin` also keeps an input
# per hit-count bucket, several times more files for the same edges).
#
#   fuzz/minimize.sh [TARGET...]     (default: every target)
set -eu
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    mapfile -t TARGETS < <(cargo fuzz list)
fi
cargo fuzz build -s none -a
bin=target/$(rustc -vV | sed -n 's/^host: //p')/release
mkdir -p run-logs
for t in "${TARGETS[@]}"; do
    tmp=$(mktemp -d)
    "$bin/$t" -merge=1 -use_counters=0 "$tmp" "corpus/$t" > "run-logs/minimize-$t.log" 2>&1
    rm -rf "corpus/$t"
    mv "$tmp" "corpus/$t"
    chmod 755 "corpus/$t"
    printf '%-18s %6s files %8s\n' "$t" "$(ls "corpus/$t" | wc -l)" \
        "$(du -sh --apparent-size "corpus/$t" | cut -f1)"
done
