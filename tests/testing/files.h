// A folder of files for a test, removed with it: a fixture mix-in, or a
// function-local static for the files of a whole test program.
//
//   class MyTest : public ::testing::Test, public testing::TestFiles {};
//   TEST_F(MyTest, Reads) { Parse(Write("g.json", json)); }
#ifndef MEMPLAN_TESTS_TESTING_FILES_H_
#define MEMPLAN_TESTS_TESTING_FILES_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace memplan::testing {

// A fresh folder under the test temporary folder, removed (with what is
// in it) when this object goes, and the files a test writes into it.
class TestFiles {
 public:
  TestFiles() {
    std::string pattern = ::testing::TempDir() + "memplan_test_XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
    EXPECT_FALSE(dir_.empty()) << "mkdtemp " << pattern;
  }
  ~TestFiles() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  TestFiles(const TestFiles&) = delete;
  TestFiles& operator=(const TestFiles&) = delete;

  // Writes `bytes` to `name` in the folder; returns its path.
  std::string Write(const std::string& name, const std::string& bytes) const {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // The path `name` would have in the folder.
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_FILES_H_
