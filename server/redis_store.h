// The plan cache's shared store on Redis (hiredis): replicas started with
// the same --cache=redis://HOST:PORT serve each other's plans. Keys are
// "memplan:plan:" + the cache key; values are the cache's self-describing
// entries (engine/plan_cache.h), checked and verified by every reader.
// Redis evicts them itself (maxmemory-policy allkeys-lru).
//
// A Redis that is down, slow or full never holds a call up for long: every
// call, from the wait for a pooled connection to the last byte of its
// reply, ends within the timeout or goes without, and a reply is read
// only up to a bound (max_reply_bytes), whatever the server sends. Connections
// are made, and remade with backoff after a failure, by a thread of the store's
// own, so that a name lookup or a connect never runs on a call's thread; the
// same thread PINGs a quiet store every second. Up/down changes are logged on
// stderr and reported to `on_change`.
//
//   auto store = server::RedisStore::Open("redis://127.0.0.1:6379", {});
//   engine::PlanCache cache({.store = store->get()});
//
// Thread-safe.
#ifndef MEMPLAN_SERVER_REDIS_STORE_H_
#define MEMPLAN_SERVER_REDIS_STORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/plan_cache.h"

struct redisContext;  // hiredis

namespace memplan::server {

struct RedisStoreOptions {
  // Bound of a connect, and of a whole call: the wait for a free
  // connection, the command's write and its reply's reads. Default 5 ms.
  absl::Duration timeout = absl::Milliseconds(5);
  // The largest reply read (an entry): a longer one fails its call and
  // closes its connection; Put stores no larger entry. Default 64 MiB.
  int64_t max_reply_bytes = int64_t{64} << 20;
  // A secret the replicas share: with one, every entry stored carries an
  // HMAC-SHA256 of its key and bytes under it, and an entry read without a
  // valid one reads as empty (the cache refuses, counts and drops it), so
  // only a holder of the secret can put a plan in front of a replica.
  // Default empty: entries unsigned (any writer to Redis can).
  std::string secret;
  // Connections kept open. Default 8. REQUIRES >= 1.
  int connections = 8;
  // After a failed connect, the wait before the next one: doubled per
  // failure from `min_backoff` up to `max_backoff`. Defaults 10 ms, 2 s.
  absl::Duration min_backoff = absl::Milliseconds(10);
  absl::Duration max_backoff = absl::Seconds(2);
  // Told when the store becomes reachable (true) or unreachable (false),
  // from the store's thread. May be empty.
  std::function<void(bool up)> on_change;
};

class RedisStore final : public engine::PlanStore {
 public:
  // A store for `url` ("redis://HOST:PORT"; HOST may be a name, an IPv4
  // address or a bracketed IPv6 one). INVALID_ARGUMENT for another form.
  // Does not wait for Redis: a store that cannot reach it yet answers
  // UNAVAILABLE until it can.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Open(
      const std::string& url, const RedisStoreOptions& options);
  ~RedisStore() override;

  absl::string_view name() const override { return "redis"; }
  absl::StatusOr<std::optional<std::string>> Get(
      const std::string& key) override;
  absl::Status Put(const std::string& key, const std::string& entry) override;
  absl::Status Drop(const std::string& key) override;

  // Whether at least one connection is open now.
  bool up() const;
  // Waits up to `timeout` for a connection (start-up, tests).
  bool WaitUntilUp(absl::Duration timeout) const;
  const std::string& url() const { return url_; }

 private:
  RedisStore(std::string url, std::string host, int port,
             const RedisStoreOptions& options);
  // Runs one command on a pooled connection; the reply's type and text.
  struct Reply {
    int type = 0;
    std::string text;
  };
  absl::StatusOr<Reply> Command(const std::vector<std::string>& args);
  // SETs `value` (an entry, signed when there is a secret) under `key`.
  absl::Status PutValue(const std::string& key, const std::string& value);
  // A connection to use, or null (none by `deadline`).
  redisContext* Acquire(absl::Time deadline);
  // How a call on a connection ended.
  enum class Failure {
    kNone,     // answered: the connection is reused
    kTimeout,  // a reply in flight (or too large): this connection closed
    kBroken,   // the server closed it, a reset: the idle ones closed too
  };
  // Gives a connection back; a failed one is closed and remade (`reason`
  // is logged if it was the last one open and hiredis names no error).
  void Release(redisContext* context, Failure failure,
               const std::string& reason = "");
  // The store's thread: keeps `connections` open, with backoff.
  void Connector();
  redisContext* Connect(std::string* error) const;
  // PINGs one idle connection (a broken one is closed, and the idle ones
  // with it). Called by the connector, holding mu_ (released meanwhile).
  void CheckIdle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetUp(bool up, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string url_;
  const std::string host_;
  const int port_;
  const RedisStoreOptions options_;

  mutable absl::Mutex mu_;
  std::vector<redisContext*> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // idle or in use
  bool up_ ABSL_GUARDED_BY(mu_) = false;
  bool logged_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread connector_;
};

}  // namespace memplan::server

#endif  // MEMPLAN_SERVER_REDIS_STORE_H_
