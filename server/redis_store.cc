#include "server/redis_store.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/sha256.h"
#include "base/text.h"

namespace memplan::server {
namespace {

constexpr char kKeyPrefix[] = "memplan:plan:";
// A bulk reply's framing around its bytes ("$<length>\r\n", "\r\n").
constexpr size_t kReplyFraming = 32;
// How often a quiet store checks a connection (PING), so that a Redis that
// went away while no call used it is reported, and its dead connections
// are remade before the next call needs one.
constexpr absl::Duration kIdleCheck = absl::Seconds(1);

// "redis://HOST:PORT" -> host and port; false for anything else.
bool ParseUrl(absl::string_view url, std::string* host, int* port) {
  if (!absl::ConsumePrefix(&url, "redis://")) return false;
  if (absl::EndsWith(url, "/")) url.remove_suffix(1);
  const size_t colon = url.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  absl::string_view h = url.substr(0, colon);
  if (absl::StartsWith(h, "[") && absl::EndsWith(h, "]")) {
    h = h.substr(1, h.size() - 2);  // [::1]
  }
  if (h.empty() || absl::StrContains(h, "/") || absl::StrContains(h, "@")) {
    return false;
  }
  if (!absl::SimpleAtoi(url.substr(colon + 1), port) || *port <= 0 ||
      *port > 65535) {
    return false;
  }
  *host = std::string(h);
  return true;
}

// The reply's text.
std::string ReplyText(const redisReply* r) {
  return r->str != nullptr ? std::string(r->str, r->len) : std::string();
}

// A reply's text quoted in an error or the log: whatever sent it, it cannot
// start a line of its own (the text rule) nor fill the log.
std::string QuotedReply(const std::string& text) {
  constexpr size_t kMaxQuoted = 256;
  return base::SafeText(base::Utf8Prefix(text, kMaxQuoted));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(
    const std::string& url, const RedisStoreOptions& options) {
  std::string host;
  int port = 0;
  if (!ParseUrl(url, &host, &port)) {
    // Credentials (redis://user:secret@host) are not supported, and not
    // echoed into the log either.
    std::string shown = url;
    const size_t scheme = shown.find("//"), at = shown.rfind('@');
    if (scheme != std::string::npos && at != std::string::npos && at > scheme) {
      shown.replace(scheme + 2, at - scheme - 2, "***");
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--cache: expected memory, off or redis://HOST:PORT (no password or "
        "TLS: keep Redis on a private network), got '",
        base::SafeText(shown), "'"));
  }
  return std::unique_ptr<RedisStore>(
      new RedisStore(url, std::move(host), port, options));
}

RedisStore::RedisStore(std::string url, std::string host, int port,
                       const RedisStoreOptions& options)
    : url_(std::move(url)),
      host_(std::move(host)),
      port_(port),
      options_(options) {
  connector_ = std::thread([this] { Connector(); });
}

RedisStore::~RedisStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  connector_.join();
  absl::MutexLock lock(&mu_);
  for (redisContext* c : idle_) redisFree(c);
  idle_.clear();
}

bool RedisStore::up() const {
  absl::MutexLock lock(&mu_);
  return up_;
}

bool RedisStore::WaitUntilUp(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&up_), timeout);
}

redisContext* RedisStore::Connect(std::string* error) const {
  const timeval tv = absl::ToTimeval(options_.timeout);
  redisContext* c = redisConnectWithTimeout(host_.c_str(), port_, tv);
  if (c == nullptr) {
    *error = "cannot allocate a connection";
    return nullptr;
  }
  if (c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    const bool pong =
        r != nullptr && r->type == REDIS_REPLY_STATUS && ReplyText(r) == "PONG";
    if (r != nullptr && !pong) *error = "PING: " + QuotedReply(ReplyText(r));
    if (r != nullptr) freeReplyObject(r);
    if (pong) return c;
  }
  if (error->empty()) *error = c->errstr[0] != '\0' ? c->errstr : "no reply";
  redisFree(c);
  return nullptr;
}

void RedisStore::SetUp(bool up, const std::string& why) {
  if (up == up_ && (up || logged_down_)) return;
  up_ = up;
  if (up) {
    std::fprintf(stderr, "memplan-server: plan cache: %s reachable%s\n",
                 url_.c_str(), logged_down_ ? " again" : "");
  } else {
    logged_down_ = true;
    std::fprintf(stderr,
                 "memplan-server: plan cache: %s unreachable (%s); Plan calls "
                 "go on without it, reconnecting with backoff\n",
                 url_.c_str(), why.c_str());
  }
  if (options_.on_change) options_.on_change(up);
}

