// Probe for tests/tokenizer/test_tokenizer_oracle.py and test_tokenizer_gemma4.py.
//   tokenize_probe MODEL.gguf CORPUS.jsonl OUT.jsonl [PIECES.txt]
// CORPUS: one JSON object a line, {"text": "..."} or {"hex": "..."} (raw bytes).
// OUT: one line each, {"special": ids of encode(add_special, parse_special),
//                      "plain": ids of encode(no add_special, no parse_special),
//                      "decoded": hex of decode(special ids), "decoded_special": the same with
//                      control tokens rendered, "streamed": hex of the streaming detokenizer's
//                      output for the special ids, "plain_decoded": hex of decode(plain ids)}
// and a final line {"summary": {...}} with the vocabulary facts, the load time (GGUF open +
// tokenizer build; wall and CPU) and the encode time.
// PIECES (optional): one line per token id, "HEX HEX": token_to_piece without and with
// render_special (an empty piece is written as "-").
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string to_hex(const std::string& bytes) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (const char c : bytes) {
        out.push_back(digits[static_cast<uint8_t>(c) >> 4]);
        out.push_back(digits[static_cast<uint8_t>(c) & 15]);
    }
    return out;
}

std::string from_hex(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

void write_pieces(const cactus::Tokenizer& tokenizer, const char* path) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot open the pieces file");
    const auto field = [](const std::string& piece) { return piece.empty() ? std::string("-") : to_hex(piece); };
    for (size_t id = 0; id < tokenizer.vocab_size(); ++id) {
        const int32_t token = static_cast<int32_t>(id);
        out << field(tokenizer.token_to_piece(token, false)) << ' ' << field(tokenizer.token_to_piece(token, true))
            << '\n';
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: %s MODEL.gguf CORPUS.jsonl OUT.jsonl [PIECES.txt]\n", argv[0]);
        return 2;
    }
    try {
        const auto load_start = std::chrono::steady_clock::now();
        const std::clock_t load_cpu_start = std::clock();
        const auto file = cactus::GgufFile::open(argv[1]);
        const auto tokenizer = cactus::Tokenizer::from_gguf(*file);
        const double load_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
        // CPU time too: on a shared machine the wall time measures the other processes as well
        const double load_cpu_seconds = static_cast<double>(std::clock() - load_cpu_start) / CLOCKS_PER_SEC;
        if (argc == 5) write_pieces(*tokenizer, argv[4]);
        std::ifstream corpus(argv[2]);
        std::ofstream out(argv[3]);
        if (!corpus || !out) throw std::runtime_error("cannot open the corpus or the output file");
        double encode_seconds = 0.0;
        size_t n_texts = 0, n_tokens = 0;
        std::string line;
        while (std::getline(corpus, line)) {
            if (line.empty()) continue;
            const auto item = nlohmann::json::parse(line);
            const std::string text =
                item.contains("hex") ? from_hex(item["hex"].get<std::string>()) : item["text"].get<std::string>();
            const auto start = std::chrono::steady_clock::now();
            const auto special = tokenizer->encode(text, true, true);
            const auto plain = tokenizer->encode(text, false, false);
            encode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            cactus::StreamingDetokenizer stream(*tokenizer);
            std::string streamed;
            for (const int32_t id : special) streamed += stream.push(id);
            streamed += stream.flush();
            nlohmann::json result = {
                {"special", special},
                {"plain", plain},
                {"decoded", to_hex(tokenizer->decode(special, false))},
                {"decoded_special", to_hex(tokenizer->decode(special, true))},
                {"streamed", to_hex(streamed)},
                {"plain_decoded", to_hex(tokenizer->decode(plain, false))},
            };
            out << result.dump() << "\n";
            ++n_texts;
            n_tokens += special.size() + plain.size();
        }
        nlohmann::json summary = {
            {"texts", n_texts},
            {"tokens", n_tokens},
            {"encode_seconds", encode_seconds},
            {"load_seconds", load_seconds},
            {"load_cpu_seconds", load_cpu_seconds},
            {"vocab_size", tokenizer->vocab_size()},
            {"bos", tokenizer->bos_id()},
            {"eos", tokenizer->eos_id()},
            {"eot", tokenizer->eot_id()},
            {"add_bos", tokenizer->add_bos()},
            {"eog", tokenizer->end_of_generation_ids()},
        };
        out << nlohmann::json{{"summary", summary}}.dump() << "\n";
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenize_probe: %s\n", e.what());
        return 1;
    }
    return 0;
}
