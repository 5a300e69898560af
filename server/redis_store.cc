#include "server/redis_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace memplan::server {
namespace {

constexpr char kKeyPrefix[] = "memplan:plan:";
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

// The reply's text, for errors.
std::string ReplyText(const redisReply* r) {
  return r->str != nullptr ? std::string(r->str, r->len) : std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(
    const std::string& url, const RedisStoreOptions& options) {
  std::string host;
  int port = 0;
  if (!ParseUrl(url, &host, &port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cache: expected memory, off or redis://HOST:PORT, got '", url, "'"));
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
    if (r != nullptr && !pong) *error = "PING: " + ReplyText(r);
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
  const bool broken = r == nullptr;
  if (r != nullptr) freeReplyObject(r);
  Release(c, broken, error);
  mu_.Lock();
}

redisContext* RedisStore::Acquire() {
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !idle_.empty() || open_ == 0 || stopping_;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&ready), options_.timeout);
  if (idle_.empty()) return nullptr;
  redisContext* c = idle_.back();
  idle_.pop_back();
  return c;
}

void RedisStore::Release(redisContext* context, bool broken, int error) {
  if (!broken) {
    absl::MutexLock lock(&mu_);
    idle_.push_back(context);
    return;
  }
  // A timeout (EAGAIN) leaves a reply in flight: this connection is done,
  // the others are not. Anything else (the server closed the connection,
  // a reset) reached the same server as the idle ones, which have most
  // likely failed too: closed now, so that no call waits on them (the
  // connector remakes them, at once if the server is fine).
  const bool timeout =
      context->err == REDIS_ERR_IO && (error == EAGAIN || error == EWOULDBLOCK);
  const std::string why = context->errstr;
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

absl::StatusOr<RedisStore::Reply> RedisStore::Command(
    const std::vector<std::string>& args) {
  redisContext* c = Acquire();
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
  auto* r = static_cast<redisReply*>(redisCommandArgv(
      c, static_cast<int>(args.size()), argv.data(), lengths.data()));
  if (r == nullptr) {  // I/O error or timeout: the connection is done
    const int error = errno;
    const std::string why = c->errstr;
    Release(c, /*broken=*/true, error);
    return absl::UnavailableError(absl::StrCat("redis ", url_, ": ", why));
  }
  Reply reply{r->type, ReplyText(r)};
  freeReplyObject(r);
  Release(c, /*broken=*/false);
  if (reply.type == REDIS_REPLY_ERROR) {  // e.g. OOM with noeviction
    return absl::UnavailableError(
        absl::StrCat("redis ", url_, ": ", reply.text));
  }
  return reply;
}

absl::StatusOr<std::optional<std::string>> RedisStore::Get(
    const std::string& key) {
  absl::StatusOr<Reply> r = Command({"GET", kKeyPrefix + key});
  if (!r.ok()) return r.status();
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type != REDIS_REPLY_STRING) {
    return absl::InternalError("redis: GET answered something else");
  }
  return std::move(r->text);
}

absl::Status RedisStore::Put(const std::string& key, const std::string& entry) {
  return Command({"SET", kKeyPrefix + key, entry}).status();
}

absl::Status RedisStore::Drop(const std::string& key) {
  return Command({"DEL", kKeyPrefix + key}).status();
}

}  // namespace memplan::server
