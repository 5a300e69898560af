#include "base/text.h"

#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::base {
namespace {

using ::testing::ElementsAre;

// The standard encoding of a code point (surrogates included, so that the
// tests can build the sequences the decoder must refuse).
std::string Encode(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') ||
         (c >= 'a' && c <= 'f');
}

int HexValue(char c) {
  if (c <= '9') return c - '0';
  return (c | 0x20) - 'a' + 10;
}

// The inverse of SafeName, as a reader of a response would write it: \\ is
// a backslash, \xHH the byte HH, anything else itself.
std::string Unescape(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\\') {
      out += '\\';
      i += 2;
    } else if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x' &&
               IsHex(s[i + 2]) && IsHex(s[i + 3])) {
      out += static_cast<char>(HexValue(s[i + 2]) * 16 + HexValue(s[i + 3]));
      i += 4;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Whether `s` is well-formed UTF-8 of characters SafeName keeps.
bool AllNameChars(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const size_t len = Utf8Sequence(s, i, &c);
    if (len == 0 || !IsNameChar(c)) return false;
    i += len;
  }
  return true;
}

TEST(Utf8SequenceTest, AcceptsExactlyTheShortestFormOfEveryScalarValue) {
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    const std::string bytes = Encode(c);
    char32_t decoded = 0;
    const size_t len = Utf8Sequence(bytes, 0, &decoded);
    if (c >= 0xD800 && c <= 0xDFFF) {
      ASSERT_EQ(len, 0u) << "surrogate U+" << std::hex << c;
    } else {
      ASSERT_EQ(len, bytes.size()) << "U+" << std::hex << c;
      ASSERT_EQ(decoded, c);
    }
  }
}

TEST(Utf8SequenceTest, RefusesEveryOtherSequenceOfUpToThreeBytes) {
  // Every 1-, 2- and 3-byte string: a sequence the decoder takes is the
  // shortest encoding of what it decodes to.
  std::string s(3, '\0');
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (int c = 0; c < 256; ++c) {
        s[0] = static_cast<char>(a);
        s[1] = static_cast<char>(b);
        s[2] = static_cast<char>(c);
        char32_t decoded = 0;
        const size_t len = Utf8Sequence(s, 0, &decoded);
        if (len == 0) continue;
        ASSERT_EQ(Encode(decoded), s.substr(0, len))
            << a << " " << b << " " << c;
        ASSERT_FALSE(decoded >= 0xD800 && decoded <= 0xDFFF);
      }
    }
  }
}

TEST(Utf8SequenceTest, TheIssuesBytes) {
  char32_t c = 0;
  for (const char* bad :
       {"\xff", "\xfe", "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\x80", "\xc1\xbf",
        "\xe0\x80\x80", "\xe0\x9f\xbf", "\xf0\x80\x80\x80", "\xf4\x90\x80\x80",
        "\xf5\x80\x80\x80", "\x80", "\xe2\x82", "\xf0\x9f\x98"}) {
    EXPECT_EQ(Utf8Sequence(bad, 0, &c), 0u) << absl::CEscape(bad);
  }
  EXPECT_EQ(Utf8Sequence("\xf4\x8f\xbf\xbf", 0, &c), 4u);
  EXPECT_EQ(c, char32_t{0x10FFFF});
}

TEST(IsNameCharTest, XmlCharactersThatPrint) {
  for (char32_t c :
       {0x20, 0x41, 0xA0, 0xD7FF, 0xE000, 0xFFFD, 0x10000, 0x1F600, 0x10FFFD}) {
    EXPECT_TRUE(IsNameChar(c)) << std::hex << c;
    EXPECT_TRUE(IsXmlChar(c)) << std::hex << c;
  }
  for (char32_t c : {0x0, 0x1, 0x1F, 0x7F, 0x85, 0x9F, 0xFDD0, 0xFDEF, 0xFFFE,
                     0xFFFF, 0x1FFFE, 0x10FFFF}) {
    EXPECT_FALSE(IsNameChar(c)) << std::hex << c;
  }
  for (char32_t c : {0x9, 0xA, 0xD}) {
    EXPECT_TRUE(IsXmlChar(c));
    EXPECT_FALSE(IsNameChar(c));  // a name stays on one line
  }
  // Bidirectional formatting: shown, they reorder the text around them;
  // the line and paragraph separators break a line.
  for (char32_t c : {0x061C, 0x200E, 0x200F, 0x202A, 0x202E, 0x2066, 0x2069,
                     0x2028, 0x2029}) {
    EXPECT_TRUE(IsXmlChar(c));
    EXPECT_FALSE(IsNameChar(c)) << std::hex << c;
  }
  // Their neighbours, and right-to-left letters themselves, print.
  for (char32_t c :
       {0x061B, 0x200D, 0x2027, 0x202F, 0x2065, 0x206A, 0x05D0, 0x0627}) {
    EXPECT_TRUE(IsNameChar(c)) << std::hex << c;
  }
  for (char32_t c :
       {0x0, 0x8, 0xB, 0xC, 0x1F, 0xD800, 0xDFFF, 0xFFFE, 0xFFFF, 0x110000}) {
    EXPECT_FALSE(IsXmlChar(c)) << std::hex << c;
  }
}

