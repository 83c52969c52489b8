#!/usr/bin/env bash
# The full Whisper quality run (docs/AUDIO.md): all 60 espeak-ng sentences plus the 40 s clip, on
# whisper-tiny.en and whisper-base, our transcripts vs faster-whisper's (greedy, same weights); prints
# identical counts and both WERs. Minutes on 2 cores. CI runs a subset (tests/models/audio/test_whisper_oracle.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_whisper_oracle.sh
PY=${CACTUS_WHISPER_VENV:-$HOME/.cache/cactus/whisper-venv}/bin/python
for m in whisper-tiny.en whisper-base; do
  CACTUS_CONVERT_PYTHON=$PY build/bin/cactus pull "$m"
done
CACTUS_WHISPER_FULL=1 "$PY" -m pytest -q -s -p no:cacheprovider tests/models/audio/test_whisper_oracle.py -k greedy "$@"
