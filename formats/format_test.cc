#include "formats/format.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::formats {
namespace {

using ::testing::HasSubstr;

// A few bytes laid out as an ONNX ModelProto: ir_version 8, then a graph.
std::string OnnxHead() { return std::string("\x08\x08\x3a\x02\x0a\x00", 6); }

// A flatbuffer with TFLite's file identifier at bytes 4..7.
std::string TfliteHead() {
  return std::string("\x1c\x00\x00\x00TFL3\x00\x00", 10);
}

TEST(FormatTest, NamesRoundTrip) {
  for (Format f :
       {Format::kJson, Format::kCsv, Format::kOnnx, Format::kTflite}) {
    EXPECT_EQ(*FormatFromName(FormatName(f)), f);
  }
  EXPECT_EQ(*FormatFromName("TFLite"), Format::kTflite);
  EXPECT_THAT(std::string(FormatFromName("yaml").status().message()),
              HasSubstr("unknown input format 'yaml'; known: json, csv, "
                        "onnx, tflite"));
}

TEST(FormatTest, ExtensionThenContent) {
  EXPECT_EQ(*DetectFormat("m.onnx", "", ""), Format::kOnnx);
  EXPECT_EQ(*DetectFormat("m.TFLITE", "", ""), Format::kTflite);
  EXPECT_EQ(*DetectFormat("x.csv", "{", ""), Format::kCsv);
  EXPECT_EQ(*DetectFormat("x.csv", "", "json"), Format::kJson);
  EXPECT_EQ(*DetectFormat("model.bin", TfliteHead(), ""), Format::kTflite);
  EXPECT_EQ(*DetectFormat("model", OnnxHead(), ""), Format::kOnnx);
  EXPECT_EQ(*DetectFormat("-", "\n  {\"graph\": {}}", ""), Format::kJson);
  EXPECT_EQ(*DetectFormat("trace", "id,lower,upper,size\n1,0,1,4\n", ""),
            Format::kCsv);
}

// A protobuf varint.
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}

TEST(FormatTest, OnnxOverTheSniffedPrefixIsStillOnnx) {
  // ir_version 8, a 5,000-byte producer, then a graph: the second field's
  // length runs past the first 4 KiB.
  const std::string producer = "\x08\x08\x12" + Varint(5000) +
                               std::string(5000, 'p') +
                               std::string("\x3a\x02\x0a\x00", 4);
  EXPECT_EQ(*DetectFormat("model", producer, ""), Format::kOnnx);
  EXPECT_EQ(*DetectFormat("-", producer, ""), Format::kOnnx);
  // A graph of 1 MiB (its initializers), after the IR version.
  const std::string big = "\x08\x08\x3a" + Varint(1 << 20) +
                          std::string(1 << 20, '\x01') +
                          std::string("\x42\x00", 2);
  EXPECT_EQ(*DetectFormat("-", big, ""), Format::kOnnx);
  // A length past the end of the file is still not ONNX.
  EXPECT_FALSE(DetectFormat("-", big.substr(0, big.size() - 10), "").ok());
}

TEST(FormatTest, UnsupportedContentSaysWhatItLooksLike) {
  auto message = [](absl::string_view bytes) {
    return std::string(DetectFormat("in", bytes, "").status().message());
  };
  EXPECT_THAT(message("\x89PNG\r\n\x1a\n"),
              HasSubstr("in: unsupported input format: it looks like a PNG "
                        "image; memplan reads json, csv, onnx, tflite"));
  EXPECT_THAT(message(""), HasSubstr("an empty file"));
  EXPECT_THAT(message(std::string("\x01\x02\x03\x00", 4)),
              HasSubstr("binary data"));
  EXPECT_THAT(message("hello world\n"), HasSubstr("neither JSON nor CSV"));
  EXPECT_EQ(DetectFormat("-", "zz", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(DetectFormat("-", "zz", "").status().message()),
              HasSubstr("<stdin>"));
}

}  // namespace
}  // namespace memplan::formats
