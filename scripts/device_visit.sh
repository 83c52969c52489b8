#!/usr/bin/env bash
# One visit to the GPU machine: the CUDA device suite with the default paths (tiled prompt products,
# step graphs, fused decode products, device sampling) and with each switched off (=0), a GPU time
# profile per op (CACTUS_CUDA_PROFILE=1), prefill/decode against llama.cpp's CUDA build, and cactus
# serve --device cuda against llama-server -ngl 99 (bench/compare_server.py; needs the repo beside .dev).
# Prepare a git-ignored .dev/ here (it travels with `run`'s carry [".dev"]; under 64 MiB with the tree):
#   .dev/bin/       cactus and test_backends from a CUDA build (sm_90), stripped
#   .dev/lib/       their shared libraries: ldd .dev/bin/* | awk '/=>/{print $3}' minus libc, libm,
#                   libstdc++, libgcc_s, ld-linux
#   .dev/skel/      skel_NAME.head.gz (gzip -9) and skel_NAME.json from ../shared/tools/gguf_skeleton.py
#                   for smollm2-135m, gemma3-270m, qwen2.5-coder-0.5b and -1.5b, whisper-tiny.en
#   .dev/gguf_fill.py      ../shared/tools/gguf_fill.py
#   .dev/llama_src.tgz     vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist without docs/, models/,
#                   media/, tests/, benches/, examples/, app/, gguf-py/, conversion/, and of tools/ui only
#                   CMakeLists.txt, sources.cmake, *.in and static/ (llama-server builds without its web UI; ~8 MB)
#   .dev/device_visit.sh   this file
#   with IMAGE=1 also: .dev/bin/vision_probe (stripped) and .dev/vlm/ from bench/vlm_skeletons.py (SmolVLM
#                   and LFM2-VL towers at real widths, their text models, a 512x512 image; ~800 KB)
#   with WHISPER_CPP=1 also: .dev/whisper_src.tgz (whisper.cpp of the pywhispercpp 1.5.1 sdist without
#                   models/, bindings/ but bindings/javascript/package-tmpl.json, samples/, tests/, media/,
#                   the ggml back ends other than CPU and CUDA, and the Android/wasm/talk-llama examples;
#                   ~2.5 MB), .dev/skel/ for whisper-base (`cactus pull whisper-base`), .dev/py/gguf (the
#                   gguf package, for bench/whisper_cpp.py's converter) and .dev/glide30.wav (30 s, 16 kHz)
# Then run `bash .dev/device_visit.sh` on the device (about 8-9 minutes); QUICK=1 skips llama.cpp's build
# and bench, the switched-off test pass and the serving comparison (about 2 minutes); MMQ_AB=1 adds
# pp512 with CACTUS_CUDA_MMQ_TOKENS=64 against 128 on the two Qwen files; IMAGE=1 adds the image encode
# of both towers against libmtmd-CUDA (llama-mtmd-cli's "image slice encoded in"; ours: vision_probe
# --runs 5, the encoder alone, by default and with CACTUS_CUDA_GEMM_F16=0: the tf32 tiles), three
# alternated rounds; SPLIT_AB=1 runs the serving comparison again with CACTUS_CUDA_GEMV_SPLIT=0 (the
# 16-slot steps on the int8 tiles).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
log() { echo "## $(date +%T) $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
if [ -z "$QUICK" ] && [ ! -d /tmp/ll/llama.cpp ]; then
  mkdir -p /tmp/ll && tar xzf llama_src.tgz -C /tmp/ll
  setsid bash -c 'cd /tmp/ll/llama.cpp && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF > /tmp/ll/cfg.log 2>&1 && nice cmake --build build --target llama-bench '"${IMAGE:+llama-mtmd-cli}"' -j 12 > /tmp/ll/build.log 2>&1; echo $? > /tmp/ll/DONE; nice cmake --build build --target llama-server -j 12 > /tmp/ll/server.log 2>&1; echo $? > /tmp/ll/SERVER_DONE' < /dev/null > /dev/null 2>&1 &
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
  grep -B2 -A8 -E "Failure$|exception" /tmp/t.log | head -60
  grep -E "^\[  FAILED  \]" /tmp/t.log | head -20
  grep -E "relative|rel_err|worst" /tmp/t.log | head -20
  tail -1 /tmp/t.log
}
run_tests "defaults" '*cuda_0*:Cuda*' 200
[ -z "$QUICK" ] && CACTUS_CUDA_MMQ=0 CACTUS_CUDA_GRAPHS=0 CACTUS_CUDA_FUSED=0 CACTUS_DEVICE_SAMPLING=0 run_tests "all switched off" 'CudaGraphs.*:CudaGemv.*:CudaMmq.*:CudaModels.*:CudaEncoders.*:*BackendOps*cuda_0*' 150
if [ -n "$MMQ_AB" ]; then  # the tiled products' token width, 64 against 128, alternated (while llama.cpp builds)
  for f in qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do
    for t in 64 128 64 128; do
      echo "mmq tokens=$t $f: $(CACTUS_CUDA_MMQ_TOKENS=$t timeout 60 ./bin/cactus bench /tmp/models/$f.gguf --device cuda -p 512 -n 0 -r 3 2>&1 | grep pp512)"
    done
  done
