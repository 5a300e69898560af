// Requests the end-to-end tests send the real server and CLI.
#ifndef MEMPLAN_TESTS_TESTING_REQUESTS_H_
#define MEMPLAN_TESTS_TESTING_REQUESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "memplan/v1/memplan.pb.h"

namespace memplan::testing {

// One tensor of a chain: its name and bytes.
struct ChainTensor {
  std::string name;
  int64_t bytes = 0;
};

// A chain graph named "chain": tensors[0] is the graph's input,
// tensors.back() its output, and op i reads tensors[i] and writes
// tensors[i + 1] (two tensors live at a time). Ops are named `op_names[i]`,
// or "op0", "op1"... when none are given. REQUIRES at least two tensors.
v1::Graph ChainGraph(const std::vector<ChainTensor>& tensors,
                     const std::vector<std::string>& op_names = {});

// x (64 bytes) -> t0 -> ... -> t{count-1} -> y (64 bytes), each t of
// `bytes`; ops op0..op{count-1} and "out".
v1::Graph UniformChain(int count, int64_t bytes);

// A MiniMalloc CSV of bench/data/minimalloc (e.g. "D.1048576.csv") as a
// buffer-list request with the "exact" strategy and `budget_ms` to search.
// Fails the calling test when the file cannot be read.
v1::PlanRequest MinimallocSearch(const std::string& file, int64_t budget_ms);

// `count` buffers, two starting per step, each living 1-7 steps, 64 B to
// 100 KB: a request whose plan takes the server a second or more and a few
// hundred MB at 400,000 buffers (its response is ~10 MB).
v1::PlanRequest LargeBufferList(int count);

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_REQUESTS_H_
