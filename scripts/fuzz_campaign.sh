#!/usr/bin/env bash
# A long fuzzing campaign: every named libFuzzer target runs for SECONDS with WORKERS processes
# that share one corpus (seeded as scripts/test.sh seeds the short CI runs), then prints per target
# the executions (summed over workers), coverage, corpus size and crashes.
#   scripts/fuzz_campaign.sh BIN_DIR SECONDS OUT_DIR target:workers [target:workers ...]
#   e.g. scripts/fuzz_campaign.sh build-san/bin 3600 /tmp/campaign fuzz_template:4 fuzz_tokenizer:3
# BIN_DIR holds the fuzz_* binaries (build-san, see scripts/test.sh) and their *_seeds writers.
# fuzz_tokenizer reads smollm2-135m and gemma3-270m from $CACTUS_MODELS (tokenizer metadata only
# is enough). Crash inputs land in OUT_DIR/<target>/ as crash-*, with the worker logs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(cd "$1" && pwd)" seconds="$2" out="$3"
shift 3
mkdir -p "$out"
out="$(cd "$out" && pwd)"

seed_corpus() {  # target corpus_dir
    local f="$1" corpus="$2"
    mkdir -p "$corpus"
    if [ -x "$bin/${f}_seeds" ]; then "$bin/${f}_seeds" "$corpus" >/dev/null; fi
    if [ -d "$repo/tests/fuzz/seeds/$f" ]; then cp "$repo/tests/fuzz/seeds/$f"/* "$corpus"/; fi
    if [ "$f" = fuzz_template ]; then cp "$repo"/tests/chat/templates/*.jinja "$corpus"/; fi
    return 0
}

pids=()
for spec in "$@"; do
    f="${spec%%:*}" workers="${spec##*:}"
    dir="$out/$f"
    mkdir -p "$dir"
    seed_corpus "$f" "$dir/corpus"
    dict=""
    if [ -f "$repo/tests/fuzz/${f#fuzz_}.dict" ]; then dict="-dict=$repo/tests/fuzz/${f#fuzz_}.dict"; fi
    (cd "$dir" && "$bin/$f" $dict -jobs="$workers" -workers="$workers" -max_total_time="$seconds" \
        -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 -artifact_prefix="$dir/" corpus \
        > "$dir/driver.log" 2>&1) &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done

printf '%-18s %8s %14s %10s %10s %8s %8s\n' target workers executions exec/s edges corpus crashes
for spec in "$@"; do
    f="${spec%%:*}" workers="${spec##*:}"
    dir="$out/$f"
    execs=$(cat "$dir"/fuzz-*.log 2>/dev/null | grep -o 'stat::number_of_executed_units: [0-9]*' | awk '{s+=$2} END{print s+0}')
    edges=$(cat "$dir"/fuzz-*.log 2>/dev/null | grep -o 'cov: [0-9]*' | awk '{if ($2>m) m=$2} END{print m+0}')
    corpus=$(ls "$dir/corpus" | wc -l)
    crashes=$(ls "$dir" | grep -c -E '^(crash|leak|timeout|oom)-' || true)
    printf '%-18s %8s %14s %10s %10s %8s %8s\n' "$f" "$workers" "$execs" "$((execs / seconds))" "$edges" "$corpus" "$crashes"
done
