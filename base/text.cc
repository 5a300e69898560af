#include "base/text.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memplan::base {
namespace {

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') ||
         (c >= 'a' && c <= 'f');
}

// The length of the kept character (well-formed, IsNameChar) at text[i], or
// 0 when the byte at i is written as an escape.
size_t KeptLength(absl::string_view text, size_t i) {
  char32_t c = 0;
  const size_t len = Utf8Sequence(text, i, &c);
  return len > 0 && IsNameChar(c) ? len : 0;
}

// Whether the backslash at text[i] must be doubled: what follows it would
// otherwise read as an escape (another backslash, an escaped byte, or the
// characters "x" and two hex digits).
bool BackslashReadsAsEscape(absl::string_view text, size_t i) {
  const size_t next = i + 1;
  if (next >= text.size()) return false;
  if (text[next] == '\\' || KeptLength(text, next) == 0) return true;
  return text[next] == 'x' && next + 2 < text.size() &&
         IsHexDigit(text[next + 1]) && IsHexDigit(text[next + 2]);
}

void AppendEscapedByte(char byte, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const auto b = static_cast<unsigned char>(byte);
  const char escape[4] = {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
  out->append(escape, 4);
}

// SafeName (double_backslashes) or SafeText.
std::string Escape(absl::string_view raw, bool double_backslashes) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    const size_t len = KeptLength(raw, i);
    if (len == 0) {
      AppendEscapedByte(raw[i], &out);
      ++i;
      continue;
    }
    if (double_backslashes && raw[i] == '\\' &&
        BackslashReadsAsEscape(raw, i)) {
      out += '\\';
    }
    out.append(raw.data() + i, len);
    i += len;
  }
  return out;
}

}  // namespace

size_t Utf8Sequence(absl::string_view text, size_t i, char32_t* code_point) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[i + k]);
  };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  }
  // Unicode's table of well-formed byte sequences: the lead byte fixes the
  // length and the range of the second byte (no overlong forms, no
  // surrogates, nothing above U+10FFFF); later bytes are 80..BF.
  size_t len = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + len > text.size() || byte(1) < low || byte(1) > high) return 0;
  char32_t c = b0 & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    c = (c << 6) | (byte(k) & 0x3F);
  }
  *code_point = c;
  return len;
}

bool IsXmlChar(char32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

bool IsBidiControl(char32_t c) {
  return c == 0x061C || c == 0x200E || c == 0x200F ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

bool IsNameChar(char32_t c) {
  if (!IsXmlChar(c) || c < 0x20 || (c >= 0x7F && c <= 0x9F)) return false;
  // The line and paragraph separators end a line as a newline does.
  if (IsBidiControl(c) || c == 0x2028 || c == 0x2029) return false;
  return !(c >= 0xFDD0 && c <= 0xFDEF) && (c & 0xFFFE) != 0xFFFE;
}

std::string SafeName(absl::string_view raw) {
  return Escape(raw, /*double_backslashes=*/true);
}

namespace {

// Whether each of the 8 bytes of `w` is printable ASCII other than the
// backslash: the bytes every usual name is made of. Exact per byte, with
// no carry between bytes once all are below 0x80 (checked first).
bool AllPlainAscii(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101u;
  constexpr uint64_t kHigh = 0x8080808080808080u;
  const uint64_t high = w & kHigh;                       // >= 0x80
  const uint64_t control = ~(w + 0x60 * kOnes) & kHigh;  // < 0x20
  const uint64_t del = (w + kOnes) & kHigh;              // 0x7F
  const uint64_t slash = ~((w ^ ('\\' * kOnes)) + 0x7F * kOnes) & kHigh;
  return (high | control | del | slash) == 0;
}

// IsSafeName from byte i, all bytes before it plain ASCII (AllPlainAscii:
// none of them begins a sequence or escape reaching i or past it).
bool IsSafeNameFrom(absl::string_view text, size_t i) {
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0x20 && b < 0x7F && b != '\\') {
      ++i;
      continue;
    }
    const size_t len = KeptLength(text, i);
    if (len == 0 || (text[i] == '\\' && BackslashReadsAsEscape(text, i))) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

bool IsSafeName(absl::string_view text) {
  // Names are checked on every request: 8 bytes at a time while they are
  // plain ASCII (the last few padded with a plain byte), byte by byte from
  // the first word that is not.
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, 8);
    if (!AllPlainAscii(w)) return IsSafeNameFrom(text, i);
  }
  if (i < text.size()) {
    uint64_t w = 0x6161616161616161u;  // "aaaaaaaa"
    std::memcpy(&w, text.data() + i, text.size() - i);
    if (!AllPlainAscii(w)) return IsSafeNameFrom(text, i);
  }
  return true;
}

bool IsUtf8(absl::string_view text) {
  char32_t c = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8Sequence(text, i, &c);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string SafeText(absl::string_view raw) {
  return Escape(raw, /*double_backslashes=*/false);
}

std::string SafeMessage(absl::string_view raw) {
  if (IsSafeName(raw)) return std::string(raw);  // the usual case: no copy work
  std::string out;
  out.reserve(raw.size());
  size_t start = 0;
  for (size_t i = 0; i <= raw.size(); ++i) {
    if (i < raw.size() && raw[i] != '\n' && raw[i] != '\t') continue;
    out += SafeText(raw.substr(start, i - start));
    if (i < raw.size()) out += raw[i];
    start = i + 1;
  }
  return out;
}

std::string BoundedMessage(absl::string_view raw, size_t max_bytes) {
  const std::string message = SafeMessage(raw);
  std::string text(Utf8Prefix(message, max_bytes));
  if (message.size() > text.size()) {
    absl::StrAppend(&text, "... (", message.size() - text.size(),
                    " more bytes)");
  }
  return text;
}

absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back over continuation bytes to the start of the cut sequence.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return text.substr(0, end);
}

std::string ListFew(const std::vector<std::string>& names, size_t max_listed) {
  const size_t shown = std::min(names.size(), max_listed);
  std::string out = absl::StrJoin(names.begin(), names.begin() + shown, ", ");
  if (names.size() > shown) {
    absl::StrAppend(&out, " and ", names.size() - shown, " more");
  }
  return out;
}

void MakeUnique(std::vector<std::string>* names, absl::string_view separator) {
  absl::flat_hash_set<std::string> taken(names->begin(), names->end());
  absl::flat_hash_set<std::string> seen;
  for (std::string& name : *names) {
    if (seen.insert(name).second) continue;
    std::string unique;
    for (int k = 2;; ++k) {
      unique = absl::StrCat(name, separator, k);
      if (!taken.contains(unique)) break;
    }
    taken.insert(unique);
    seen.insert(unique);
    name = std::move(unique);
  }
}

}  // namespace memplan::base
