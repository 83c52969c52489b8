#!/usr/bin/env bash
# Runs every test: builds (Release, then clang ASan+UBSan with the fuzzers, then TSan), installs the oracles and the
# models if missing, runs the C++ suites (ctest), the oracle comparisons (pytest) and the fuzzers.
# Usage: scripts/test.sh            (everything; what CI runs)
#        FAST=1 scripts/test.sh     (skip the sanitizer build and the fuzzers)
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache (when installed) keys on paths relative to the checkout, so clean clones reuse objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1
ROOT=$(pwd)
JOBS=$(nproc)
START=$(date +%s)
# Each step prints the minutes spent so far (CI must stay under 45 minutes on a fresh 2-core machine).
step() { printf '\n==== %s (at %d min) ====\n' "$*" "$((($(date +%s) - START) / 60))" >&2; }

step "build (Release)"
scripts/setup.sh

step "format (.clang-format)"
scripts/check_format.sh

step "oracles and models"
scripts/setup_oracle.sh
ORACLE_PY=${CACTUS_ORACLE_DIR:-$HOME/.cache/cactus/oracle}/venv/bin/python
# llama.cpp's test vocabularies (models/ggml-vocab-*.gguf, tests/tokenizer) come with its sdist
CACTUS_LLAMA_SDIST=$(PYTHON="$ORACLE_PY" scripts/fetch_llama_sdist.sh)
export CACTUS_LLAMA_SDIST
build/bin/cactus pull smollm2-135m gemma3-270m qwen2.5-coder-0.5b
# Gemma 4 at CI size: the random-weight reduced file (scripts/make_gemma4_gguf.py, deterministic, ~2 s;
# its vocabulary comes from the sdist above) for the C++ and Python tests. Regenerated each run and
# moved into the store only when its bytes differ, so a file in use is never rewritten in place.
GEMMA4_REDUCED=${CACTUS_MODELS:-$HOME/.cache/cactus/models}/gemma4-reduced-q4_0.gguf
"$ORACLE_PY" scripts/make_gemma4_gguf.py --shape reduced --mix q4_0 --out "$GEMMA4_REDUCED.new" >&2
if cmp -s "$GEMMA4_REDUCED.new" "$GEMMA4_REDUCED"; then rm "$GEMMA4_REDUCED.new"; else mv "$GEMMA4_REDUCED.new" "$GEMMA4_REDUCED"; fi
scripts/setup_whisper_oracle.sh  # faster-whisper (tests/models/audio); its Python also converts whisper-* on pull
CACTUS_CONVERT_PYTHON=${CACTUS_WHISPER_VENV:-$HOME/.cache/cactus/whisper-venv}/bin/python \
  build/bin/cactus pull whisper-tiny.en all-minilm-l6-v2  # the embedding model (scripts/convert_minilm.py)

step "C++ tests"
# The long-session regression scenario runs here only: under ASan it takes 6 minutes, and the KV
# property test covers the same compaction and ring indices there.
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900

step "aarch64 kernels (cross-compiled, run under qemu)"
scripts/test_aarch64.sh

step "oracle comparisons (pytest)"
CACTUS_BUILD_DIR="$ROOT/build" "$ORACLE_PY" -m pytest -q -p no:cacheprovider --durations=10 tests/ python/tests/

if [ "${FAST:-0}" != "1" ]; then
  # One clang build serves the ASan + UBSan test binaries and the libFuzzer targets (a separate
  # build for each cost CI a whole library build); line tables only, for readable stack traces.
  step "sanitizer build (clang, ASan + UBSan, with the fuzzers)"
  SAN_TARGETS="test_core test_gguf test_tokenizer test_chat test_sampling test_engine test_api test_kv test_ops test_models"
  FUZZERS=$(ls tests/fuzz/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | grep -v '_seeds$')
  fuzz_targets=""
  for f in $FUZZERS; do
    fuzz_targets="$fuzz_targets $f"
    if [ -f "tests/fuzz/${f}_seeds.cpp" ]; then fuzz_targets="$fuzz_targets ${f}_seeds"; fi
  done
  SAN_FLAGS="-O2 -gline-tables-only -DNDEBUG"
  CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_FLAGS_RELEASE="$SAN_FLAGS" -DCMAKE_CXX_FLAGS_RELEASE="$SAN_FLAGS" \
      -DCACTUS_SANITIZE=ON -DCACTUS_FUZZ=ON -DCACTUS_CUDA=OFF >/dev/null
  cmake --build build-san -j "$JOBS" --target $SAN_TARGETS $fuzz_targets

  step "AddressSanitizer + UBSan"
  for t in $SAN_TARGETS; do
    echo "$t (ASan + UBSan)" >&2
    CACTUS_SANITIZER_RUN=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      build-san/bin/$t --gtest_brief=1 --gtest_filter='-LongSession.*'
  done

  step "fuzzers (libFuzzer, short runs)"
  for f in $FUZZERS; do
    corpus=build-san/corpus/$f
    rm -rf "$corpus" && mkdir -p "$corpus"
    if [ -x "build-san/bin/${f}_seeds" ]; then "build-san/bin/${f}_seeds" "$corpus" >/dev/null; fi
    if [ -d "tests/fuzz/seeds/$f" ]; then cp tests/fuzz/seeds/$f/* "$corpus"/; fi
    if [ "$f" = fuzz_template ]; then cp tests/chat/templates/*.jinja "$corpus"/; fi
    dict=""
    if [ -f "tests/fuzz/${f#fuzz_}.dict" ]; then dict="-dict=tests/fuzz/${f#fuzz_}.dict"; fi
    echo "fuzzing $f for ${FUZZ_SECONDS:-15} s" >&2
    build-san/bin/$f $dict -max_total_time="${FUZZ_SECONDS:-15}" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
        -artifact_prefix="build-san/$f-" "$corpus" > "build-san/$f.log" 2>&1 || { tail -n 40 "build-san/$f.log"; exit 1; }
    grep -E "stat::number_of_executed_units" "build-san/$f.log" >&2 || true
  done

  step "ThreadSanitizer (thread pool, C API threads, stop and destroy)"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O2 -g1 -DNDEBUG" \
      -DCMAKE_CXX_FLAGS_RELEASE="-O2 -g1 -DNDEBUG" -DCACTUS_TSAN=ON -DCACTUS_CUDA=OFF >/dev/null
  cmake --build build-tsan -j "$JOBS" --target test_ops test_api
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/bin/test_ops --gtest_brief=1 \
      --gtest_filter='ThreadPool*'
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/bin/test_api --gtest_brief=1 \
      --gtest_filter='CApiThreads*:CApiLifecycle*'
fi
echo "all tests passed in $((($(date +%s) - START) / 60)) min"
