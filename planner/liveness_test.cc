#include "planner/liveness.h"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/worker_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/testing/graphs.h"
#include "planner/testing/random_problems.h"

namespace memplan::planner {
namespace {

using ::testing::HasSubstr;

// A small graph: x -> conv -> a -> relu -> b -> add(a, b) -> y, weight w.
Graph SmallGraph() {
  Graph g;
  g.name = "small";
  g.tensors = {{"x", 100}, {"w", 40}, {"a", 200}, {"b", 300}, {"y", 50}};
  g.ops = {{"conv", {"x", "w"}, {"a"}},
           {"relu", {"a"}, {"b"}},
           {"add", {"a", "b"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  return g;
}

const Buffer& Find(const Problem& p, const std::string& name) {
  for (const Buffer& b : p.buffers) {
    if (b.name == name) return b;
  }
  ADD_FAILURE() << "no buffer " << name;
  return p.buffers.front();
}

TEST(LivenessTest, LifetimesFollowProducersAndLastConsumers) {
  absl::StatusOr<Problem> p = AnalyzeLiveness(SmallGraph(), 64);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->buffers.size(), 5u);
  // "a" is read by relu (step 1) and add (step 2): dies after step 2.
  EXPECT_EQ(Find(*p, "a").start, 0);
  EXPECT_EQ(Find(*p, "a").end, 3);
  EXPECT_FALSE(Find(*p, "a").persistent);
  EXPECT_EQ(Find(*p, "b").start, 1);
  EXPECT_EQ(Find(*p, "b").end, 3);
  EXPECT_EQ(Find(*p, "a").alignment, 64);
}

TEST(LivenessTest, InputsOutputsAndWeightsArePersistent) {
  absl::StatusOr<Problem> p = AnalyzeLiveness(SmallGraph(), 64);
  ASSERT_TRUE(p.ok()) << p.status();
  for (const char* name : {"x", "w", "y"}) {
    EXPECT_TRUE(Find(*p, name).persistent) << name;  // never reused in place
  }
  EXPECT_EQ(Find(*p, "w").start, 0);
  EXPECT_EQ(Find(*p, "w").end, 3);
}

TEST(LivenessTest, InputsDieAfterTheirLastUseAndOutputsAreBornAtTheirProducer) {
  absl::StatusOr<Problem> p = AnalyzeLiveness(testing::IoChain(), 64);
  ASSERT_TRUE(p.ok()) << p.status();
  // As TFLite Micro has them: x from step 0 through its last reader (0),
  // y from its producer (3) to the end.
  EXPECT_EQ(Find(*p, "x").start, 0);
  EXPECT_EQ(Find(*p, "x").end, 1);
  EXPECT_EQ(Find(*p, "y").start, 3);
  EXPECT_EQ(Find(*p, "y").end, 4);
  // So x and y, 100 bytes each and never live together, can share memory:
  // the peak is x + a = c + y = 110 bytes, where holding both for the whole
  // run gave x + y + a = 210.
  EXPECT_EQ(LowerBound(*p), 110);
  // SmallGraph: x is read by conv (step 0) only; y written by add (step 2).
  absl::StatusOr<Problem> small = AnalyzeLiveness(SmallGraph(), 64);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(Find(*small, "x").end, 1);
  EXPECT_EQ(Find(*small, "y").start, 2);
}

TEST(LivenessTest, AnInputReadLaterLivesUntilThatRead) {
  Graph g = testing::IoChain();
  g.ops[2].inputs.push_back("x");  // op2 reads x again
  absl::StatusOr<Problem> p = AnalyzeLiveness(g, 64);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Find(*p, "x").start, 0);
  EXPECT_EQ(Find(*p, "x").end, 3);
}

TEST(LivenessTest, KeepInputsHoldsInputsForTheWholeRun) {
  absl::StatusOr<Problem> p =
      AnalyzeLiveness(testing::IoChain(), 64, nullptr, IoPolicy::kKeepInputs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Find(*p, "x").start, 0);
  EXPECT_EQ(Find(*p, "x").end, 4);
  // Outputs still from their producer.
  EXPECT_EQ(Find(*p, "y").start, 3);
  EXPECT_EQ(Find(*p, "y").end, 4);
  EXPECT_EQ(Find(*p, "a").end, 2);  // activations are not affected
}

TEST(LivenessTest, ExcludeKeepsTheRuntimeLifetimesForReports) {
  absl::StatusOr<Problem> p =
      AnalyzeLiveness(testing::IoChain(), 64, nullptr, IoPolicy::kExclude);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Find(*p, "x").end, 1);
  EXPECT_EQ(Find(*p, "y").start, 3);
}

TEST(LivenessTest, EdgeCasesOfInputsAndOutputs) {
  Graph g = testing::IoChain();
  g.tensors.push_back({"unused", 8});  // an input nothing reads
  g.tensors.push_back({"given", 8});   // an output no op writes
  g.tensors.push_back({"state", 8, 0, false, /*variable=*/true});
  g.ops[3].outputs.push_back("state");  // a variable that is an output
  g.inputs.push_back("unused");
  g.outputs = {"y", "x", "given", "state"};  // x: both input and output
  std::vector<TensorKind> kinds;
  absl::StatusOr<Problem> p = AnalyzeLiveness(g, 64, &kinds);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Find(*p, "unused").start, 0);  // live while the run starts
  EXPECT_EQ(Find(*p, "unused").end, 1);
  for (const char* name : {"x", "given", "state"}) {  // the whole run
    EXPECT_EQ(Find(*p, name).start, 0) << name;
    EXPECT_EQ(Find(*p, name).end, 4) << name;
  }
  EXPECT_EQ(kinds[0], TensorKind::kInput);
}

TEST(LivenessTest, IoPolicyNames) {
  EXPECT_EQ(IoPolicyName(IoPolicy::kRuntime), "arena");
  EXPECT_EQ(IoPolicyName(IoPolicy::kKeepInputs), "arena_keep_inputs");
  EXPECT_EQ(IoPolicyName(IoPolicy::kExclude), "exclude");
}

TEST(LivenessTest, UnusedOutputAndMultiOutputOps) {
  Graph g;
  g.tensors = {{"x", 8}, {"l", 8}, {"r", 8}, {"y", 8}};
  g.ops = {{"split", {"x"}, {"l", "r"}}, {"neg", {"l"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  absl::StatusOr<Problem> p = AnalyzeLiveness(g, 1);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Find(*p, "l").start, 0);
  EXPECT_EQ(Find(*p, "l").end, 2);
  // "r" is never read: live only while its producer runs.
  EXPECT_EQ(Find(*p, "r").start, 0);
  EXPECT_EQ(Find(*p, "r").end, 1);
}

TEST(LivenessTest, TensorAlignmentOverridesDefault) {
  Graph g = SmallGraph();
  g.tensors[2].alignment = 256;
  absl::StatusOr<Problem> p = AnalyzeLiveness(g, 64);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Find(*p, "a").alignment, 256);
}

struct BadGraphCase {
  std::string label;
  void (*mutate)(Graph*);
  std::string message;  // the error names what is wrong
};

class BadGraphTest : public ::testing::TestWithParam<BadGraphCase> {};

TEST_P(BadGraphTest, IsInvalidArgumentNamingTheCulprit) {
  Graph g = SmallGraph();
  GetParam().mutate(&g);
  absl::StatusOr<Problem> p = AnalyzeLiveness(g, 64);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadGraphTest,
    ::testing::Values(
        BadGraphCase{"UnknownTensor",
                     [](Graph* g) { g->ops[1].inputs = {"nope"}; },
                     "op 'relu' reads unknown tensor 'nope'"},
        BadGraphCase{"UnknownOutput",
                     [](Graph* g) { g->ops[1].outputs = {"zz"}; },
                     "op 'relu' writes unknown tensor 'zz'"},
        BadGraphCase{"DuplicateTensor",
                     [](Graph* g) {
                       g->tensors.push_back({"a", 4});
                     },
                     "duplicate tensor name 'a'"},
        BadGraphCase{"DuplicateOp", [](Graph* g) { g->ops[2].name = "conv"; },
                     "duplicate op name 'conv'"},
        BadGraphCase{"ProducedTwice",
                     [](Graph* g) { g->ops[2].outputs = {"b"}; },
                     "tensor 'b' is produced twice, by op 'relu' and by op "
                     "'add'"},
        BadGraphCase{"ReadBeforeProduced",
                     [](Graph* g) { std::swap(g->ops[0], g->ops[1]); },
                     "op 'relu' (step 0) reads tensor 'a' before op 'conv'"},
        BadGraphCase{"Cycle", [](Graph* g) { g->ops[1].inputs = {"b"}; },
                     "cycle: op 'relu' reads its own output 'b'"},
        BadGraphCase{"ZeroSize", [](Graph* g) { g->tensors[3].size_bytes = 0; },
                     "tensor 'b' has size 0"},
        BadGraphCase{"NegativeSize",
                     [](Graph* g) { g->tensors[3].size_bytes = -5; },
                     "tensor 'b' has size -5"},
        BadGraphCase{"Overflow",
                     [](Graph* g) {
                       g->tensors[2].size_bytes = int64_t{1} << 61;
                       g->tensors[3].size_bytes = int64_t{1} << 62;
                     },
                     "sizes overflow 64 bits at tensor 'b'"},
        BadGraphCase{"BadAlignment",
                     [](Graph* g) { g->tensors[2].alignment = 48; },
                     "tensor 'a' alignment 48 is not a power of two"},
        BadGraphCase{"InputProduced",
                     [](Graph* g) { g->inputs.push_back("a"); },
                     "graph input 'a' is produced by op 'conv'"},
        BadGraphCase{"UnknownGraphOutput",
                     [](Graph* g) { g->outputs.push_back("q"); },
                     "unknown graph output 'q'"},
        BadGraphCase{"NoTensors",
                     [](Graph* g) {
                       g->tensors.clear();
                       g->ops.clear();
                     },
                     "graph 'small' has no tensors"},
        BadGraphCase{"NoOps", [](Graph* g) { g->ops.clear(); },
                     "graph 'small' has no ops"},
        BadGraphCase{"UnnamedOp", [](Graph* g) { g->ops[1].name.clear(); },
                     "op #1 has no name"}),
    [](const auto& info) { return info.param.label; });

TEST(LivenessTest, KindsOfTensors) {
  Graph g = SmallGraph();
  g.tensors.push_back({"k", 8, 0, /*constant=*/true});  // a Constant node's
  g.tensors.push_back({"state", 16, 0, false, /*variable=*/true});
  g.ops.push_back({"const", {}, {"k"}});
  g.ops.push_back({"update", {"k", "state"}, {}});
  std::vector<TensorKind> kinds;
  absl::StatusOr<Problem> p = AnalyzeLiveness(g, 64, &kinds);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(kinds, ::testing::ElementsAre(
                         TensorKind::kInput, TensorKind::kWeight,
                         TensorKind::kActivation, TensorKind::kActivation,
                         TensorKind::kOutput, TensorKind::kWeight,
                         TensorKind::kVariable));
  // Weights and variables live for the whole schedule; inputs and outputs
  // as a runtime has them. None is an activation.
  for (const char* name : {"w", "k", "state"}) {
    EXPECT_EQ(Find(*p, name).start, 0) << name;
    EXPECT_EQ(Find(*p, name).end, 5) << name;
  }
  EXPECT_EQ(Find(*p, "x").end, 1);
  EXPECT_EQ(Find(*p, "y").start, 2);
  EXPECT_EQ(Find(*p, "y").end, 5);
  for (const char* name : {"x", "w", "y", "k", "state"}) {
    EXPECT_TRUE(Find(*p, name).persistent) << name;
  }
  EXPECT_EQ(TensorKindName(TensorKind::kVariable), "variable");
}

TEST(LivenessTest, AGraphInputThatIsAlsoAnOutputIsAnInput) {
  Graph g;
  g.tensors = {{"x", 4}, {"y", 4}};
  g.ops = {{"copy", {"x"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"x", "y"};
  std::vector<TensorKind> kinds;
  ASSERT_TRUE(AnalyzeLiveness(g, 64, &kinds).ok());
  EXPECT_THAT(kinds,
              ::testing::ElementsAre(TensorKind::kInput, TensorKind::kOutput));
}

TEST(LivenessTest, ConstantAndVariableAtOnceIsRefused) {
  Graph g = SmallGraph();
  g.tensors[1].constant = true;
  g.tensors[1].variable = true;
  absl::StatusOr<Problem> p = AnalyzeLiveness(g, 64);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("'w'"));
}

// On threads the name sets are built at once and the ops' names looked up
// in chunks: a large graph gets the same buffers and kinds as on one.
TEST(LivenessTest, SameBuffersOnAnyThreads) {
  base::WorkerPool pool(8, 64);
  Graph g = testing::RandomGraph(30000, 5);
  // Tensors read in every chunk of ops too, their last readers in the
  // last chunks.
  for (int step = 1000; step < 30000; step += 997) {
    g.ops[step].inputs.push_back(g.ops[step % 7].outputs[0]);
  }
  std::vector<TensorKind> want_kinds, kinds;
  const absl::StatusOr<Problem> want =
      AnalyzeLiveness(g, 64, &want_kinds, IoPolicy::kRuntime, nullptr);
  ASSERT_TRUE(want.ok());
  for (int threads : {2, 4, 16}) {
    const absl::StatusOr<Problem> got = AnalyzeLiveness(
        g, 64, &kinds, IoPolicy::kRuntime, nullptr, {&pool, threads});
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->buffers.size(), want->buffers.size());
    for (size_t i = 0; i < want->buffers.size(); ++i) {
      const Buffer& a = got->buffers[i];
      const Buffer& b = want->buffers[i];
      ASSERT_EQ(std::make_tuple(a.name, a.start, a.end, a.size, a.alignment,
                                a.persistent),
                std::make_tuple(b.name, b.start, b.end, b.size, b.alignment,
                                b.persistent))
          << threads << " threads, buffer " << i;
    }
    EXPECT_EQ(kinds, want_kinds) << threads << " threads";
  }
}

// Each case's fault put into `base`: the one pass's error names `message`,
// and 2, 4 and 16 threads give that error.
void ExpectFirstErrorOnAnyThreads(
    const Graph& base,
    const std::vector<std::pair<void (*)(Graph*), std::string>>& cases) {
  base::WorkerPool pool(8, 64);
  for (const auto& [mutate, message] : cases) {
    Graph g = base;
    mutate(&g);
    const absl::StatusOr<Problem> one = AnalyzeLiveness(g, 64);
    EXPECT_THAT(one.status().message(), HasSubstr(message));
    for (int threads : {2, 4, 16}) {
      const absl::StatusOr<Problem> got = AnalyzeLiveness(
          g, 64, nullptr, IoPolicy::kRuntime, nullptr, {&pool, threads});
      EXPECT_EQ(got.status(), one.status()) << threads << " threads";
    }
  }
}

// Where a large graph has several faults, the error is the one a pass in
// op order meets first, on any threads: the op names and writes are
// checked before any read.
TEST(LivenessTest, FirstErrorOnAnyThreads) {
  const Graph base = testing::RandomGraph(20000, 9);
  const std::vector<std::pair<void (*)(Graph*), std::string>> cases = {
      {[](Graph* g) {
         g->ops[15000].inputs[0] = "nope";
         g->ops[17000].outputs[0] = "zz";
       },
       "op 'op17000' writes unknown tensor 'zz'"},
      {[](Graph* g) {
         g->ops[12000].name = "op5";
         g->ops[11000].outputs.push_back(g->ops[10000].outputs[0]);
       },
       "tensor '" + base.ops[10000].outputs[0] +
           "' is produced twice, by op 'op10000' and by op 'op11000'"},
      {[](Graph* g) {
         g->ops[9000].name = "op5";
         g->ops[11000].outputs.push_back(g->ops[10000].outputs[0]);
       },
       "duplicate op name 'op5'"},
      {[](Graph* g) {
         g->ops[13000].inputs.push_back(g->ops[14000].outputs[0]);
         g->ops[16000].inputs.push_back("nope");
       },
       "op 'op13000' (step 13000) reads tensor '" + base.ops[14000].outputs[0] +
           "' before op 'op14000'"},
      {[](Graph* g) { g->ops[19000].inputs.push_back("nope"); },
       "op 'op19000' reads unknown tensor 'nope'"},
      {[](Graph* g) { g->ops[18000].name.clear(); }, "op #18000 has no name"},
      {[](Graph* g) {
         for (int t : {25000, 5000}) {
           g->tensors[t].constant = g->tensors[t].variable = true;
         }
       },
       "tensor '" + base.tensors[5000].name +
           "' is marked both constant and variable"},
      {[](Graph* g) {
         g->ops[16000].outputs.push_back(g->ops[16000].outputs[0]);
       },
       "tensor '" + base.ops[16000].outputs[0] +
           "' is produced twice, by op 'op16000' and by op 'op16000'"},
      {[](Graph* g) {
         g->ops[12000].inputs.push_back(g->ops[12000].outputs[0]);
         g->ops[12500].inputs.push_back(g->ops[13000].outputs[0]);
       },
       "cycle: op 'op12000' reads its own output '" +
           base.ops[12000].outputs[0] + "'"},
      {[](Graph* g) {
         g->ops[18000].name.clear();
         g->ops[18500].name = "op7";
       },
       "op #18000 has no name"},
      {[](Graph* g) {
         g->ops[19999].name = "op3";
         g->ops[17000].name = "op300";
         g->ops[18000].name.clear();
       },
       "duplicate op name 'op300'"},
  };
  ExpectFirstErrorOnAnyThreads(base, cases);
}

// The tensors' own faults (names, sizes, alignments, the sum of sizes)
// come first, and the first in tensor order is the one reported, however
// many threads index the names (on threads each fills a shard of them).
TEST(LivenessTest, FirstTensorErrorOnAnyThreads) {
  const Graph base = testing::RandomGraph(20000, 3);
  ASSERT_GT(base.tensors.size(), 25000u);
  const std::string name100 = base.tensors[100].name;
  const std::string name200 = base.tensors[200].name;
  const std::vector<std::pair<void (*)(Graph*), std::string>> cases = {
      {[](Graph* g) {
         g->tensors[20000].name = g->tensors[100].name;
         g->tensors[15000].name = g->tensors[200].name;
       },
       "duplicate tensor name '" + name200 + "'"},
      {[](Graph* g) {
         g->tensors[25000].name.clear();
         g->tensors[24000].name.clear();
         g->tensors[24500].name = g->tensors[100].name;
       },
       "tensor #24000 has no name"},
      {[](Graph* g) {
         g->tensors[5000].size_bytes = 0;
         g->tensors[6000].name = g->tensors[100].name;
       },
       "tensor '" + base.tensors[5000].name + "' has size 0"},
      {[](Graph* g) {
         g->tensors[7000].name = g->tensors[100].name;  // and a bad size:
         g->tensors[7000].size_bytes = -1;              // the name first
         g->tensors[9000].alignment = 3;
       },
       "duplicate tensor name '" + name100 + "'"},
      {[](Graph* g) {
         g->tensors[9000].alignment = 3;
         g->tensors[9001].name.clear();
       },
       "tensor '" + base.tensors[9000].name + "' alignment 3"},
      {[](Graph* g) {
         g->tensors[3000].size_bytes = Bytes{1} << 61;
         g->tensors[4000].size_bytes = Bytes{1} << 61;
         g->tensors[5000].name = g->tensors[10].name;
       },
       "sizes overflow 64 bits at tensor '" + base.tensors[4000].name + "'"},
      {[](Graph* g) {
         g->tensors[20000].size_bytes = std::numeric_limits<Bytes>::max();
         g->tensors[21000].name.clear();
       },
       "sizes overflow 64 bits at tensor '" + base.tensors[20000].name + "'"},
      {[](Graph* g) {
         g->ops[10].name = "op3";  // an op's fault comes after any tensor's
         g->tensors[19000].size_bytes = -5;
       },
       "tensor '" + base.tensors[19000].name + "' has size -5"},
  };
  ExpectFirstErrorOnAnyThreads(base, cases);
}

}  // namespace
}  // namespace memplan::planner