fi
if [ -z "$QUICK" ]; then
  log "waiting for llama.cpp's build"
  for i in $(seq 1 150); do [ -f /tmp/ll/DONE ] && break; sleep 1; done
  cat /tmp/ll/DONE 2>/dev/null || echo "llama.cpp build unfinished"
fi
LB=/tmp/ll/llama.cpp/build/bin/llama-bench
for f in /tmp/models/smollm2-135m.gguf /tmp/models/gemma3-270m.gguf /tmp/models/qwen2.5-coder-0.5b.gguf /tmp/models/qwen2.5-coder-1.5b.gguf; do
  n=$(basename "$f" .gguf)
  log "$n"
  timeout 60 ./bin/cactus bench "$f" --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128|rror|device:" | sed "s/^/ours: /"
  [ -x $LB ] && timeout 90 $LB -m "$f" -ngl 99 -p 512 -n 128 -r 3 -o md 2>&1 | grep -E "pp512|tg128|rror" | sed "s/^/llama: /"
  [ -z "$QUICK" ] && timeout 60 ./bin/cactus bench "$f" --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128|rror" | sed "s/^/ours again: /"
  CACTUS_CUDA_PROFILE=1 timeout 60 ./bin/cactus bench "$f" --device cuda -p 512 -n 0 -r 1 2>&1 | grep -A24 "cuda profile" | sed "s/^/profile pp512: /"
  CACTUS_CUDA_PROFILE=1 timeout 60 ./bin/cactus bench "$f" --device cuda -p 8 -n 128 -r 1 2>&1 | grep -A14 "cuda profile" | sed "s/^/profile tg128: /"
