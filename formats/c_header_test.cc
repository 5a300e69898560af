#include "formats/c_header.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "planner/testing/random_problems.h"
#include "proto/convert.h"
#include "tflite/reader.h"
#include "tflite/testing/tflite_builder.h"

namespace memplan::formats {
namespace {

namespace ts = ::memplan::tflite_schema;
using ::testing::HasSubstr;

// A C program that lays every tensor out in a static arena, step by step,
// and fails when two tensors live at the same step share a byte (except an
// in-place hand-over) or a tensor passes its pool's end. "ID" and "PFX"
// stand for the header's macro and data prefixes.
constexpr char kCheck[] = R"(#define MEMPLAN_ID_IMPLEMENTATION
#include "plan.h"
#include "plan.h" /* the include guard holds */
#include <stdio.h>

static int32_t owner[MEMPLAN_ID_ARENA_BYTES + 1];

int other_unit_tensor_count(void);

int main(void) {
  int64_t base[MEMPLAN_ID_POOL_COUNT];
  int64_t step, at = 0, b;
  int t, k, checked = 0;
  for (k = 0; k < MEMPLAN_ID_POOL_COUNT; ++k) {
    base[k] = at;
    at += PFX_pool_bytes[k];
  }
  if (at != MEMPLAN_ID_ARENA_BYTES) return 2;
  if (other_unit_tensor_count() != MEMPLAN_ID_TENSOR_COUNT) return 3;
  for (step = MEMPLAN_ID_FIRST_STEP; step < MEMPLAN_ID_END_STEP; ++step) {
    for (b = 0; b < MEMPLAN_ID_ARENA_BYTES; ++b) owner[b] = -1;
    for (t = 0; t < MEMPLAN_ID_TENSOR_COUNT; ++t) {
      const int64_t o = PFX_offsets[t];
      if (o < 0 || step < PFX_first_steps[t] || step >= PFX_end_steps[t]) {
        continue;
      }
      if (o % MEMPLAN_ID_ALIGNMENT != 0) return 4;
      if (o + PFX_sizes[t] > PFX_pool_bytes[PFX_pools[t]]) return 5;
      for (b = base[PFX_pools[t]] + o; b < base[PFX_pools[t]] + o + PFX_sizes[t];
           ++b) {
        const int32_t u = owner[b];
        if (u >= 0 && PFX_reuses[t] != u && PFX_reuses[u] != t) {
          printf("tensors %d and %d overlap at step %ld\n", u, t, (long)step);
          return 1;
        }
        owner[b] = t;
      }
      ++checked;
    }
  }
#ifdef MEMPLAN_ID_TFLM_BUFFER_COUNT
  if (sizeof(PFX_buffer_plan) !=
      sizeof(int32_t) * (1 + (MEMPLAN_ID_TFLM_BUFFER_COUNT > 0
                                  ? MEMPLAN_ID_TFLM_BUFFER_COUNT : 1))) {
    return 6;
  }
  if (PFX_buffer_plan.buffer_count != MEMPLAN_ID_TFLM_BUFFER_COUNT) return 7;
  for (t = 0; t < MEMPLAN_ID_TFLM_BUFFER_COUNT; ++t) {
    const int32_t o = PFX_buffer_plan.buffer_plan_entries[t].offset;
    if (o < 0 || o >= MEMPLAN_ID_TFLM_ARENA_BYTES) return 8;
  }
#endif
  printf("ok %d\n", checked);
  return 0;
}
)";

constexpr char kOtherUnit[] = R"(#include "plan.h"
int other_unit_tensor_count(void);
int other_unit_tensor_count(void) {
  return (int)(sizeof(PFX_offsets) / sizeof(PFX_offsets[0]));
}
)";

