// The Redis store against servers that misbehave: a fake Redis on
// 127.0.0.1 (port 0) that answers PING and GET as told. (A real Redis is
// tests/cache_e2e_test.cc's.) Whatever it sends, a call ends within the
// store's timeout, reads no more than its bound, and its text cannot start
// a line of the log.
#include "server/redis_store.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/process_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::server {
namespace {

using ::testing::HasSubstr;

// How the fake answers.
enum class Mode {
  kForgedError,  // PING: an error whose text holds a newline and a line
  kDrip,         // GET: a 2,000-byte value, one byte every 3 ms
  kLarge,        // GET: a 100,000-byte value at once
  kNoRead,       // after PING, reads nothing more (a write fills the socket)
  kArray,        // GET: an array of 100,000 integers (not a value)
};

// A fake Redis on 127.0.0.1, one thread per connection; every socket is
// closed and every thread joined when it goes.
class FakeRedis {
 public:
  explicit FakeRedis(Mode mode) : mode_(mode) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener_, 16), 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~FakeRedis() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    acceptor_.join();
    for (std::thread& t : connections_) t.join();
  }
  std::string url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

 private:
  void Accept() {
    for (;;) {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0 || stop_) {
        if (fd >= 0) ::close(fd);
        return;
      }
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  void Send(int fd, const std::string& text) {
    (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  }
  void Serve(int fd) {
    timeval tv{0, 100'000};  // wakes to see stop_
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string in;
    char buf[4096];
    while (!stop_) {
      const ssize_t got = ::recv(fd, buf, sizeof buf, 0);
      if (got == 0) break;
      if (got < 0) continue;  // the timeout: look at stop_
      in.append(buf, static_cast<size_t>(got));
      if (absl::StrContains(in, "PING")) {
        in.clear();
        Send(fd, mode_ == Mode::kForgedError
                     ? "-ERR nope\nmemplan-server: FORGED reachable\r\n"
                     : "+PONG\r\n");
        if (mode_ == Mode::kNoRead) {
          while (!stop_) absl::SleepFor(absl::Milliseconds(10));
        }
      } else if (absl::StrContains(in, "GET")) {
        in.clear();
        if (mode_ == Mode::kArray) {
          std::string items = "*100000\r\n";
          for (int k = 0; k < 100000; ++k) items += ":1\r\n";
          Send(fd, items);
        } else if (mode_ == Mode::kLarge) {
          Send(fd,
               absl::StrCat("$100000\r\n", std::string(100000, 'x'), "\r\n"));
        } else {
          Send(fd, "$2000\r\n");
          for (int k = 0; k < 2000 && !stop_; ++k) {
            Send(fd, "x");
            absl::SleepFor(absl::Milliseconds(3));
          }
          Send(fd, "\r\n");
        }
      }
    }
    ::close(fd);
  }

  const Mode mode_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // the acceptor's alone until stop
};

RedisStoreOptions Options() {
  RedisStoreOptions o;
  o.timeout = absl::Milliseconds(100);
  o.connections = 1;
  return o;
}

// A Redis that answers a byte at a time holds a call no longer than the
// timeout: the whole call is bounded, not each read (6 s otherwise).
TEST(RedisStoreTest, ADrippingReplyEndsWithinTheTimeout) {
  FakeRedis fake(Mode::kDrip);
  auto store = RedisStore::Open(fake.url(), Options());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->WaitUntilUp(absl::Seconds(10)));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::optional<std::string>> got = (*store)->Get("k");
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("timed out reading"));
  EXPECT_LT(took, absl::Seconds(1));  // 100 ms and a loaded machine's slack
}

// A reply is read up to the bound, whatever the server sends; a larger
// entry is not stored either.
TEST(RedisStoreTest, AReplyOverTheBoundFailsItsCall) {
  FakeRedis fake(Mode::kLarge);
  RedisStoreOptions o = Options();
  o.timeout = absl::Seconds(5);
  o.max_reply_bytes = 4096;
  auto store = RedisStore::Open(fake.url(), o);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->WaitUntilUp(absl::Seconds(10)));
  absl::StatusOr<std::optional<std::string>> got = (*store)->Get("k");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("a reply over 4096 bytes"));
  absl::Status put = (*store)->Put("k", std::string(5000, 'x'));
  EXPECT_EQ(put.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(put.message(), HasSubstr("5000 bytes"));
}

// A server that answers GET with an array (not Redis, or a hostile one)
// would have hiredis build an object per element, 100 times the bytes
// read: refused at its first byte.
TEST(RedisStoreTest, AnArrayReplyIsRefused) {
  FakeRedis fake(Mode::kArray);
  RedisStoreOptions o = Options();
  o.timeout = absl::Seconds(5);
  auto store = RedisStore::Open(fake.url(), o);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->WaitUntilUp(absl::Seconds(10)));
  absl::StatusOr<std::optional<std::string>> got = (*store)->Get("k");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(got.status().message(),
              HasSubstr("an array reply where a value was asked"));
}

// A Redis that stops reading holds a store no longer than the timeout
// either: a write waits for room only as long as the call has left (the
// socket's own timeout would let each write wait the whole timeout).
TEST(RedisStoreTest, AWriteNobodyReadsEndsWithinTheTimeout) {
  FakeRedis fake(Mode::kNoRead);
  RedisStoreOptions o = Options();
  o.max_reply_bytes = int64_t{64} << 20;
  auto store = RedisStore::Open(fake.url(), o);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->WaitUntilUp(absl::Seconds(10)));
  const std::string value(32 << 20, 'x');
  const absl::Time start = absl::Now();
  absl::Status put = (*store)->Put("k", value);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(put.code(), absl::StatusCode::kUnavailable) << put;
  EXPECT_THAT(put.message(), HasSubstr("timed out writing"));
  // 100 ms, the copies of the 32 MB into hiredis' command (into fresh
  // pages) and a loaded machine's slack; a write without the call's
  // deadline would wait for ever. A sanitizer's allocator makes those
  // copies far slower: 1.3 s once with a busy loop beside ctest -j2.
  EXPECT_LT(took, absl::Seconds(base::kSanitizerAllocator ? 4 : 1));
}

// What a Redis answers reaches the log escaped: its newline cannot start
// a line that reads as the server's own.
TEST(RedisStoreTest, ReplyTextCannotForgeALineOfTheLog) {
  FakeRedis fake(Mode::kForgedError);
  ::testing::internal::CaptureStderr();
  {
    std::atomic<bool> told{false};
    RedisStoreOptions o = Options();
    o.on_change = [&told](bool) { told = true; };
    auto store = RedisStore::Open(fake.url(), o);
    ASSERT_TRUE(store.ok()) << store.status();
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (!told && absl::Now() < end) absl::SleepFor(absl::Milliseconds(5));
    EXPECT_TRUE(told);
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("nope\\x0Amemplan-server: FORGED reachable)"));
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    EXPECT_FALSE(absl::StartsWith(line, "memplan-server: FORGED")) << log;
  }
}

// A URL with credentials is refused (no AUTH, no TLS), without its
// secret in the message that goes to the log.
TEST(RedisStoreTest, CredentialsAreRefusedWithoutEchoingThem) {
  auto store = RedisStore::Open("redis://user:s3cret@127.0.0.1:6379", {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("'redis://***@127.0.0.1"));
  EXPECT_THAT(store.status().message(), ::testing::Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace memplan::server
