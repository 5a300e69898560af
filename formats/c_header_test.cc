#include "formats/tflite_writer.h"

#include "gtest/gtest.h"

namespace memplan::formats {
namespace {
TEST(TfliteWriterTest, Placeholder) {}
}  // namespace
}  // namespace memplan::formats
