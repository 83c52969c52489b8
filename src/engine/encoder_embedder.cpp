// Embeddings from an encoder-only model file (BERT family: models/bert.h). The handle owns the
// file, its tokenizer and the encoder; pooling is the file's (<arch>.pooling_type).
#include "core/error.h"
#include "engine/embedding.h"
#include "gguf/gguf.h"
#include "models/bert.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

namespace {

constexpr const char* kEncoderArchitectures[] = {"bert"};

class EncoderEmbedder : public TextEmbedder {
public:
    EncoderEmbedder(const std::string& path, int n_threads) : file_(GgufFile::open(path)) {
        const std::string arch = file_->get_string("general.architecture", "");
        if (!TextEmbedder::is_encoder_architecture(arch))
            fail("'%s' is not an encoder-only model (architecture '%s'; supported: bert)", path.c_str(), arch.c_str());
        ModelOptions options;
        options.n_threads = n_threads;
        model_ = BertModel::load(*file_, options);
        tokenizer_ = Tokenizer::from_gguf(*file_);
        name_ = arch;
        const std::string general = file_->get_string("general.name", "");
        if (!general.empty()) name_ += " " + general;
    }

    size_t dim() const override { return model_->hparams().n_embd; }
    size_t max_tokens() const override { return model_->hparams().n_positions; }
    Pooling default_pooling() const override { return model_->pooling(); }
    const Tokenizer& tokenizer() const override { return *tokenizer_; }
    std::string name() const override { return name_; }
    // Special-token text in the input ("[SEP]") becomes the special token, as Hugging Face's
    // tokenizer does for BERT models (sentence-transformers' reference).
    std::vector<int32_t> tokenize(const std::string& text) const override {
        return tokenizer_->encode(text, /*add_special=*/true, /*parse_special=*/true);
    }

protected:
    void hidden_states(const std::vector<std::vector<int32_t>>& seqs, std::vector<std::vector<float>>* out) override {
        model_->encode(seqs, out);
    }

private:
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<BertModel> model_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::string name_;
};

}  // namespace

std::unique_ptr<TextEmbedder> TextEmbedder::load_encoder(const std::string& path, int n_threads) {
    return std::make_unique<EncoderEmbedder>(path, n_threads);
}

bool TextEmbedder::is_encoder_architecture(const std::string& arch) {
    for (const char* a : kEncoderArchitectures)
        if (arch == a) return true;
    return false;
}

bool TextEmbedder::is_encoder_file(const std::string& path) {
    const std::unique_ptr<GgufFile> file = GgufFile::open(path);
    return is_encoder_architecture(file->get_string("general.architecture", ""));
}

}  // namespace cactus