void RedisStore::Connector() {
  absl::Duration backoff = options_.min_backoff;
  const auto needed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || open_ < options_.connections;
  };
  mu_.Lock();
  while (!stopping_) {
    if (!mu_.AwaitWithTimeout(absl::Condition(&needed), kIdleCheck)) {
      CheckIdle();
      continue;
    }
    if (stopping_) break;
    mu_.Unlock();
    std::string error;
    redisContext* c = Connect(&error);
    mu_.Lock();
    if (c != nullptr) {
      idle_.push_back(c);
      ++open_;
      backoff = options_.min_backoff;
      SetUp(true, "");
      continue;
    }
    if (open_ == 0) SetUp(false, error);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  mu_.Unlock();
}

void RedisStore::CheckIdle() {
  if (idle_.empty()) return;
  redisContext* c = idle_.back();
  idle_.pop_back();
  mu_.Unlock();
  auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
  const int error = errno;
  Failure failure = Failure::kNone;
  if (r == nullptr) {
    // The socket's own timeout (redisSetTimeout) ends a PING unanswered.
    failure =
        c->err == REDIS_ERR_IO && (error == EAGAIN || error == EWOULDBLOCK)
            ? Failure::kTimeout
            : Failure::kBroken;
  }
  if (r != nullptr) freeReplyObject(r);
  Release(c, failure, "no answer to PING");
  mu_.Lock();
}

redisContext* RedisStore::Acquire(absl::Time deadline) {
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !idle_.empty() || open_ == 0 || stopping_;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (idle_.empty()) return nullptr;
  redisContext* c = idle_.back();
  idle_.pop_back();
  return c;
}

void RedisStore::Release(redisContext* context, Failure failure,
                         const std::string& reason) {
  if (failure == Failure::kNone) {
    absl::MutexLock lock(&mu_);
    idle_.push_back(context);
    return;
  }
  // A timeout (or a reply too large) leaves a reply in flight: this
  // connection is done, the others are not. Anything else (the server
  // closed the connection, a reset) reached the same server as the idle
  // ones, which have most likely failed too: closed now, so that no call
  // waits on them (the connector remakes them, at once if the server is
  // fine).
  const bool timeout = failure == Failure::kTimeout;
  const std::string why = context->errstr[0] != '\0' ? context->errstr : reason;
  redisFree(context);
  std::vector<redisContext*> idle;
  {
    absl::MutexLock lock(&mu_);
    if (!timeout) idle.swap(idle_);
    open_ -= 1 + static_cast<int>(idle.size());
    if (open_ == 0) SetUp(false, why);
  }
  for (redisContext* c : idle) redisFree(c);
}

namespace {

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT) or `deadline`
// passes; false on the deadline. An error or hang-up counts as ready: the
// read or write that follows reports it.
bool WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
        60'000));
    const int got = ::poll(&p, 1, ms);
    if (got > 0) return true;
    if (got < 0 && errno != EINTR) return true;  // the read reports it
  }
}

}  // namespace