done
if [ -n "$IMAGE" ]; then
  log "image encode, SmolVLM and LFM2-VL towers (random f16 weights at real widths), ours against libmtmd"
  cp vlm/skel_* /tmp/skel/ && gunzip -f /tmp/skel/*.head.gz
  for fam in smolvlm lfm2vl; do for part in mmproj text; do
    [ -f /tmp/models/${fam}_$part.gguf ] || python3 gguf_fill.py /tmp/skel/skel_${fam}_$part /tmp/models/${fam}_$part.gguf > /dev/null
  done; done
  MC=/tmp/ll/llama.cpp/build/bin/llama-mtmd-cli
  encode() {  # $1 family, $2 label; env passed through
    ./bin/vision_probe encode /tmp/models/$1_mmproj.gguf vlm/img.png /tmp/vlm_out --device cuda --runs 5 |
      python3 -c "import json,sys; d=json.load(sys.stdin); print('ours $2 $1: %.2f ms, %d part(s) of %d tokens' % (d['encode_ms'], d['parts'], d['tokens_per_part']))"
  }
  for round in 1 2 3; do
    for fam in smolvlm lfm2vl; do
      encode $fam default
      CACTUS_CUDA_GEMM_F16=0 encode $fam tf32-tiles
      [ -x $MC ] && timeout 60 $MC -m /tmp/models/${fam}_text.gguf --mmproj /tmp/models/${fam}_mmproj.gguf --chat-template chatml \
        --image vlm/img.png -p "Describe." -n 2 -ngl 99 --temp 0 2>&1 | grep -E "encoded in|rror" | sed "s/^/libmtmd $fam: /"
    done
  done
fi
if [ -n "$WHISPER_CPP" ]; then  # whisper-base vs whisper.cpp-CUDA, same random weights, both text only, alternated
  mkdir -p /tmp/wc && tar xzf whisper_src.tgz -C /tmp/wc
  (cd /tmp/wc/whisper.cpp && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DWHISPER_BUILD_TESTS=OFF -DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF \
    -DBUILD_SHARED_LIBS=OFF > /tmp/wc/cfg.log 2>&1 && cmake --build build --target whisper-cli -j 16 > /tmp/wc/build.log 2>&1)
  PYTHONPATH=$PWD/py python3 -c "import sys; sys.path.insert(0, '../bench'); import whisper_cpp;
whisper_cpp.convert('/tmp/models/whisper-base.gguf', '/tmp/whisper-base.ggml.bin')"
  for round in 1 2 3; do
    timeout 60 ./bin/cactus bench /tmp/models/whisper-base.gguf --transcribe --audio glide30.wav --device cuda -t 8 \
      -r 3 --without-timestamps 2>&1 | tail -1 | sed "s/^/ours whisper-base: /"
    timeout 60 /tmp/wc/whisper.cpp/build/bin/whisper-cli -m /tmp/whisper-base.ggml.bin -f glide30.wav -t 8 -nt -nf \
      -bo 1 -bs 1 2>&1 >/dev/null | grep -E "encode time|decode time|total time" | tr -s ' ' | sed "s/^/whisper.cpp: /"
  done
fi
log "whisper-tiny.en (random weights, 30 s synthetic signal)"
for d in cuda cpu; do
  timeout 90 ./bin/cactus bench /tmp/models/whisper-tiny.en.gguf --transcribe --device $d -t 16 2>&1 | tail -4 | sed "s/^/whisper $d: /"
done
LS=/tmp/ll/llama.cpp/build/bin/llama-server
if [ -z "$QUICK" ]; then  # llama-server builds after llama-bench, while the benches run
  log "waiting for llama-server's build"
  for i in $(seq 1 240); do [ -f /tmp/ll/SERVER_DONE ] && break; sleep 1; done
  cat /tmp/ll/SERVER_DONE 2>/dev/null || echo "llama-server build unfinished"
fi
if [ -z "$QUICK" ] && [ -x $LS ]; then
  log "serve on the GPU, qwen2.5-coder-0.5b: 16 slots, 1/4/16 clients, alternated with llama-server -ngl 99"
  timeout 300 python3 ../bench/compare_server.py --model /tmp/models/qwen2.5-coder-0.5b.gguf --build "$PWD" \
    --llama-server $LS --device cuda --threads 8 --no-history --out /tmp/serve.json 2>&1 | tail -8
  if [ -n "$SPLIT_AB" ]; then
    log "serve again, 9-16-token steps on the int8 tiles (CACTUS_CUDA_GEMV_SPLIT=0)"
    CACTUS_CUDA_GEMV_SPLIT=0 timeout 300 python3 ../bench/compare_server.py --model /tmp/models/qwen2.5-coder-0.5b.gguf \
      --build "$PWD" --llama-server $LS --device cuda --threads 8 --no-history --out /tmp/serve_split.json 2>&1 | tail -8
  fi
fi
log end
