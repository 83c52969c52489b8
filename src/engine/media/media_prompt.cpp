#include "engine/media/media_prompt.h"

#include <algorithm>

#include "core/error.h"
#include "models/model.h"
#include "models/vision/vision_encoder.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

void MediaPrompt::push_token(int32_t id) {
    tokens.push_back(id);
    embd.resize(embd.size() + n_embd, 0.0f);
    group.push_back(-1);
}

void MediaPrompt::push_rows(const float* rows, size_t n, bool bidirectional) {
    const int32_t id = bidirectional ? int32_t(tokens.size()) : -1;  // the span's first row: unique
    tokens.insert(tokens.end(), n, -1);
    embd.insert(embd.end(), rows, rows + n * n_embd);
    group.insert(group.end(), n, id);
}

std::pair<size_t, size_t> MediaPrompt::span_of(size_t i) const {
    CACTUS_ASSERT(i < group.size());
    size_t first = i, end = i + 1;
    if (group[i] < 0) return {first, end};
    while (first > 0 && group[first - 1] == group[i]) --first;
    while (end < group.size() && group[end] == group[i]) ++end;
    return {first, end};
}

MarkerVocab::MarkerVocab(const Tokenizer& tok) {
    // The first id of each piece wins, as llama.cpp's lookup_token scans from id 0.
    for (size_t id = tok.vocab_size(); id-- > 0;) by_piece_[tok.token_to_piece(int32_t(id), true)] = int32_t(id);
}

std::vector<int32_t> MarkerVocab::ids(const std::string& text) const {
    std::vector<int32_t> out;
    for (size_t i = 0; i < text.size();) {
        size_t j;
        if (text.compare(i, 2, "\n\n") == 0) {
            j = i + 2;
        } else if (text[i] == '\n') {
            j = i + 1;
        } else if (text[i] == '<' && text.find('>', i) != std::string::npos) {
            j = text.find('>', i) + 1;
        } else {
            fail("MarkerVocab: marker text '%s' is not special tokens and newlines", text.c_str());
        }
        const auto it = by_piece_.find(text.substr(i, j - i));
        if (it == by_piece_.end()) fail("MarkerVocab: the vocabulary has no token '%s'", text.substr(i, j - i).c_str());
        out.push_back(it->second);
        i = j;
    }
    return out;
}

namespace {

// The layout's marker tokens and, for each part it names (0: the overview, k: tile k - 1), the
// part's encoded rows, in order.
void append_tiles(MediaPrompt* prompt, const TiledImage& tiled, const std::vector<LayoutPiece>& layout,
                  VisionEncoder& enc, const MarkerVocab& vocab) {
    const VisionHParams& hp = enc.hparams();
    std::vector<float> rows;
    for (const LayoutPiece& piece : layout) {
        if (piece.part < 0) {
            for (int32_t id : vocab.ids(piece.text)) prompt->push_token(id);
            continue;
        }
        const Image& part = piece.part == 0 ? tiled.overview : tiled.tiles[size_t(piece.part - 1)];
        EncoderInput in;
        in.width = part.width;
        in.height = part.height;
        in.planes = normalize_planes(part, hp.mean, hp.std);
        enc.encode(in, &rows);
        prompt->push_rows(rows.data(), enc.tokens(in));
    }
}

}  // namespace

void append_idefics3_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab) {
    const VisionHParams& hp = enc.hparams();
    if (prompt->n_embd != hp.proj_dim)
        fail("append_idefics3_image: the projector gives %zu-wide rows, the text model takes %zu", hp.proj_dim,
             prompt->n_embd);
    const TiledImage tiled = idefics3_tiles(img, hp.image_size, hp.longest_edge);
    append_tiles(prompt, tiled, idefics3_layout(tiled.grid_x, tiled.grid_y), enc, vocab);
}

namespace {

void check_span_boundary(const MediaPrompt& p, size_t row, const char* what) {
    if (row > 0 && row < p.tokens.size() && p.span_of(row).first != row)
        fail("prefill_media: the %s row %zu is inside a bidirectional image span [%zu, %zu)", what, row,
             p.span_of(row).first, p.span_of(row).second);
}

}  // namespace

size_t media_step(const MediaPrompt& p, size_t at, size_t end, size_t chunk, size_t cap) {
    CACTUS_ASSERT(at < end && end <= p.tokens.size() && p.group.size() == p.tokens.size());
    size_t stop = std::min(end, at + std::max<size_t>(std::min(chunk, cap), 1));
    if (stop < p.tokens.size()) {
        const auto span = p.span_of(stop);
        if (span.first != stop) stop = span.first > at ? span.first : span.second;
    }
    if (stop - at > cap)
        fail(
            "prefill_media: a bidirectional image span of %zu rows does not fit one step of %zu rows (n_batch or the "
            "cache's room now); raise n_batch",
            stop - at, cap);
    return stop - at;
}

void append_gemma3_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab) {
    const VisionHParams& hp = enc.hparams();
    if (prompt->n_embd != hp.proj_dim)
        fail("append_gemma3_image: the projector gives %zu-wide rows, the text model takes %zu", hp.proj_dim,
             prompt->n_embd);
    const Image square = gemma3_image(img, hp.image_size);
    EncoderInput in;
    in.width = square.width;
    in.height = square.height;
    in.planes = normalize_planes(square, hp.mean, hp.std);
    std::vector<float> rows;
    enc.encode(in, &rows);
    // libmtmd: img_beg and img_end as text around the image chunk (no newlines added).
    for (int32_t id : vocab.ids("<start_of_image>")) prompt->push_token(id);
    prompt->push_rows(rows.data(), enc.tokens(in), /*bidirectional=*/true);
    for (int32_t id : vocab.ids("<end_of_image>")) prompt->push_token(id);
}

