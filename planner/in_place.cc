#include "planner/in_place.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace memplan::planner {
namespace {

constexpr int kNone = -1;

// The input of `op` (at `step`) whose memory output `out` may take, or
// kNone. `reused` marks inputs already taken by another output.
int InPlaceInput(const Op& op, Step step, int out,
                 const absl::flat_hash_map<absl::string_view, int>& index,
                 const std::vector<Buffer>& b,
                 const std::vector<bool>& reused) {
  if (b[out].persistent) return kNone;
  for (const std::string& name : op.inputs) {
    const int in = index.at(name);
    if (in == out || reused[in] || b[in].persistent) continue;
    if (b[in].end != step + 1) continue;  // read again later
    if (b[out].size > b[in].size || b[out].alignment != b[in].alignment) {
      continue;
    }
    return in;
  }
  return kNone;
}

}  // namespace

InPlaceMerge MergeInPlace(const Graph& graph, const Problem& tensors) {
  const auto& b = tensors.buffers;
  absl::flat_hash_map<absl::string_view, int> index;
  for (int t = 0; t < static_cast<int>(b.size()); ++t) index[b[t].name] = t;
  std::vector<int> root(b.size());
  for (size_t t = 0; t < b.size(); ++t) root[t] = static_cast<int>(t);
  std::vector<bool> reused(b.size(), false);
  std::vector<Step> end(b.size());
  for (size_t t = 0; t < b.size(); ++t) end[t] = b[t].end;
  InPlaceMerge merge;
  for (size_t step = 0; step < graph.ops.size(); ++step) {
    const Op& op = graph.ops[step];
    if (!op.in_place) continue;
    for (const std::string& name : op.outputs) {
      const int out = index.at(name);
      const int in =
          InPlaceInput(op, static_cast<Step>(step), out, index, b, reused);
      if (in == kNone) continue;
      reused[in] = true;
      root[out] = root[in];
      end[root[out]] = std::max(end[root[out]], b[out].end);
      merge.aliases.push_back({out, in, kNone});
    }
  }
  merge.buffer_of.assign(b.size(), kNone);
  for (size_t t = 0; t < b.size(); ++t) {
    if (root[t] != static_cast<int>(t)) continue;
    merge.buffer_of[t] = static_cast<int>(merge.problem.buffers.size());
    merge.problem.buffers.push_back(b[t]);
    merge.problem.buffers.back().end = end[t];
  }
  for (size_t t = 0; t < b.size(); ++t) {
    merge.buffer_of[t] = merge.buffer_of[root[t]];
  }
  for (InPlaceTensor& a : merge.aliases) a.buffer = merge.buffer_of[a.tensor];
  merge.problem.capacity = tensors.capacity;
  return merge;
}

}  // namespace memplan::planner
