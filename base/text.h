// The one rule for text that comes from inputs: tensor, op, graph, buffer
// and memory pool names in requests and model files. Before a name reaches
// a response, a report or an emitted file it goes through SafeName, which
// keeps valid UTF-8 of printable characters as it is and writes every byte
// of anything else (invalid sequences, UTF-16 surrogates, overlong forms,
// code points above U+10FFFF, control characters and line separators,
// bidirectional formatting characters, noncharacters such as U+FFFE) as the
// four characters \xHH. A backslash that would read as the start of such an
// escape is doubled, so distinct names stay distinct and the original bytes can
// be read back. The result is a valid proto3 string, XML 1.0 text and (once
// quoted) JSON. Each output still escapes for its own grammar (markup, C
// identifiers); MakeUnique tells apart names that a narrower alphabet merged.
//
//   base::SafeName("v\xff");         // "v\\xFF": the characters v \ x F F
//   base::SafeName("conv/Relu:0");   // unchanged
//   std::vector<std::string> ids = {"SRAM", "SRAM", "SRAM_2"};
//   base::MakeUnique(&ids, "_");     // {"SRAM", "SRAM_3", "SRAM_2"}
#ifndef MEMPLAN_BASE_TEXT_H_
#define MEMPLAN_BASE_TEXT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace memplan::base {

// The length (1 to 4) of the well-formed UTF-8 sequence starting at
// text[i], with its code point in *code_point; 0 when the byte at i starts
// none: a stray continuation byte, a truncated sequence, an overlong form
// (C0 80, E0 80 80, ...), a surrogate (ED A0 80 ...) or a code point above
// U+10FFFF (F4 90 80 80, F5 ...). REQUIRES i < text.size().
size_t Utf8Sequence(absl::string_view text, size_t i, char32_t* code_point);

// A character XML 1.0 allows (its Char production): tab, newline, carriage
// return, U+0020-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF.
bool IsXmlChar(char32_t c);

// A bidirectional formatting character (U+061C, U+200E, U+200F,
// U+202A-U+202E, U+2066-U+2069): invisible, it reorders the text around it
// as shown (a name could make a C comment, a terminal line or a report
// show other text than it holds; GCC warns of one in a source file).
bool IsBidiControl(char32_t c);

// A character SafeName keeps as it is: an XML 1.0 character that is not a
// control (C0, DEL, C1: tab and newline included), a line or paragraph
// separator (U+2028, U+2029), a bidirectional formatting character nor a
// noncharacter (U+FDD0-U+FDEF, U+xFFFE and U+xFFFF in every plane).
bool IsNameChar(char32_t c);

// `raw` with every byte that is not part of a kept character (IsNameChar,
// well-formed UTF-8) written as \xHH (two upper-case hex digits), and every
// backslash followed by a backslash, by "x" and two hex digits or by such
// an escape written as \\. Injective; identity on names of kept characters
// that hold no such backslash.
std::string SafeName(absl::string_view raw);

// Whether SafeName(text) == text (no copy made).
bool IsSafeName(absl::string_view text);

// Whether `text` is well-formed UTF-8 (Utf8Sequence at every character),
// as protobuf requires of a proto3 string on the wire and JSON of a file.
bool IsUtf8(absl::string_view text);

// For messages that quote names (warnings): bytes that are not part of a
// kept character written as \xHH, backslashes left as they are. Valid text
// goes out unchanged (idempotent), but two texts may map to one.
std::string SafeText(absl::string_view raw);

// For a whole message (an error status, a warning) that may quote raw names
// anywhere: SafeText, but tabs and newlines kept (messages may span lines).
std::string SafeMessage(absl::string_view raw);

// The most bytes of a message BoundedMessage keeps: a status fits gRPC's
// metadata limits and a terminal's screen, whatever the input quoted.
inline constexpr size_t kMaxMessageBytes = 2048;

// SafeMessage(raw), cut on a character boundary to at most `max_bytes`
// with "... (N more bytes)" appended where it was cut. What every error a
// user sees goes through (the server's status, the CLI's stderr, the
// Python module's exceptions): a message may quote a name of any length.
std::string BoundedMessage(absl::string_view raw,
                           size_t max_bytes = kMaxMessageBytes);

// The longest prefix of `text` of at most `max_bytes` that does not end
// inside a UTF-8 sequence.
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

// "a, b, c, d and 5 more": the first `max_listed` of `names` joined by
// ", ", and how many were left out. For messages that would otherwise list
// every tensor of a model.
std::string ListFew(const std::vector<std::string>& names, size_t max_listed);

// Makes the names of `names` pairwise distinct: a name no earlier entry
// holds is kept; a repeated one gets `separator` and the smallest number
// from 2 up that makes a name no entry holds ("a", "a" -> "a", "a#2"). The
// result depends on the list alone (stable from run to run).
void MakeUnique(std::vector<std::string>* names, absl::string_view separator);

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_TEXT_H_
