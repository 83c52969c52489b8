#include "engine/media/vad_transcribe.h"

#include "media/audio_input.h"

namespace cactus {

double original_time(const std::vector<SpeechSpan>& spans, double joined_seconds) {
    const double s = joined_seconds * kWhisperSampleRate;
    double joined_start = 0.0;
    for (size_t i = 0; i < spans.size(); ++i) {
        const double len = static_cast<double>(spans[i].end - spans[i].start);
        if (s < joined_start + len || i + 1 == spans.size()) {
            return (static_cast<double>(spans[i].start) + (s - joined_start)) / kWhisperSampleRate;
        }
        joined_start += len;
    }
    return joined_seconds;
}

Transcript transcribe_speech(WhisperModel& model, const SileroVad& vad, const float* samples, size_t n_samples,
                             const TranscribeOptions& options, const VadOptions& vad_options) {
    const std::vector<SpeechSpan> spans = vad.speech_spans(samples, n_samples, vad_options);
    std::vector<float> joined;
    for (const SpeechSpan& s : spans) joined.insert(joined.end(), samples + s.start, samples + s.end);
    Transcript t;
    if (!joined.empty()) t = transcribe(model, joined.data(), joined.size(), options);
    for (TranscriptSegment& seg : t.segments) {
        seg.start = original_time(spans, seg.start);
        seg.end = original_time(spans, seg.end);
    }
    t.metrics.audio_seconds = static_cast<double>(n_samples) / kWhisperSampleRate;
    return t;
}

}  // namespace cactus