// Compiles `header` with the check program (gcc -std=c99 -pedantic-errors -Wall
// -Wextra -Werror) and runs it; returns its output, or the failure.
std::string CompileAndRun(const std::string& header, const std::string& id) {
  std::string dir = ::testing::TempDir() + "c_header_XXXXXX";
  EXPECT_NE(::mkdtemp(dir.data()), nullptr) << dir;
  const std::string macro = absl::AsciiStrToUpper(id);
  auto subst = [&](absl::string_view text) {
    return absl::StrReplaceAll(text, {{"MEMPLAN_ID_", "MEMPLAN_" + macro + "_"},
                                      {"PFX_", "memplan_" + id + "_"}});
  };
  std::ofstream(dir + "/plan.h") << header;
  std::ofstream(dir + "/main.c") << subst(kCheck);
  std::ofstream(dir + "/other.c") << subst(kOtherUnit);
  const std::string cc = absl::StrCat(
      "cd '", dir,
      "' && gcc -std=c99 -pedantic-errors -Wall -Wextra -Werror -o check "
      "main.c ",
      "other.c > cc.log 2>&1 && ./check > run.log 2>&1; echo $? > status");
  EXPECT_EQ(std::system(cc.c_str()), 0);
  std::ifstream status(dir + "/status"), cc_log(dir + "/cc.log"),
      run_log(dir + "/run.log");
  const std::string code((std::istreambuf_iterator<char>(status)), {}),
      compiled((std::istreambuf_iterator<char>(cc_log)), {}),
      ran((std::istreambuf_iterator<char>(run_log)), {});
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return absl::StrCat("exit ", code.substr(0, code.find('\n')), ": ", compiled,
                      ran);
}

planner::PlanOptions Options() {
  planner::PlanOptions options;
  options.alignment = 16;
  return options;
}

TEST(CHeaderTest, IdsAreCIdentifiersFromTheFileName) {
  EXPECT_EQ(CHeaderId("models/face_detection.tflite"), "face_detection");
  EXPECT_EQ(CHeaderId("hey_jarvis_v0.1.tflite"), "hey_jarvis_v0_1");
  EXPECT_EQ(CHeaderId("3d-net.onnx"), "m3d_net");
  EXPECT_EQ(CHeaderId(""), "plan");
  EXPECT_EQ(CHeaderId("??.json"), "plan");
  EXPECT_EQ(CHeaderId("_x.onnx"), "x");
}

TEST(CHeaderTest, UserIdsAreCIdentifierParts) {
  for (const char* id : {"kws", "Net_2", "a", "x_"}) {
    EXPECT_TRUE(IsCHeaderId(id)) << id;
  }
  for (const char* id : {"", "9lives", "_x", "a-b", "a b", "caf\xc3\xa9"}) {
    EXPECT_FALSE(IsCHeaderId(id)) << id;
  }
  EXPECT_FALSE(IsCHeaderId(std::string(65, 'a')));
}