TEST(SafeNameTest, KeepsValidNames) {
  for (const char* name :
       {"", "x", "conv/Relu:0", "model_1/dense/MatMul;bias", "\xe5\xbc\xa0",
        "caf\xc3\xa9", "\xf0\x9f\x98\x80", "\xef\xbf\xbd", "a\\b", "C:\\temp",
        "\\", "end\\", "\\x", "\\xG1", "x41", "#2"}) {
    EXPECT_EQ(SafeName(name), name) << absl::CEscape(name);
    EXPECT_TRUE(IsSafeName(name)) << absl::CEscape(name);
  }
}

TEST(SafeNameTest, EscapesEachClassOfBadSequence) {
  // Invalid bytes, surrogates, overlong forms, past U+10FFFF, truncated.
  EXPECT_EQ(SafeName("\xff"), "\\xFF");
  EXPECT_EQ(SafeName("v\xfe"), "v\\xFE");
  EXPECT_EQ(SafeName("\xed\xa0\x80"), "\\xED\\xA0\\x80");
  EXPECT_EQ(SafeName("\xc0\x80"), "\\xC0\\x80");
  EXPECT_EQ(SafeName("\xe0\x80\x80"), "\\xE0\\x80\\x80");
  EXPECT_EQ(SafeName("\xf4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");
  EXPECT_EQ(SafeName("a\xe2\x82"), "a\\xE2\\x82");
  EXPECT_EQ(SafeName("\xe2\x82z"), "\\xE2\\x82z");
  // Characters XML forbids or that do not print.
  EXPECT_EQ(SafeName(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(SafeName("a\tb\nc\rd\x1f\x7f"), "a\\x09b\\x0Ac\\x0Dd\\x1F\\x7F");
  EXPECT_EQ(SafeName("\xc2\x85"), "\\xC2\\x85");           // U+0085 NEL
  EXPECT_EQ(SafeName("\xef\xbf\xbe"), "\\xEF\\xBF\\xBE");  // U+FFFE
  EXPECT_EQ(SafeName("\xef\xbf\xbf"), "\\xEF\\xBF\\xBF");  // U+FFFF
  EXPECT_EQ(SafeName("\xef\xb7\x90"), "\\xEF\\xB7\\x90");  // U+FDD0
  EXPECT_EQ(SafeName("\xf0\x9f\xbf\xbe"), "\\xF0\\x9F\\xBF\\xBE");  // 1FFFE
}

TEST(SafeNameTest, DoublesABackslashOnlyWhereItWouldReadAsAnEscape) {
  EXPECT_EQ(SafeName("\\xFF"), "\\\\xFF");  // the text \xFF, not the byte
  EXPECT_EQ(SafeName("\\xab"), "\\\\xab");
  EXPECT_EQ(SafeName("\\\\"), "\\\\\\");  // \\ -> \\\ (the last stays)
  EXPECT_EQ(SafeName("\\\xff"), "\\\\\\xFF");
  EXPECT_NE(SafeName("v\xff"), SafeName("v\\xFF"));
  EXPECT_NE(SafeName("v\xff"), SafeName("v\xfe"));
  for (const char* name : {"\\xFF", "\\\\", "\\\xff", "a\\xb0"}) {
    EXPECT_FALSE(IsSafeName(name)) << name;
  }
}

TEST(SafeNameTest, InjectiveAndValidOnARandomCorpus) {
  // Pieces chosen to collide if anything can: backslashes, x, hex digits,
  // bad bytes, characters that must be escaped and ones that must not.
  const std::vector<std::string> pieces = {
      "\\",       "x",        "F",
      "f",        "0",        "A",
      "\xff",     "\xfe",     "\x80",
      "\xed",     "\xa0",     "\xc2",
      "\xc2\x85", "\xe0",     "\xef\xbf\xbe",
      "\xf4",     "\x90",     "\n",
      "a",        "\xc3\xa9", "\xf0\x9f\x98\x80"};
  std::mt19937 rng(31);
  absl::flat_hash_set<std::string> inputs, outputs;
  for (int n = 0; n < 100'000; ++n) {
    std::string s;
    const int len = std::uniform_int_distribution<int>(0, 8)(rng);
    for (int k = 0; k < len; ++k) {
      s += pieces[std::uniform_int_distribution<size_t>(
          0, pieces.size() - 1)(rng)];
    }
    const std::string safe = SafeName(s);
    ASSERT_TRUE(AllNameChars(safe)) << absl::CEscape(s);
    ASSERT_EQ(Unescape(safe), s) << absl::CEscape(s) << " -> " << safe;
    ASSERT_EQ(IsSafeName(s), safe == s) << absl::CEscape(s);
    const std::string text = SafeText(s);
    ASSERT_TRUE(AllNameChars(text)) << absl::CEscape(s);
    ASSERT_EQ(SafeText(text), text);
    if (inputs.insert(s).second) outputs.insert(safe);
  }
  EXPECT_EQ(inputs.size(), outputs.size());
  EXPECT_GT(inputs.size(), 50'000u);
}

TEST(SafeNameTest, IsSafeNameSeesEveryByteOfLongNames) {
  // IsSafeName reads plain ASCII 8 bytes at a time: a byte that needs
  // escaping, or a backslash that reads as an escape, at any place of a
  // name of any length (words and the padded tail) makes it unsafe; bytes
  // at the edges of the plain range and a lone backslash keep it safe.
  const std::vector<std::pair<std::string, bool>> inserts = {
      {std::string(1, '\0'), false},
      {"\x1f", false},
      {"\x7f", false},
      {"\x80", false},
      {"\xff", false},
      {"\\x41", false},
      {"\\\\", false},
      {" ", true},
      {"~", true},
      {"\xc3\xa9", true},
      {"\\q", true}};
  int checked = 0;
  for (size_t length = 0; length <= 24; ++length) {
    for (size_t at = 0; at <= length; ++at) {
      for (const auto& [insert, safe] : inserts) {
        std::string name(length, 'n');
        name.insert(at, insert);
        ASSERT_EQ(IsSafeName(name), safe) << absl::CEscape(name);
        ASSERT_EQ(IsSafeName(name), SafeName(name) == name)
            << absl::CEscape(name);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 325 * 11);
  EXPECT_TRUE(IsSafeName(std::string(64, 'n')));
  EXPECT_TRUE(IsSafeName("model_1/dense/MatMul;bias"));
}

TEST(SafeNameTest, IdentityOnRandomValidText) {
  // Any character SafeName keeps, backslash aside: out as it came in.
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> pick(0x20, 0x10FFFF);
  int checked = 0;
  for (int n = 0; n < 20'000; ++n) {
    std::string s;
    for (int k = 0; k < 6; ++k) {
      const char32_t c = pick(rng) % (k % 2 == 0 ? 0x80 : 0x110000);
      if (c == '\\' || !IsNameChar(c)) continue;
      s += Encode(c);
    }
    ASSERT_EQ(SafeName(s), s) << absl::CEscape(s);
    ASSERT_TRUE(IsSafeName(s));
    ASSERT_EQ(SafeText(s), s);
    ++checked;
  }
  EXPECT_EQ(checked, 20'000);
}

TEST(IsUtf8Test, WellFormedOnly) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("caf\xc3\xa9 \xef\xbf\xbe \x01"));  // U+FFFE, a control
  for (const char* bad : {"\xff", "a\xed\xa0\x80", "\xc0\x80", "\xe0\x80\x80",
                          "\xf4\x90\x80\x80", "\xe2\x82"}) {
    EXPECT_FALSE(IsUtf8(bad)) << absl::CEscape(bad);
  }
}

TEST(SafeTextTest, EscapesBytesButNotBackslashes) {
  EXPECT_EQ(SafeText("tensor 'v\xff' \\x"), "tensor 'v\\xFF' \\x");
  EXPECT_EQ(SafeText("line\nbreak"), "line\\x0Abreak");
}

TEST(Utf8PrefixTest, CutsBetweenCharacters) {
  EXPECT_EQ(Utf8Prefix("abc", 5), "abc");
  EXPECT_EQ(Utf8Prefix("abc", 2), "ab");
  EXPECT_EQ(Utf8Prefix("a\xc3\xa9z", 2), "a");
  EXPECT_EQ(Utf8Prefix("a\xc3\xa9z", 3), "a\xc3\xa9");
  EXPECT_EQ(Utf8Prefix("\xf0\x9f\x98\x80!", 3), "");
}

TEST(MakeUniqueTest, KeepsUniqueNamesAndNumbersRepeats) {
  std::vector<std::string> names = {"a", "b", "a", "a"};
  MakeUnique(&names, "#");
  EXPECT_THAT(names, ElementsAre("a", "b", "a#2", "a#3"));
}

TEST(MakeUniqueTest, NeverTakesANameTheListHolds) {
  std::vector<std::string> names = {"SRAM", "SRAM", "SRAM_2", "SRAM_3", "SRAM"};
  MakeUnique(&names, "_");
  EXPECT_THAT(names,
              ElementsAre("SRAM", "SRAM_4", "SRAM_2", "SRAM_3", "SRAM_5"));
  std::vector<std::string> twice = {"", ""};
  MakeUnique(&twice, "_");
  EXPECT_THAT(twice, ElementsAre("", "_2"));
}

TEST(MakeUniqueTest, RandomListsComeOutDistinctAndStable) {
  std::mt19937 rng(3);
  for (int n = 0; n < 2'000; ++n) {
    std::vector<std::string> names;
    const int len = std::uniform_int_distribution<int>(0, 12)(rng);
    for (int k = 0; k < len; ++k) {
      const int v = std::uniform_int_distribution<int>(0, 5)(rng);
      names.push_back(v < 3 ? std::string(1, 'a' + v)
                            : absl::StrCat("a#", v - 1));
    }
    std::vector<std::string> once = names, again = names;
    MakeUnique(&once, "#");
    MakeUnique(&again, "#");
    ASSERT_EQ(once, again);
    ASSERT_EQ(absl::flat_hash_set<std::string>(once.begin(), once.end()).size(),
              once.size());
    for (size_t k = 0; k < names.size(); ++k) {
      // A name no earlier entry held is kept.
      bool earlier = false;
      for (size_t j = 0; j < k; ++j) earlier |= names[j] == names[k];
      if (!earlier) {
        ASSERT_EQ(once[k], names[k]);
      }
    }
  }
}

// Messages keep their lines and tabs; whatever they quote follows SafeText.
TEST(SafeMessageTest, KeepsLinesAndEscapesWhatMessagesQuote) {
  EXPECT_EQ(SafeMessage("op 'conv' reads 'x'"), "op 'conv' reads 'x'");
  EXPECT_EQ(SafeMessage("m.onnx: graph output 'y\xff' is made by no node"),
            "m.onnx: graph output 'y\\xFF' is made by no node");
  EXPECT_EQ(SafeMessage("two\nlines\tand 'a\x01\xed\xa0\x80'\n"),
            "two\nlines\tand 'a\\x01\\xED\\xA0\\x80'\n");
  EXPECT_EQ(SafeMessage("\r"), "\\x0D");
  const std::string once = SafeMessage("a\xfe\nb\\xFF");
  EXPECT_EQ(SafeMessage(once), once);  // idempotent
  EXPECT_TRUE(IsUtf8(once));
}

TEST(ListFewTest, ListsAtMostSoManyAndCountsTheRest) {
  EXPECT_EQ(ListFew({}, 4), "");
  EXPECT_EQ(ListFew({"a", "b"}, 4), "a, b");
  EXPECT_EQ(ListFew({"a", "b", "c", "d", "e", "f"}, 4),
            "a, b, c, d and 2 more");
}

}  // namespace
}  // namespace memplan::base
