#include <gtest/gtest.h>

#include <string>

#include "core/sha256.h"

using cactus::Sha256;

namespace {
std::string sha(const std::string& s) {
    Sha256 h;
    h.update(s.data(), s.size());
    return h.hex_digest();
}
}  // namespace

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, StreamingEqualsOneShot) {
    std::string data;
    for (int i = 0; i < 1000; ++i) data += static_cast<char>(i * 31 + 7);
    Sha256 h;
    for (size_t i = 0; i < data.size(); i += 13) h.update(data.data() + i, std::min<size_t>(13, data.size() - i));
    EXPECT_EQ(h.hex_digest(), sha(data));
}