absl::StatusOr<RedisStore::Reply> RedisStore::Command(
    const std::vector<std::string>& args) {
  // The timeout bounds the whole call (the wait for a connection, the
  // write, every read): a Redis that answers a byte at a time holds a
  // call no longer than one that does not answer.
  const absl::Time deadline = absl::Now() + options_.timeout;
  redisContext* c = Acquire(deadline);
  if (c == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("redis ", url_, ": no connection within the timeout"));
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  const auto fail = [&](Failure failure, const std::string& why) {
    Release(c, failure, why);
    return absl::UnavailableError(absl::StrCat("redis ", url_, ": ", why));
  };
  if (redisAppendCommandArgv(c, static_cast<int>(args.size()), argv.data(),
                             lengths.data()) != REDIS_OK) {
    return fail(Failure::kBroken, c->errstr);
  }
  for (int done = 0; !done;) {
    if (!WaitFor(c->fd, POLLOUT, deadline)) {
      return fail(Failure::kTimeout, "timed out writing");
    }
    // A write on this blocking socket waits for room up to its send
    // timeout: what is left of the call's.
    const absl::Duration left =
        std::max(deadline - absl::Now(), absl::Milliseconds(1));
    if (redisSetTimeout(c, absl::ToTimeval(left)) != REDIS_OK) {
      return fail(Failure::kBroken, c->errstr);
    }
    errno = 0;
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      const bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
      return fail(timed_out ? Failure::kTimeout : Failure::kBroken,
                  timed_out ? "timed out writing" : c->errstr);
    }
  }
  // Back to the store's timeout, which the connector's PING relies on.
  if (redisSetTimeout(c, absl::ToTimeval(options_.timeout)) != REDIS_OK) {
    return fail(Failure::kBroken, c->errstr);
  }
  void* raw = nullptr;
  size_t read = 0;  // bytes of this reply read so far
  for (;;) {
    if (redisGetReplyFromReader(c, &raw) != REDIS_OK) {
      return fail(Failure::kBroken, c->errstr);
    }
    if (raw != nullptr) break;
    // The bytes of a reply still coming: bounded, whatever the server
    // sends (an entry and its reply's framing are never larger; Put keeps
    // none that is). Counted as read, not as buffered: the reader drops
    // what it parsed, while the reply it builds grows.
    if (read > static_cast<size_t>(options_.max_reply_bytes) + kReplyFraming) {
      return fail(Failure::kTimeout,
                  absl::StrCat("a reply over ", options_.max_reply_bytes,
                               " bytes (--cache_max_entry_bytes)"));
    }
    if (!WaitFor(c->fd, POLLIN, deadline)) {
      return fail(Failure::kTimeout, "timed out reading");
    }
    const size_t before = c->reader->len;
    if (redisBufferRead(c) != REDIS_OK) {
      return fail(Failure::kBroken, c->errstr);
    }
    // GET, SET and DEL answer one value: an array (a server that is not
    // Redis, or a hostile one) would build a reply object per element.
    if (read == 0 && c->reader->len > c->reader->pos &&
        c->reader->buf[c->reader->pos] == '*') {
      return fail(Failure::kBroken, "an array reply where a value was asked");
    }
    read += c->reader->len - before;
  }
  auto* r = static_cast<redisReply*>(raw);
  Reply reply{r->type, ReplyText(r)};
  freeReplyObject(r);
  // Bytes past the reply (a server that sent more than it was asked for)
  // would be read as the next call's reply: the connection is done.
  const bool extra = c->reader != nullptr && c->reader->len > c->reader->pos;
  Release(c, extra ? Failure::kTimeout : Failure::kNone, "bytes past a reply");
  if (reply.type == REDIS_REPLY_ERROR) {  // e.g. OOM with noeviction
    return absl::UnavailableError(
        absl::StrCat("redis ", url_, ": ", QuotedReply(reply.text)));
  }
  return reply;
}

namespace {

// The tag of an entry under `secret`: HMAC-SHA256 of the key (64 hex
// digits: fixed length, so the two cannot run into each other) and the
// entry's bytes.
std::string EntryTag(const std::string& secret, const std::string& key,
                     absl::string_view entry) {
  const base::Sha256::Digest d =
      base::HmacSha256(secret, absl::StrCat(key, entry));
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}
constexpr size_t kTagBytes = 32;

}  // namespace

absl::StatusOr<std::optional<std::string>> RedisStore::Get(
    const std::string& key) {
  absl::StatusOr<Reply> r = Command({"GET", kKeyPrefix + key});
  if (!r.ok()) return r.status();
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type != REDIS_REPLY_STRING) {
    return absl::InternalError("redis: GET answered something else");
  }
  if (options_.secret.empty()) return std::move(r->text);
  // Signed: the tag first, then the entry. Without a valid tag it reads
  // as an empty entry, which the cache refuses, counts and drops.
  const absl::string_view text = r->text;
  if (text.size() < kTagBytes ||
      !base::ConstantTimeEquals(
          text.substr(0, kTagBytes),
          EntryTag(options_.secret, key, text.substr(kTagBytes)))) {
    return std::string();
  }
  return std::string(text.substr(kTagBytes));
}

absl::Status RedisStore::Put(const std::string& key, const std::string& entry) {
  if (!options_.secret.empty()) {
    return PutValue(key,
                    absl::StrCat(EntryTag(options_.secret, key, entry), entry));
  }
  return PutValue(key, entry);
}

absl::Status RedisStore::PutValue(const std::string& key,
                                  const std::string& entry) {
  if (static_cast<int64_t>(entry.size()) > options_.max_reply_bytes) {
    // No reader would take it back.
    return absl::FailedPreconditionError(
        absl::StrCat("redis ", url_, ": an entry of ", entry.size(),
                     " bytes, over --cache_max_entry_bytes (",
                     options_.max_reply_bytes, "), is not stored"));
  }
  return Command({"SET", kKeyPrefix + key, entry}).status();
}

absl::Status RedisStore::Drop(const std::string& key) {
  return Command({"DEL", kKeyPrefix + key}).status();
}

}  // namespace memplan::server
