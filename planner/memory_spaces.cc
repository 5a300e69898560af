#include "planner/memory_spaces.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/text.h"
#include "planner/greedy.h"

namespace memplan::planner {

absl::Status ValidateMemorySpaces(const std::vector<MemorySpace>& spaces) {
  if (spaces.size() > static_cast<size_t>(kMaxMemorySpaces)) {
    return absl::InvalidArgumentError(absl::StrCat(
        spaces.size(), " memory pools; at most ", kMaxMemorySpaces));
  }
  absl::flat_hash_set<std::string> names;
  for (size_t k = 0; k < spaces.size(); ++k) {
    if (spaces[k].name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory pool #", k, " has no name"));
    }
    if (!names.insert(spaces[k].name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "duplicate memory pool name '", base::SafeText(spaces[k].name), "'"));
    }
    if (spaces[k].capacity < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "memory pool '", base::SafeText(spaces[k].name), "' has capacity ",
          spaces[k].capacity, "; it must be >= 0 (0: unbounded)"));
    }
  }
  return absl::OkStatus();
}

Problem SubProblem(const Problem& problem, const std::vector<int>& indices) {
  Problem sub;
  sub.buffers.reserve(indices.size());
  for (int i : indices) sub.buffers.push_back(problem.buffers[i]);
  return sub;
}

std::vector<int> SpaceClaimOrder(const Problem& problem) {
  const auto& b = problem.buffers;
  std::vector<std::tuple<long double, Bytes, int>> keys(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    keys[i] = {static_cast<long double>(b[i].size) * (b[i].end - b[i].start),
               b[i].size, i};
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int> order(b.size());
  for (size_t k = 0; k < keys.size(); ++k) order[k] = std::get<2>(keys[k]);
  return order;
}

namespace {

// Takes what fits of `left` (indices into problem) into a space of
// `capacity`; returns the share and leaves the rest in `left`.
absl::StatusOr<SpaceShare> Claim(const Problem& problem, Bytes capacity,
                                 const base::CancelToken* cancel,
                                 std::vector<int>* left) {
  if (left->empty()) return SpaceShare{};
  const Problem sub = SubProblem(problem, *left);
  absl::StatusOr<Solution> placed =
      PlaceWithinCapacity(sub, SpaceClaimOrder(sub), capacity, cancel);
  if (!placed.ok()) return placed.status();
  SpaceShare share;
  std::vector<int> rest;
  for (size_t k = 0; k < left->size(); ++k) {
    if (placed->offsets[k] < 0) {
      rest.push_back((*left)[k]);
    } else {
      share.buffers.push_back((*left)[k]);
      share.plan.offsets.push_back(placed->offsets[k]);
    }
  }
  share.plan.arena_size = placed->arena_size;
  *left = std::move(rest);
  return share;
}

}  // namespace

absl::StatusOr<std::vector<SpaceShare>> SplitOverSpaces(
    const Problem& problem, const std::vector<MemorySpace>& spaces,
    const base::CancelToken* cancel) {
  if (absl::Status s = ValidateMemorySpaces(spaces); !s.ok()) return s;
  for (const Buffer& b : problem.buffers) {
    if (b.fixed_offset.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer '", b.name,
          "' has a fixed offset, which names no memory pool; fixed offsets "
          "and memory_pools cannot be combined"));
    }
  }
  std::vector<int> left(problem.buffers.size());
  for (size_t i = 0; i < left.size(); ++i) left[i] = static_cast<int>(i);
  std::vector<SpaceShare> shares;
  for (const MemorySpace& space : spaces) {
    const Bytes capacity =
        space.capacity > 0 ? space.capacity : std::numeric_limits<Bytes>::max();
    absl::StatusOr<SpaceShare> share = Claim(problem, capacity, cancel, &left);
    if (!share.ok()) return share.status();
    shares.push_back(*std::move(share));
  }
  if (!left.empty()) {
    Bytes bytes = 0;
    for (int i : left) bytes += problem.buffers[i].size;
    return absl::FailedPreconditionError(
        absl::StrCat(left.size(), " buffers (", bytes, " bytes, the first '",
                     problem.buffers[left.front()].name,
                     "') fit in no memory pool; the last pool '",
                     spaces.back().name, "' holds ", spaces.back().capacity,
                     " bytes (give it capacity 0 for unbounded)"));
  }
  return shares;
}

}  // namespace memplan::planner
