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

// RFC 4231, test cases 1, 2, 3 and 6: a short key, a key shorter than the
// tag, bytes that are not text, and a key longer than a block (hashed
// first).
TEST(HmacSha256Test, Rfc4231Vectors) {
  EXPECT_EQ(Sha256::Hex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Sha256::Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(
      Sha256::Hex(HmacSha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
      "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  EXPECT_EQ(Sha256::Hex(HmacSha256(
                std::string(131, '\xaa'),
                "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256Test, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("xbc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

}  // namespace
}  // namespace memplan::base
