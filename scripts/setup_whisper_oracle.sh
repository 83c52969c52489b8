#!/usr/bin/env bash
# The Whisper oracle, once, into its own cached virtualenv ($CACTUS_WHISPER_VENV, default
# ~/.cache/cactus/whisper-venv): faster-whisper (CTranslate2) runs the same CT2 weights that
# `cactus pull whisper-*` converts; gguf + numpy also run scripts/convert_whisper.py. Tests and
# benchmarks only; never shipped. Kept apart from the llama.cpp oracle venv so neither rebuilds.
set -euo pipefail
VENV=${CACTUS_WHISPER_VENV:-$HOME/.cache/cactus/whisper-venv}
STAMP="$VENV/.cactus-whisper-requirements"
REQUIREMENTS=(faster-whisper==1.2.1 gguf==0.19.0 numpy pytest)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${REQUIREMENTS[*]}" ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install --disable-pip-version-check -q "${REQUIREMENTS[@]}"
"$VENV/bin/python" -c "import faster_whisper, ctranslate2, gguf, numpy"
echo "${REQUIREMENTS[*]}" > "$STAMP"
