"""faster-whisper reference outputs, run in the Whisper oracle venv (scripts/setup_whisper_oracle.sh).

  fw_reference.py mel N_MELS OUT_DIR WAV...            writes OUT_DIR/<wav name>.npy: log-mel [n_mels, n_frames]
  fw_reference.py transcribe CT2_DIR THREADS [--beam-size N] WAV...
                                                       prints JSON {wav: {text, segments, seconds}}
  fw_reference.py embed CT2_DIR WAV...                 prints JSON {wav: [float]}: the encoder's output over
                                                       the first 30 s window, mean over the frames holding
                                                       audio, unit length (what cactus_audio_embed returns)
Temperature 0 only, greedy (beam 1) or beam search of N beams (patience 1, length penalty 1), no VAD,
timestamps on, previous-text prompt on: what `cactus transcribe --greedy [--beam-size N]` does.
"""
import json
import os
import sys
import time

import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio
from faster_whisper.feature_extractor import FeatureExtractor


def main():
    mode = sys.argv[1]
    if mode == "mel":
        fe = FeatureExtractor(feature_size=int(sys.argv[2]))
        for wav in sys.argv[4:]:
            mel = fe(decode_audio(wav))[:, :]
            np.save(os.path.join(sys.argv[3], os.path.basename(wav) + ".npy"), mel.astype(np.float32))
        return
    if mode == "embed":
        model = WhisperModel(sys.argv[2], device="cpu", compute_type="float32", cpu_threads=2)
        fe = model.feature_extractor
        out = {}
        for wav in sys.argv[3:]:
            audio = decode_audio(wav)[: 30 * 16000]
            mel = fe(audio)  # [n_mels, frames + 1]: the last frame is padding
            frames = min(mel.shape[1] - 1, 3000)
            window = np.zeros((mel.shape[0], 3000), dtype=np.float32)
            window[:, :frames] = mel[:, :frames]
            encoded = np.array(model.encode(window))[0]  # [1500, d]
            v = encoded[: max(1, (frames + 1) // 2)].astype(np.float64).mean(axis=0)
            out[wav] = (v / np.linalg.norm(v)).tolist()
        print(json.dumps(out))
        return
    if mode == "transcribe":
        model = WhisperModel(sys.argv[2], device="cpu", compute_type="float32", cpu_threads=int(sys.argv[3]))
        out = {}
        wavs, beam_size = sys.argv[4:], 1
        if wavs[:1] == ["--beam-size"]:
            beam_size, wavs = int(wavs[1]), wavs[2:]
        for wav in wavs:
            t0 = time.perf_counter()
            segments, info = model.transcribe(wav, beam_size=beam_size, temperature=[0.0], vad_filter=False)
            segs = [{"start": s.start, "end": s.end, "text": s.text} for s in segments]
            out[wav] = {"text": "".join(s["text"] for s in segs), "segments": segs,
                        "seconds": time.perf_counter() - t0, "language": info.language}
        print(json.dumps(out))
        return
    sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