void append_gemma4_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const std::vector<int32_t>& boi,
                         const std::vector<int32_t>& eoi, size_t max_soft_tokens) {
    const VisionHParams& hp = enc.hparams();
    if (prompt->n_embd != hp.proj_dim)
        fail("append_gemma4_image: the projector gives %zu-wide rows, the text model takes %zu", hp.proj_dim,
             prompt->n_embd);
    const Image sized = gemma4_image(img, max_soft_tokens);
    EncoderInput in;
    in.width = sized.width;
    in.height = sized.height;
    in.planes = gemma4_planes(sized);
    std::vector<float> rows;
    enc.encode(in, &rows);
    // processing_gemma4.py: boi + soft tokens + eoi, no newlines; E2B/E4B attend causally over them.
    for (int32_t id : boi) prompt->push_token(id);
    prompt->push_rows(rows.data(), enc.tokens(in));
    for (int32_t id : eoi) prompt->push_token(id);
}

void append_gemma4_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab,
                         size_t max_soft_tokens) {
    append_gemma4_image(prompt, img, enc, vocab.ids("<|image>"), vocab.ids("<image|>"), max_soft_tokens);
}

Lfm2Config lfm2_config(const VisionHParams& hp) {
    Lfm2Config c;
    c.patch = hp.patch_size;
    c.downsample = hp.scale_factor;
    c.min_tokens = hp.min_tokens;
    c.max_tokens = hp.max_tokens;
    return c;
}

void append_lfm2_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab) {
    const VisionHParams& hp = enc.hparams();
    if (prompt->n_embd != hp.proj_dim)
        fail("append_lfm2_image: the projector gives %zu-wide rows, the text model takes %zu", hp.proj_dim,
             prompt->n_embd);
    const TiledImage tiled = lfm2_tiles(img, lfm2_config(hp));
    append_tiles(prompt, tiled, lfm2_layout(tiled.grid_x, tiled.grid_y), enc, vocab);
}

void append_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab) {
    const std::string& family = enc.hparams().projector;
    if (family == "lfm2") return append_lfm2_image(prompt, img, enc, vocab);
    if (family == "idefics3") return append_idefics3_image(prompt, img, enc, vocab);
    if (family == "gemma3") return append_gemma3_image(prompt, img, enc, vocab);
    if (family == "gemma4v") return append_gemma4_image(prompt, img, enc, vocab);
    fail("append_image: projector type '%s' has no prompt layout", family.c_str());
}

void prefill_media(Model& model, const MediaPrompt& p, size_t from, size_t n, size_t chunk, int seq,
                   std::vector<float>* logits, const ChunkDone& on_chunk) {
    const size_t n_embd = model.info().n_embd, n_vocab = model.info().n_vocab;
    if (n == 0) fail("prefill_media: empty prompt");
    if (from > p.tokens.size() || n > p.tokens.size() - from)
        fail("prefill_media: rows [%zu, %zu) of a %zu-row prompt", from, from + n, p.tokens.size());
    if (p.n_embd != n_embd || p.embd.size() != p.tokens.size() * n_embd || p.group.size() != p.tokens.size())
        fail("prefill_media: %zu rows of %zu for a model of width %zu", p.embd.size() / std::max<size_t>(p.n_embd, 1),
             p.n_embd, n_embd);
    if (n > model.context_room(seq))
        fail("prefill_media: %zu tokens exceed the room of %zu left in the context", n, model.context_room(seq));
    for (size_t i = from; i < from + n; ++i)
        if (p.tokens[i] >= 0 && size_t(p.tokens[i]) >= n_vocab)
            fail("prefill_media: token id %d is outside the vocabulary", p.tokens[i]);
    check_span_boundary(p, from, "first");
    check_span_boundary(p, from + n, "end");
    if (chunk == 0) chunk = model.n_batch();
    std::vector<int32_t> seqs;
    std::vector<uint8_t> marks;
    std::vector<float> step_logits;
    for (size_t done = 0; done < n;) {
        const size_t at = from + done, end = from + n;
        size_t step = media_step(p, at, end, std::min(chunk, model.n_batch()), model.n_batch());
        const size_t room = model.reserve(step, seq);  // sliding rings / compaction may take fewer now
        if (room < step) step = media_step(p, at, end, room, room);
        seqs.assign(step, seq);
        marks.assign(step, 0);
        marks.back() = done + step == n ? 1 : 0;
        Batch b;
        b.n = step;
        b.tokens = p.tokens.data() + from + done;
        b.embd = p.embd.data() + (from + done) * n_embd;
        b.seq = seqs.data();
        b.logits = marks.data();
        b.group = p.group.data() + from + done;
        model.decode(b, &step_logits);
        if (on_chunk) on_chunk(from + done, step);
        done += step;
    }
    logits->assign(step_logits.end() - std::ptrdiff_t(n_vocab), step_logits.end());
}

}  // namespace cactus
