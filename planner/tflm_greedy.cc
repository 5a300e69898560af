#include "planner/tflm_greedy.h"

#include <algorithm>
#include <cassert>

namespace memplan::planner {
namespace {

// A placed buffer in the list kept in offset order (TFLM's ListEntry).
struct Entry {
  Offset offset = 0;
  int buffer = 0;  // index into the buffers
  int next = -1;   // next entry in offset order, -1 at the end
};

bool OverlapInTime(const TflmBuffer& a, const TflmBuffer& b) {
  return !(a.first > b.last || b.first > a.last);
}

// The order TFLM places buffers in: offline ones first as added, then the
// others by decreasing size, stable over the reversed order of addition.
std::vector<int> PlacementOrder(const std::vector<TflmBuffer>& buffers) {
  std::vector<int> order, online;
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i) {
    (buffers[i].offline_offset >= 0 ? order : online).push_back(i);
  }
  std::reverse(online.begin(), online.end());
  std::stable_sort(online.begin(), online.end(), [&](int a, int b) {
    return buffers[a].size > buffers[b].size;
  });
  order.insert(order.end(), online.begin(), online.end());
  return order;
}

// The first offset where `wanted` fits between the placed buffers live at
// the same time, walked in offset order (TFLM's gap search).
Offset FirstFit(const std::vector<TflmBuffer>& buffers,
                const std::vector<Entry>& entries, int first_entry,
                const TflmBuffer& wanted) {
  Offset candidate = 0;
  for (int e = first_entry; e != -1; e = entries[e].next) {
    const TflmBuffer& placed = buffers[entries[e].buffer];
    if (!OverlapInTime(placed, wanted)) continue;
    if (entries[e].offset - candidate >= wanted.size) break;
    candidate = std::max(candidate, entries[e].offset + placed.size);
  }
  return candidate;
}

// Links entry `e` into the offset-ordered list after every entry whose
// offset is not larger; returns the new head.
int Insert(std::vector<Entry>& entries, int head, int e) {
  if (entries[head].offset > entries[e].offset) {
    entries[e].next = head;
    return e;
  }
  int at = head;
  while (entries[at].next != -1 &&
         entries[entries[at].next].offset <= entries[e].offset) {
    at = entries[at].next;
  }
  entries[e].next = entries[at].next;
  entries[at].next = e;
  return head;
}

}  // namespace

void TflmGreedyPlanner::AddBuffer(Bytes size, Step first, Step last,
                                  Offset offline_offset) {
  assert(size >= 0 && offline_offset >= -1);
  buffers_.push_back({size, first, last, offline_offset});
}

TflmGreedyPlanner TflmGreedyPlanner::FromProblem(const Problem& problem) {
  TflmGreedyPlanner tflm;
  for (const Buffer& b : problem.buffers) {
    const Bytes a = std::max<Bytes>(b.alignment, 1);
    tflm.AddBuffer((b.size + a - 1) / a * a, b.start, b.end - 1,
                   b.fixed_offset.value_or(-1));
  }
  return tflm;
}

TflmPlan TflmGreedyPlanner::Plan() const { return *Plan(nullptr); }

absl::StatusOr<TflmPlan> TflmGreedyPlanner::Plan(
    const base::CancelToken* cancel) const {
  // Each buffer scans the placed ones: a few hundred buffers between polls
  // keep a poll within ~1 ms on the largest baseline (50,000 buffers).
  constexpr size_t kCancelStride = 256;
  TflmPlan plan;
  plan.offsets.assign(buffers_.size(), -1);
  if (buffers_.empty()) return plan;
  const std::vector<int> order = PlacementOrder(buffers_);
  std::vector<Entry> entries(order.size());
  int head = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i % kCancelStride == 0 && cancel != nullptr && cancel->Cancelled()) {
      return absl::DeadlineExceededError(
          "TFLite Micro's planner (the baseline) cancelled");
    }
    const TflmBuffer& wanted = buffers_[order[i]];
    Offset offset = wanted.offline_offset;
    if (offset < 0) {
      offset = i == 0 ? 0 : FirstFit(buffers_, entries, head, wanted);
    }
    entries[i] = {offset, order[i], -1};
    if (i > 0) head = Insert(entries, head, static_cast<int>(i));
    plan.offsets[order[i]] = offset;
    plan.arena_size = std::max(plan.arena_size, offset + wanted.size);
  }
  return plan;
}

}  // namespace memplan::planner
