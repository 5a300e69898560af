// Helpers for the tests of the pictures: counting what a drawing holds.
//
//   EXPECT_EQ(testing::Occurrences(svg, "<rect"), 8);
#ifndef MEMPLAN_PICTURES_TESTING_TEXT_H_
#define MEMPLAN_PICTURES_TESTING_TEXT_H_

#include <string>

namespace memplan::formats::testing {

// How many times `what` occurs in `text`, overlapping occurrences counted.
inline int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace memplan::formats::testing

#endif  // MEMPLAN_PICTURES_TESTING_TEXT_H_