// The default ID: the file name and a hash of the model and the plan, the
// same every time for the same input, different for different ones. The
// header is the same from any directory: it names the file, not its path.
TEST(CHeaderTest, DefaultIdsDifferBetweenModelsOfOneName) {
  const planner::PlanOptions options = Options();
  absl::StatusOr<planner::PlanResult> plan = planner::PlanGraph(
      planner::testing::RandomGraph(12, 1), options, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CHeaderInput a{"x/model.tflite", &*plan, &options, nullptr};
  a.content = "model bytes";
  const std::string id = CHeaderIdFor(a);
  EXPECT_THAT(id, ::testing::MatchesRegex("model_[0-9a-f]{8}"));
  EXPECT_EQ(CHeaderIdFor(a), id);
  CHeaderInput b = a;
  b.content = "other bytes";
  EXPECT_NE(CHeaderIdFor(b), id);
  planner::PlanResult moved = *plan;
  moved.solution.offsets[0] += 64;
  CHeaderInput c = a;
  c.result = &moved;
  EXPECT_NE(CHeaderIdFor(c), id);
  CHeaderInput user = a;
  user.id = "KWS";
  EXPECT_EQ(CHeaderIdFor(user), "kws");
  absl::StatusOr<std::string> header = EmitCHeader(user);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_THAT(*header, HasSubstr("#ifndef MEMPLAN_KWS_PLAN_H_"));
  EXPECT_THAT(*header, HasSubstr("memplan_kws_offsets["));
  EXPECT_THAT(*header, HasSubstr("/* Memory plan of model.tflite, written"));
  CHeaderInput elsewhere = user;
  elsewhere.name = "/home/someone/checkout/models/model.tflite";
  EXPECT_EQ(EmitCHeader(elsewhere).value_or(""), *header);
}

// Pools whose names meet as identifiers get one macro each; a name is cut
// for a comment between characters, never inside one.
TEST(CHeaderTest, PoolMacrosAreUniqueAndCommentsStayUtf8) {
  planner::Graph graph = planner::testing::RandomGraph(30, 2);
  // A name of 121 bytes whose 120th is inside a character.
  const std::string old_name = graph.tensors[0].name,
                    long_name = std::string(119, 'a') + "\xc3\xa9";
  graph.tensors[0].name = long_name;
  for (planner::Op& op : graph.ops) {
    std::replace(op.inputs.begin(), op.inputs.end(), old_name, long_name);
    std::replace(op.outputs.begin(), op.outputs.end(), old_name, long_name);
  }
  for (auto* names : {&graph.inputs, &graph.outputs}) {
    std::replace(names->begin(), names->end(), old_name, long_name);
  }
  planner::PlanOptions options = Options();
  options.memory_spaces = {{"sram.0", 256}, {"sram", 256}, {"SRAM", 256},
                           {"l2-a", 256},   {"l2_a", 256}, {"\xc3\xa9", 0}};
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanGraph(graph, options, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CHeaderInput input{"pools", &*plan, &options, nullptr};
  input.id = "p";
  absl::StatusOr<std::string> header = EmitCHeader(input);
  ASSERT_TRUE(header.ok()) << header.status();
  for (const char* macro :
       {"SRAM_0", "SRAM", "SRAM_2", "L2_A", "L2_A_2", "5"}) {
    EXPECT_THAT(*header, HasSubstr(absl::StrCat("#define MEMPLAN_P_POOL_",
                                                macro, "_BYTES ")));
  }
  EXPECT_THAT(*header, HasSubstr(std::string(119, 'a') + " ("));
  EXPECT_THAT(*header, ::testing::Not(HasSubstr("a\xc3 (")));
  EXPECT_THAT(CompileAndRun(*header, "p"),
              ::testing::StartsWith("exit 0: ok "));
}

// A TFLite model with an IF: the header compiles, the program finds no
// overlap, and TFLM's BufferPlan lists every tensor TFLM plans.
TEST(CHeaderTest, TfliteHeaderCompilesAndHoldsNoOverlap) {
  testing::TfliteBuilder b;
  auto& g = b.Subgraph("main");
  const int c = g.Tensor("c", {4}, ts::TensorType_INT32);
  const int x = g.Tensor("x */ int oops; /* ?\?/", {64});
  const int w =
      g.Tensor("w", {64}, ts::TensorType_FLOAT32, std::string(256, 1));
  const int y = g.Tensor("y", {64});
  g.Op(ts::BuiltinOperator_IF, {c, x, w}, {y}, {1, 1});
  g.inputs = {c, x};
  g.outputs = {y};
  auto& body = b.Subgraph("body");
  const int in = body.Tensor("in", {64}), v = body.Tensor("v", {64}),
            out = body.Tensor("out", {64});
  body.Op(ts::BuiltinOperator_ADD, {in, v}, {out});
  body.inputs = {in, v};
  body.outputs = {out};
  const std::string bytes = b.Build();
  absl::StatusOr<ImportedModel> m = ImportTflite(bytes, "if_model.tflite", {});
  ASSERT_TRUE(m.ok()) << m.status();
  const planner::PlanOptions options = Options();
  absl::StatusOr<planner::PlanResult> plan = planner::PlanGraph(
      api::GraphFromProto(*m->graph), options, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CHeaderInput input{"dir/if_model.tflite", &*plan, &options, &*m};
  input.id = "if_model";
  absl::StatusOr<std::string> header = EmitCHeader(input);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_THAT(*header,
              ::testing::AllOf(
                  HasSubstr("#define MEMPLAN_IF_MODEL_TFLM_BUFFER_COUNT 6"),
                  HasSubstr("#define MEMPLAN_IF_MODEL_ARENA_BYTES "),
                  HasSubstr("x *_ int oops; /_ __/")));
  EXPECT_THAT(CompileAndRun(*header, "if_model"),
              ::testing::StartsWith("exit 0: ok "));
  // A plan TFLite Micro would not run as it is (engine passes emit
  // tflite's refusal): no TFLite Micro section, a comment saying why (its
  // text made safe), and the rest of the header as before.
  input.tflm_refusal = "tensor 'x */ int oops; /*' is at offset 8";
  absl::StatusOr<std::string> refused = EmitCHeader(input);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_THAT(*refused,
              ::testing::AllOf(
                  HasSubstr("/* No TFLite Micro section (its arena size and "
                            "buffer plan): TFLite Micro\n * would not run "
                            "this plan as it is: tensor 'x *_ int oops; /_' "
                            "is at offset 8. */"),
                  ::testing::Not(HasSubstr("TFLM_")),
                  ::testing::Not(HasSubstr("buffer_plan")),
                  HasSubstr("#define MEMPLAN_IF_MODEL_ARENA_BYTES ")));
  EXPECT_THAT(CompileAndRun(*refused, "if_model"),
              ::testing::StartsWith("exit 0: ok "));
  input.tflm_refusal.clear();
  // The check can fail: x and y (live together) put at one offset.
  planner::PlanResult broken = *plan;
  broken.solution.offsets[broken.tensors[y].buffer] =
      broken.solution.offsets[broken.tensors[x].buffer];
  input.result = &broken;
  absl::StatusOr<std::string> bad = EmitCHeader(input);
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_THAT(CompileAndRun(*bad, "if_model"),
              ::testing::AllOf(::testing::StartsWith("exit 1: "),
                               HasSubstr("overlap")));
}

// Any input: a random graph, with in-place ops, and with memory pools.
// The header of a large plan polls the call's token as it goes: stopped
// after a few polls, it ends DEADLINE_EXCEEDED without more polls; the
// model's bytes are hashed in parts between polls too.
TEST(CHeaderTest, StopsWhenTheCallEnds) {
  planner::Graph graph = planner::testing::RandomGraph(20'000, 5);
  const planner::PlanOptions options = Options();
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanGraph(graph, options, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The 4 MiB of model bytes take 64 polls; the plan's 20,000 tensors
  // about 5 per pass over them (hash, columns, each column's definition).
  const std::string model(4 << 20, 'm');
  for (int fire_at : {1, 30, 66, 75, 90}) {
    int polls = 0;
    base::CancelToken token(nullptr, absl::InfiniteFuture(),
                            [&] { return ++polls >= fire_at; });
    CHeaderInput input{"big", &*plan, &options, nullptr};
    input.content = model;
    input.cancel = &token;
    absl::StatusOr<std::string> header = EmitCHeader(input);
    EXPECT_EQ(header.status().code(), absl::StatusCode::kDeadlineExceeded)
        << fire_at;
    EXPECT_EQ(polls, fire_at);
  }
  int polls = 0;
  base::CancelToken never(nullptr, absl::InfiniteFuture(), [&] {
    ++polls;
    return false;
  });
  CHeaderInput input{"big", &*plan, &options, nullptr};
  input.content = model;
  input.cancel = &never;
  EXPECT_TRUE(EmitCHeader(input).ok());
  EXPECT_GT(polls, 90);
}

TEST(CHeaderTest, GraphHeadersCompileWithPoolsAndInPlaceOps) {
  for (bool pools : {false, true}) {
    planner::Graph graph = planner::testing::RandomGraph(40, pools ? 3 : 4);
    graph.name = "random graph";
    for (size_t i = 0; i < graph.ops.size(); i += 3)
      graph.ops[i].in_place = true;
    planner::PlanOptions options = Options();
    if (pools) options.memory_spaces = {{"sram", 4096}, {"dram", 0}};
    absl::StatusOr<planner::PlanResult> plan =
        planner::PlanGraph(graph, options, nullptr, nullptr);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const CHeaderInput input{graph.name, &*plan, &options, nullptr};
    absl::StatusOr<std::string> header = EmitCHeader(input);
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_THAT(*header, ::testing::Not(HasSubstr("TFLM")));
    const std::string id = CHeaderIdFor(input);
    EXPECT_THAT(id, ::testing::StartsWith("random_graph_"));
    if (pools) {
      EXPECT_THAT(*header, HasSubstr(absl::StrCat("#define MEMPLAN_",
                                                  absl::AsciiStrToUpper(id),
                                                  "_POOL_SRAM_BYTES ")));
    }
    EXPECT_THAT(CompileAndRun(*header, id),
                ::testing::StartsWith("exit 0: ok "));
  }
}

// A buffer list's steps are any integers: the header's steps run from its
// earliest, and the check program's walk over them meets every buffer.
TEST(CHeaderTest, StepsOfABufferListMayStartBelowZero) {
  planner::Problem problem;
  for (int i = 0; i < 12; ++i) {
    planner::Buffer b;
    b.name = absl::StrCat("b", i);
    b.start = -9 + i;
    b.end = b.start + 1 + i % 4;
    b.size = 16 * (1 + i % 3);
    problem.buffers.push_back(b);
  }
  const planner::PlanOptions options = Options();
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanBuffers(problem, options, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const CHeaderInput input{"negative steps", &*plan, &options, nullptr};
  absl::StatusOr<std::string> header = EmitCHeader(input);
  ASSERT_TRUE(header.ok()) << header.status();
  const std::string id = CHeaderIdFor(input);
  const std::string macro = "#define MEMPLAN_" + absl::AsciiStrToUpper(id);
  EXPECT_THAT(*header, HasSubstr(macro + "_FIRST_STEP -9\n"));
  EXPECT_THAT(*header, HasSubstr(macro + "_END_STEP 6\n"));
  EXPECT_THAT(*header, HasSubstr(macro + "_STEP_COUNT 15\n"));
  // Each tensor checked at each of its 30 steps (from 0: 11 of them).
  EXPECT_EQ(CompileAndRun(*header, id), "exit 0: ok 30\n");
  // Steps from -2^62 to 2^62: 2^63 of them, past int64_t (written
  // unsigned), the bounds still int64_t constants.
  planner::Problem far;
  far.buffers.resize(2);
  far.buffers[0].name = "a";
  far.buffers[0].start = -(int64_t{1} << 62);
  far.buffers[0].end = far.buffers[0].start + 1;
  far.buffers[1].name = "b";
  far.buffers[1].end = int64_t{1} << 62;
  far.buffers[1].start = far.buffers[1].end - 1;
  for (planner::Buffer& b : far.buffers) b.size = 16;
  absl::StatusOr<planner::PlanResult> far_plan =
      planner::PlanBuffers(far, options, nullptr, nullptr);
  ASSERT_TRUE(far_plan.ok()) << far_plan.status();
  const CHeaderInput far_input{"far steps", &*far_plan, &options, nullptr};
  absl::StatusOr<std::string> far_header = EmitCHeader(far_input);
  ASSERT_TRUE(far_header.ok()) << far_header.status();
  const std::string far_macro =
      "#define MEMPLAN_" + absl::AsciiStrToUpper(CHeaderIdFor(far_input));
  EXPECT_THAT(*far_header,
              HasSubstr(far_macro + "_STEP_COUNT 9223372036854775808ULL\n"));
  EXPECT_THAT(*far_header,
              HasSubstr(far_macro + "_END_STEP 4611686018427387904\n"));
}

}  // namespace
}  // namespace memplan::formats
