#pragma once
// Generated text on its way to the caller: stop sequences are matched on the text (not on token
// ids), and text that could still turn into a stop sequence is held back until it cannot.
#include <string>
#include <vector>

namespace cactus {

class TextStream {
public:
    TextStream(std::vector<std::string> stop_sequences, bool include_stop);

    // Adds generated text; returns the part that is now safe to show.
    std::string push(const std::string& piece);
    // After the last piece: whatever was held back (empty once a stop sequence matched).
    std::string finish();

    bool stopped() const { return stopped_; }
    const std::string& matched_stop() const { return matched_; }  // the stop sequence that ended the text
    const std::string& text() const { return visible_; }          // all text shown or to be shown

private:
    size_t held_back_length() const;

    std::vector<std::string> stops_;
    bool include_stop_;
    std::string buffer_;   // text not yet returned
    std::string visible_;  // text returned so far plus buffer_ after finish
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace cactus
