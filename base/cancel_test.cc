// The token and the work meter on their own; planner/cancel_test.cc checks
// that every planner stage stops soon after a token is cancelled.
#include "base/cancel.h"

#include <atomic>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace memplan::base {
namespace {

TEST(CancelTokenTest, NeverExpiresUntilCancelled) {
  CancelToken token;
  EXPECT_FALSE(token.Cancelled());
  token.Cancel();
  EXPECT_TRUE(token.Cancelled());
}

TEST(CancelTokenTest, DeadlineInThePastIsCancelled) {
  CancelToken past(absl::Now() - absl::Milliseconds(1));
  EXPECT_TRUE(past.Cancelled());
  CancelToken future(absl::Now() + absl::Hours(1));
  EXPECT_FALSE(future.Cancelled());
}

TEST(CancelTokenTest, ChildFollowsItsParentAndItsProbe) {
  CancelToken parent;
  std::atomic<bool> gone{false};
  CancelToken child(&parent, absl::InfiniteFuture(),
                    [&] { return gone.load(); });
  EXPECT_FALSE(child.Cancelled());
  gone = true;
  EXPECT_TRUE(child.Cancelled());
  gone = false;
  EXPECT_TRUE(child.Cancelled()) << "a cancelled token stays cancelled";

  CancelToken other(&parent, absl::InfiniteFuture());
  parent.Cancel();
  EXPECT_TRUE(other.Cancelled());
}

TEST(WorkMeterTest, StopsPastItsCapWithResourceExhausted) {
  WorkMeter meter(nullptr, 1000);
  EXPECT_FALSE(meter.Stop(999));
  EXPECT_TRUE(meter.Stop(2));
  EXPECT_TRUE(meter.capped());
  EXPECT_EQ(meter.StopStatus("sweep").code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(WorkMeterTest, StopsWhenTheTokenIsCancelledAtTheNextPoll) {
  CancelToken token;
  WorkMeter meter(&token);
  EXPECT_FALSE(meter.Stop(WorkMeter::kUnitsPerPoll));
  token.Cancel();
  EXPECT_FALSE(meter.Stop(1)) << "polls only every kUnitsPerPoll units";
  EXPECT_TRUE(meter.Stop(WorkMeter::kUnitsPerPoll));
  EXPECT_FALSE(meter.capped());
  EXPECT_EQ(meter.StopStatus("sweep").code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace memplan::base
