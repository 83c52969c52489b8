#pragma once
// Transcription of the speech only: Silero VAD finds the speech spans, their audio is joined (as
// faster-whisper's vad_filter does) and transcribed, and segment times are mapped back to the
// original timeline. Silence costs no encoder windows.
#include "engine/media/whisper_transcribe.h"
#include "models/audio/silero_vad.h"

namespace cactus {

Transcript transcribe_speech(WhisperModel& model, const SileroVad& vad, const float* samples, size_t n_samples,
                             const TranscribeOptions& options, const VadOptions& vad_options);

// Maps a time (seconds) of the joined speech audio back to the original audio.
double original_time(const std::vector<SpeechSpan>& spans, double joined_seconds);

}  // namespace cactus
