// What the CLI end-to-end tests share: running the real `memplan` binary,
// reading the JSON it prints, and a folder of input files for each test.
// REQUIRES: the test binary defines MEMPLAN_CLI_PATH.
//
//   class MyCliTest : public testing::SharedServerTest,
//                     public testing::TestFiles {};
//   TEST_F(MyCliTest, Plans) {
//     CommandResult r = testing::RunCli({"plan", Write("g.json", json)});
//     v1::PlanResponse p = testing::ParsePlanJson(r.out);
//   }
#ifndef MEMPLAN_TESTS_TESTING_CLI_H_
#define MEMPLAN_TESTS_TESTING_CLI_H_

#include <string>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.pb.h"
#include "tests/testing/files.h"
#include "tests/testing/process.h"

namespace memplan::testing {

// Runs `memplan args...` with `input` on its standard input.
inline CommandResult RunCli(const std::vector<std::string>& args,
                            const std::string& input = "",
                            double timeout_s = 120) {
  return RunCommand(MEMPLAN_CLI_PATH, args, input, timeout_s);
}

// The PlanResponse in `memplan plan --format json` output; a parse failure
// fails the test.
inline v1::PlanResponse ParsePlanJson(const std::string& json) {
  v1::PlanResponse r;
  auto s = google::protobuf::util::JsonStringToMessage(json, &r);
  EXPECT_TRUE(s.ok()) << s.ToString() << json.substr(0, 200);
  return r;
}

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_CLI_H_
