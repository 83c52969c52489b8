#pragma once
// Named intermediates of a forward pass, for comparisons with a reference implementation layer by
// layer (tests/tools/model_probe.cpp, scripts/check_transformers.py): the way a mismatch is
// bisected to a layer instead of guessed.
//
// Names (docs/ARCHITECTURE.md, "Named intermediates"):
//   global:    embd [T, n_embd] (after the embedding scale), per_layer_inputs [T, n_layer * P]
//              (Gemma 4), result_norm [T, n_embd] (after the final norm), logits [T, n_vocab]
//              (after the soft-cap; only rows whose logits are computed)
//   per layer: attn_out, ffn_out, ple_out [T, n_embd] (what each block adds to the residual
//              stream, after its post-norm), layer_out [T, n_embd] (the stream after the layer)
// Keys are "<name>" for global tensors and "<name>.<layer>" for per-layer ones.
#include <map>
#include <string>
#include <vector>

namespace cactus {

class Backend;
struct Tensor;

struct RecordedTensor {
    size_t width = 0;
    std::vector<float> data;  // [rows, width]: the rows of every step, in order
};

using Intermediates = std::map<std::string, RecordedTensor>;

// What a decoder records while names are selected. Recording downloads tensors after each block
// (a synchronisation per tap): for oracle runs only, never on a hot path (inactive, a tap is one
// branch).
class Taps {
public:
    void select(const std::vector<std::string>& names);
    bool active() const { return !names_.empty(); }
    // Appends t's rows [rows, width] under the key of (name, il) when name is selected.
    void record(Backend& backend, const char* name, int il, const Tensor& t);
    Intermediates take();

private:
    std::vector<std::string> names_;
    Intermediates recorded_;
};

}  // namespace cactus
