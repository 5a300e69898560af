// PlanRemote and BenchmarkRemote against a real gRPC server on 127.0.0.1:0
// whose MemoryPlanner fails a set number of times (UNAVAILABLE, CANCELLED):
// the call is retried, and when every attempt fails the error keeps what
// the first one said (a server that shut down during the call) beside the
// last.
#include "client/remote.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.grpc.pb.h"

namespace memplan::client {
namespace {

using ::testing::HasSubstr;

// Answers its first `unavailable` calls as a server that shuts down is
// seen to: UNAVAILABLE with what it says when its shutdown cuts a call,
// then CANCELLED (a call that came as it closed), then UNAVAILABLE as a
// refused connection would be; then plans nothing and answers OK (with
// `invalid_after`, INVALID_ARGUMENT). With `invalid`, INVALID_ARGUMENT
// every time.
class FlakyPlanner final : public v1::MemoryPlanner::Service {
 public:
  FlakyPlanner(int unavailable, bool invalid, bool invalid_after)
      : unavailable_(unavailable),
        invalid_(invalid),
        invalid_after_(invalid_after) {}

  grpc::Status Plan(grpc::ServerContext*, const v1::PlanRequest*,
                    v1::PlanResponse* response) override {
    if (grpc::Status s = Answer(); !s.ok()) return s;
    response->set_arena_size_bytes(64);
    return grpc::Status::OK;
  }
  grpc::Status Benchmark(grpc::ServerContext*, const v1::BenchmarkRequest*,
                         v1::BenchmarkResponse* response) override {
    if (grpc::Status s = Answer(); !s.ok()) return s;
    response->set_arena_size_bytes(64);
    return grpc::Status::OK;
  }
  int calls() const { return calls_.load(); }

 private:
  grpc::Status Answer() {
    const int n = ++calls_;
    if (invalid_) return {grpc::StatusCode::INVALID_ARGUMENT, "bad graph"};
    if (n > unavailable_) {
      if (invalid_after_) {
        return {grpc::StatusCode::INVALID_ARGUMENT, "bad graph"};
      }
      return grpc::Status::OK;
    }
    if (n == 1) {
      return {grpc::StatusCode::UNAVAILABLE,
              "the server shut down during the call"};
    }
    if (n == 2) return {grpc::StatusCode::CANCELLED, "Cancelled"};
    return {grpc::StatusCode::UNAVAILABLE,
            "failed to connect: Connection refused"};
  }

  const int unavailable_;
  const bool invalid_;
  const bool invalid_after_;
  std::atomic<int> calls_{0};
};

class RemoteTest : public ::testing::Test {
 protected:
  // A server of a FlakyPlanner; returns its target.
  std::string Start(int unavailable, bool invalid = false,
                    bool invalid_after = false) {
    planner_ =
        std::make_unique<FlakyPlanner>(unavailable, invalid, invalid_after);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(planner_.get());
    server_ = builder.BuildAndStart();
    EXPECT_GT(port, 0);
    return absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<FlakyPlanner> planner_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(RemoteTest, UnavailableIsRetriedUntilAnAnswer) {
  const std::string target = Start(/*unavailable=*/2);
  absl::StatusOr<v1::PlanResponse> r =
      PlanRemote(target, v1::PlanRequest(), absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->arena_size_bytes(), 64);
  EXPECT_EQ(planner_->calls(), 3);
  absl::StatusOr<v1::BenchmarkResponse> b =
      BenchmarkRemote(target, v1::BenchmarkRequest(), absl::Seconds(30));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(planner_->calls(), 4);  // past the failures: answered at once
}

TEST_F(RemoteTest, EveryAttemptUnavailableKeepsTheFirstReason) {
  const std::string target = Start(/*unavailable=*/1000);
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlanResponse> r =
      PlanRemote(target, v1::PlanRequest(), absl::Seconds(30));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(),
            absl::StrCat("cannot reach memplan-server at ", target,
                         ": failed to connect: Connection refused (an earlier "
                         "attempt: the server shut down during the call)"));
  EXPECT_EQ(planner_->calls(), 5);
  // Four waits of 50, 100, 200 and 400 ms, each 80% to 120%.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(600));
}

TEST_F(RemoteTest, TheDeadlineBoundsTheRetries) {
  const std::string target = Start(/*unavailable=*/1000);
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlanResponse> r =
      PlanRemote(target, v1::PlanRequest(), absl::Milliseconds(120));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(planner_->calls(), 5);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// A retry that meets another error (here a server past the first
// attempt's shutdown answering INVALID_ARGUMENT) reports it with the
// first attempt's reason.
TEST_F(RemoteTest, ARetrysOwnErrorKeepsTheFirstReason) {
  const std::string target = Start(/*unavailable=*/1, /*invalid=*/false,
                                   /*invalid_after=*/true);
  absl::StatusOr<v1::PlanResponse> r =
      PlanRemote(target, v1::PlanRequest(), absl::Seconds(30));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "bad graph (an earlier attempt: the server shut down during the "
            "call)");
  EXPECT_EQ(planner_->calls(), 2);
}

TEST_F(RemoteTest, OtherErrorsAreNotRetried) {
  const std::string target = Start(/*unavailable=*/0, /*invalid=*/true);
  absl::StatusOr<v1::PlanResponse> r =
      PlanRemote(target, v1::PlanRequest(), absl::Seconds(30));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "bad graph");
  EXPECT_EQ(planner_->calls(), 1);
}

}  // namespace
}  // namespace memplan::client
