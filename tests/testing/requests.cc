#include "tests/testing/requests.h"

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "formats/minimalloc_csv.h"
#include "gtest/gtest.h"
#include "proto/convert.h"

namespace memplan::testing {

v1::Graph ChainGraph(const std::vector<ChainTensor>& tensors,
                     const std::vector<std::string>& op_names) {
  v1::Graph g;
  g.set_name("chain");
  for (const ChainTensor& c : tensors) {
    v1::Tensor* t = g.add_tensors();
    t->set_name(c.name);
    t->set_size_bytes(c.bytes);
  }
  for (size_t i = 0; i + 1 < tensors.size(); ++i) {
    v1::Op* op = g.add_ops();
    op->set_name(i < op_names.size() ? op_names[i] : absl::StrCat("op", i));
    op->add_inputs(tensors[i].name);
    op->add_outputs(tensors[i + 1].name);
  }
  g.add_inputs(tensors.front().name);
  g.add_outputs(tensors.back().name);
  return g;
}

v1::Graph UniformChain(int count, int64_t bytes) {
  std::vector<ChainTensor> tensors = {{"x", 64}};
  std::vector<std::string> ops;
  for (int i = 0; i < count; ++i) {
    tensors.push_back({absl::StrCat("t", i), bytes});
    ops.push_back(absl::StrCat("op", i));
  }
  tensors.push_back({"y", 64});
  ops.push_back("out");
  return ChainGraph(tensors, ops);
}

v1::PlanRequest MinimallocSearch(const std::string& file, int64_t budget_ms) {
  v1::PlanRequest r;
  const std::string path =
      std::string(MEMPLAN_SOURCE_DIR) + "/bench/data/minimalloc/" + file;
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  absl::StatusOr<formats::MinimallocCsv> csv =
      formats::ReadMinimallocCsv(text, path);
  EXPECT_TRUE(csv.ok()) << csv.status();
  if (!csv.ok()) return r;
  api::BuffersToProto(csv->problem, r.mutable_buffers());
  r.mutable_options()->set_strategy("exact");
  r.mutable_options()->set_time_budget_ms(budget_ms);
  return r;
}

v1::PlanRequest LargeBufferList(int count) {
  v1::PlanRequest r;
  for (int i = 0; i < count; ++i) {
    v1::Buffer* b = r.add_buffers();
    b->set_id(absl::StrCat(i));
    b->set_start(i / 2);
    b->set_end(i / 2 + 1 + i % 7);
    b->set_size(64 + (int64_t{i} * 7919) % 100000);
  }
  return r;
}

}  // namespace memplan::testing
