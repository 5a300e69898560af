#include "base/sha256.h"

#include <string>

#include "gtest/gtest.h"

namespace memplan::base {
namespace {

// FIPS 180-4's examples (NIST "SHA256.pdf", "SHA2_Additional.pdf").
TEST(Sha256Test, NistVectors) {
  EXPECT_EQ(Sha256::Hex(Sha256::Of("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::Hex(Sha256::Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256::Hex(Sha256::Of(
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256::Hex(Sha256::Of(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Split updates give the digest of the whole, at every split point around
// the 55/56/64-byte padding edges.
TEST(Sha256Test, IncrementalEqualsOneShot) {
  std::string message;
  for (int i = 0; i < 200; ++i) message.push_back(static_cast<char>(i * 7));
  for (size_t length : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200}) {
    const std::string m = message.substr(0, length);
    for (size_t split = 0; split <= length; split += 13) {
      Sha256 h;
      h.Update(absl::string_view(m).substr(0, split));
      h.Update(absl::string_view(m).substr(split));
      EXPECT_EQ(h.Finish(), Sha256::Of(m)) << length << " " << split;
    }
  }
}

TEST(Sha256Test, Int64IsEightLittleEndianBytes) {
  Sha256 a;
  a.UpdateInt64(0x0102030405060708);
  Sha256 b;
  b.Update(std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_EQ(a.Finish(), b.Finish());
}

}  // namespace
}  // namespace memplan::base
