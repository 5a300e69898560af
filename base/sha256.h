// SHA-256 (FIPS 180-4), for content addresses that must be the same in
// every process and on every machine: the plan cache's keys and its
// entries' checksums (engine/plan_cache.h). absl::Hash is seeded per
// process and cannot serve; this is the standard algorithm, checked
// against the FIPS 180-4 / NIST example vectors in sha256_test.cc.
//
//   base::Sha256 h;
//   h.Update("abc");
//   base::Sha256::Digest d = h.Finish();      // 32 bytes
//   std::string hex = base::Sha256::Hex(d);   // "ba7816bf..."
#ifndef MEMPLAN_BASE_SHA256_H_
#define MEMPLAN_BASE_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace memplan::base {

// Incremental SHA-256. Thread-compatible.
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  // Appends bytes to the message.
  void Update(absl::string_view bytes);
  // Appends `value` as 8 little-endian bytes (a fixed-width field of a
  // canonical encoding).
  void UpdateInt64(int64_t value);
  // Pads, and returns the digest of everything appended. The object must
  // not be used afterwards.
  Digest Finish();

  // The digest of `bytes` in one call.
  static Digest Of(absl::string_view bytes);
  // 64 lowercase hex digits.
  static std::string Hex(const Digest& digest);

 private:
  void Block(const uint8_t* block);  // compresses one 64-byte block

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;  // bytes in buffer_
  uint64_t length_ = 0;  // message bytes so far
};

// HMAC-SHA256 (RFC 2104) of `message` under `key` (any length): a tag only
// a holder of the key can make, for entries a shared store hands back
// (checked against RFC 4231's test cases in sha256_test.cc).
Sha256::Digest HmacSha256(absl::string_view key, absl::string_view message);

// Whether `a` and `b` are equal, in time that depends on their lengths
// alone (comparing a tag byte by byte until the first difference would
// tell an attacker how much of a forged one is right).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_SHA256_H_
