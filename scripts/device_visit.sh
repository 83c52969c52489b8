#!/usr/bin/env bash
# One visit to the GPU machine that validates the opt-in CUDA paths (CACTUS_CUDA_MMQ, _GRAPHS, _FUSED,
# CACTUS_DEVICE_SAMPLING) and benchmarks prefill and decode against llama.cpp's CUDA build, alternated.
# Prepare a git-ignored .dev/ here (it travels with `run`'s carry [".dev"]; under 64 MiB with the tree):
#   .dev/bin/       cactus and test_backends from a CUDA build (sm_90), stripped
#   .dev/lib/       their shared libraries: ldd .dev/bin/* | awk '/=>/{print $3}' minus libc, libm,
#                   libstdc++, libgcc_s, ld-linux
#   .dev/skel/      skel_NAME.head.gz (gzip -9) and skel_NAME.json from ../shared/tools/gguf_skeleton.py
#                   for smollm2-135m, gemma3-270m, qwen2.5-coder-0.5b and -1.5b
#   .dev/gguf_fill.py      ../shared/tools/gguf_fill.py
#   .dev/llama_src.tgz     vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist without docs/, models/,
#                   media/, tests/, benches/, examples/, app/, tools/ui, gguf-py/, conversion/ (~8 MB)
#   .dev/device_visit.sh   this file
# Then run `bash .dev/device_visit.sh` on the device (about 6-8 minutes). Flip a default (one line each in
# src/backends/cuda/cuda_backend.cpp, engine.cpp's device_sampling_wanted) only after its tests pass here.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
log() { echo "## $(date +%T) $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
if [ ! -d /tmp/ll/llama.cpp ]; then
  mkdir -p /tmp/ll && tar xzf llama_src.tgz -C /tmp/ll
  setsid bash -c 'cd /tmp/ll/llama.cpp && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF > /tmp/ll/cfg.log 2>&1 && nice cmake --build build --target llama-bench -j 12 > /tmp/ll/build.log 2>&1; echo $? > /tmp/ll/DONE' < /dev/null > /dev/null 2>&1 &
fi
mkdir -p /tmp/models /tmp/skel
cp skel/* /tmp/skel/ && gunzip -f /tmp/skel/*.head.gz
for sk in /tmp/skel/*.json; do
  name=$(basename "$sk" .json); name=${name#skel_}
  [ -f /tmp/models/$name.gguf ] || python3 gguf_fill.py "/tmp/skel/skel_$name" /tmp/models/$name.gguf > /dev/null
done
run_tests() {  # $1 label, $2 filter, $3 timeout; env passed through
  log "tests: $1"
  CACTUS_GPU_TIMEOUT_MS=5000 CACTUS_MODELS=/tmp/models timeout "$3" ./bin/test_backends --gtest_filter="$2" > /tmp/t.log 2>&1
  echo "rc=$?  OK=$(grep -cE '^\[       OK \]' /tmp/t.log)  SKIPPED=$(grep -cE '^\[  SKIPPED \]' /tmp/t.log)"
  grep -E "^\[  FAILED  \]|Failure$|Expected|Which is|actual|rror:|^\[ RUN      \]" /tmp/t.log | grep -v "^\[ RUN" | head -40
  tail -1 /tmp/t.log
}
CACTUS_CUDA_MMQ=1 run_tests "mmq on" '*cuda_0*:Cuda*' 170
CACTUS_CUDA_MMQ=1 CACTUS_CUDA_GRAPHS=1 CACTUS_CUDA_FUSED=1 CACTUS_DEVICE_SAMPLING=1 run_tests "graphs+fused on" 'CudaGraphs.*:CudaGemv.*:CudaFault.*:CudaModels.*:*BackendOps*cuda_0*' 120
log "waiting for llama.cpp's build"
for i in $(seq 1 150); do [ -f /tmp/ll/DONE ] && break; sleep 1; done
cat /tmp/ll/DONE 2>/dev/null || echo "llama.cpp build unfinished"
LB=/tmp/ll/llama.cpp/build/bin/llama-bench
for f in /tmp/models/smollm2-135m.gguf /tmp/models/gemma3-270m.gguf /tmp/models/qwen2.5-coder-0.5b.gguf /tmp/models/qwen2.5-coder-1.5b.gguf; do
  n=$(basename "$f" .gguf)
  log "$n"
  CACTUS_CUDA_MMQ=1 timeout 60 ./bin/cactus bench "$f" --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128|rror" | sed "s/^/ours: /"
  timeout 60 ./bin/cactus bench "$f" --device cuda -p 512 -n 0 -r 2 2>&1 | grep -E "pp512|rror" | sed "s/^/ours mmq off: /"
  CACTUS_CUDA_GRAPHS=1 CACTUS_CUDA_FUSED=1 timeout 60 ./bin/cactus bench "$f" --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "tg128|rror|kernels|graph" | sed "s/^/ours graphs+fused: /"
  [ -x $LB ] && timeout 90 $LB -m "$f" -ngl 99 -p 512 -n 128 -r 3 -o md 2>&1 | grep -E "pp512|tg128|rror" | sed "s/^/llama: /"
  CACTUS_CUDA_MMQ=1 timeout 60 ./bin/cactus bench "$f" --device cuda -p 512 -n 0 -r 3 2>&1 | grep -E "pp512|rror" | sed "s/^/ours again: /"
done
log end
