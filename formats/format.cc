#include "formats/format.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace memplan::formats {
namespace {

constexpr Format kAll[] = {Format::kJson, Format::kCsv, Format::kOnnx,
                           Format::kTflite};
// Sniffing text and magic numbers reads no further than this; ONNX, a
// protobuf with no magic number, is recognised from its first top-level
// fields, whose lengths may run anywhere in the file.
constexpr size_t kSniffBytes = 4096;

// Reads a protobuf varint at `*at`; false when it runs off the end.
bool ReadVarint(absl::string_view bytes, size_t* at, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *at < bytes.size(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(bytes[(*at)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Whether `number` with wire type `wire` is a field an ONNX ModelProto has
// (ir_version, opset_import, producer, domain, model_version, doc_string,
// graph, metadata_props, training_info, functions).
bool ModelProtoField(uint64_t number, uint64_t wire) {
  if (number == 1 || number == 5) return wire == 0;
  const bool message = number == 2 || number == 3 || number == 4 ||
                       number == 6 || number == 7 || number == 8 ||
                       number == 14 || number == 20 || number == 25;
  return message && wire == 2;
}

// The first top-level fields parse as an ONNX ModelProto's: known numbers,
// right wire types, lengths inside the file, a graph or an IR version.
// `bytes` is the whole file: a field (the graph, its initializers) may run
// past any fixed prefix. Reads only tags and lengths, at most 8 fields.
bool LooksLikeOnnx(absl::string_view bytes) {
  size_t at = 0;
  bool anchored = false;
  for (int field = 0; field < 8 && at < bytes.size(); ++field) {
    uint64_t tag = 0, value = 0;
    if (!ReadVarint(bytes, &at, &tag)) return false;
    const uint64_t number = tag >> 3, wire = tag & 7;
    if (!ModelProtoField(number, wire)) return false;
    if (!ReadVarint(bytes, &at, &value)) return false;
    anchored = anchored || number == 1 || number == 7;
    if (wire == 2) {
      if (value > bytes.size() - at) return false;
      at += value;
    }
  }
  return anchored;
}

bool LooksLikeTflite(absl::string_view bytes) {
  return bytes.size() >= 8 && bytes.substr(4, 4) == "TFL3";
}

// What binary data that is none of ours looks like, for the message.
std::string Describe(absl::string_view bytes) {
  if (bytes.empty()) return "an empty file";
  if (absl::StartsWith(bytes, "\x89PNG")) return "a PNG image";
  if (absl::StartsWith(bytes, "PK\x03\x04")) return "a zip archive";
  if (absl::StartsWith(bytes, "\x1f\x8b")) return "gzip data";
  if (absl::StartsWith(bytes,
                       "\x7f"
                       "ELF"))
    return "an executable (ELF)";
  if (absl::StartsWith(bytes, "%PDF")) return "a PDF document";
  for (char c : bytes) {
    if (c == 0 || (static_cast<unsigned char>(c) < 0x20 && c != '\n' &&
                   c != '\r' && c != '\t')) {
      return "binary data";
    }
  }
  return "text that is neither JSON nor CSV";
}

// A first line of printable text with a comma: a CSV header.
bool LooksLikeCsv(absl::string_view text) {
  const absl::string_view line = text.substr(0, text.find('\n'));
  if (line.find(',') == absl::string_view::npos) return false;
  for (char c : line) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c)) && c != '\r' &&
        c != '\t') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::string_view FormatName(Format format) {
  switch (format) {
    case Format::kJson:
      return "json";
    case Format::kCsv:
      return "csv";
    case Format::kOnnx:
      return "onnx";
    case Format::kTflite:
      return "tflite";
  }
  return "json";
}

std::string FormatNames() {
  std::string names;
  for (Format f : kAll)
    absl::StrAppend(&names, names.empty() ? "" : ", ", FormatName(f));
  return names;
}

absl::StatusOr<Format> FormatFromName(absl::string_view name) {
  for (Format f : kAll) {
    if (absl::EqualsIgnoreCase(name, FormatName(f))) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown input format '",
                                                 name.substr(0, 64),
                                                 "'; known: ", FormatNames()));
}

absl::StatusOr<Format> SniffFormat(absl::string_view bytes,
                                   absl::string_view name) {
  const absl::string_view head = bytes.substr(0, kSniffBytes);
  if (LooksLikeTflite(head)) return Format::kTflite;
  absl::string_view text = head;
  if (absl::StartsWith(text, "\xef\xbb\xbf")) text.remove_prefix(3);  // BOM
  text = absl::StripLeadingAsciiWhitespace(text);
  if (absl::StartsWith(text, "{") || absl::StartsWith(text, "[")) {
    return Format::kJson;
  }
  if (LooksLikeOnnx(bytes)) return Format::kOnnx;
  if (LooksLikeCsv(text)) return Format::kCsv;
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": unsupported input format: it looks like ", Describe(head),
      "; memplan reads ", FormatNames(), " (see --input_format)"));
}

absl::StatusOr<Format> DetectFormat(absl::string_view path,
                                    absl::string_view bytes,
                                    absl::string_view explicit_name) {
  if (!explicit_name.empty()) return FormatFromName(explicit_name);
  for (Format f : kAll) {
    if (absl::EndsWithIgnoreCase(path, absl::StrCat(".", FormatName(f)))) {
      return f;
    }
  }
  return SniffFormat(bytes, path == "-" ? "<stdin>" : path);
}

}  // namespace memplan::formats
