// A GoogleTest fixture base that starts one memplan-server on 127.0.0.1
// (port 0) for a whole test suite and stops it, by PID, after the suite.
// REQUIRES: the test binary defines MEMPLAN_SERVER_PATH.
#ifndef MEMPLAN_TESTS_TESTING_SHARED_SERVER_H_
#define MEMPLAN_TESTS_TESTING_SHARED_SERVER_H_

#include <signal.h>

#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace memplan::testing {

class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess(MEMPLAN_SERVER_PATH, {"--address=127.0.0.1:0"});
    ASSERT_GT(server_->port(), 0) << server_->first_line();
  }
  static void TearDownTestSuite() {
    server_->Stop(SIGTERM, 10);
    delete server_;
    server_ = nullptr;
  }
  static inline ServerProcess* server_ = nullptr;
};

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_SHARED_SERVER_H_
