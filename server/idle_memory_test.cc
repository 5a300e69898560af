#include "server/idle_memory.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace memplan::server {
namespace {

// Waits, bounded, until `returner` has given memory back `count` times.
bool ReturnsReach(const IdleMemoryReturner& returner, int64_t count) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (returner.returns() < count && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  return returner.returns() >= count;
}

TEST(IdleMemoryReturnerTest, ReturnsTwiceWhenIdleAndNotBeforeACallEnds) {
  IdleMemoryReturner returner(absl::Milliseconds(50));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(returner.returns(), 0);  // no call has ended yet
  returner.CallStarted();
  returner.CallsEnded();
  EXPECT_TRUE(ReturnsReach(returner, 1));  // after 50 ms
  EXPECT_TRUE(ReturnsReach(returner, 2));  // after 500 ms
  absl::SleepFor(absl::Milliseconds(700));
  EXPECT_EQ(returner.returns(), 2);  // then nothing until the next call
  returner.CallStarted();
  returner.CallsEnded();
  EXPECT_TRUE(ReturnsReach(returner, 4));
}

TEST(IdleMemoryReturnerTest, ACallThatStartsInTheQuietTimeHoldsTheReturn) {
  IdleMemoryReturner returner(absl::Seconds(1));
  returner.CallsEnded();
  returner.CallStarted();  // busy again well within the second
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_EQ(returner.returns(), 0);
  returner.CallsEnded();
  EXPECT_TRUE(ReturnsReach(returner, 1));
}

TEST(IdleMemoryReturnerTest, StopsPromptlyWithAReturnPending) {
  const absl::Time start = absl::Now();
  {
    IdleMemoryReturner returner(absl::Seconds(60));
    returner.CallsEnded();
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace memplan::server
