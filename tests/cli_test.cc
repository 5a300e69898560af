// The memplan CLI as a user runs it: in-process and through a real
// memplan-server, output formats, and exit codes.
#include "tests/testing/cli.h"

#include <signal.h>

#include <string>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/shared_server.h"

namespace memplan {
namespace {

using testing::CommandResult;
using ::testing::HasSubstr;

const std::string kExamples = std::string(MEMPLAN_SOURCE_DIR) + "/examples/";

using testing::ParsePlanJson;
using testing::RunCli;

using CliTest = testing::SharedServerTest;

TEST_F(CliTest, TextReportForTheTransformerExample) {
  CommandResult r = RunCli({"plan", kExamples + "transformer_encoder.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("arena:"));
  EXPECT_THAT(r.out, HasSubstr("lower bound:"));
  EXPECT_THAT(r.out, HasSubstr("efficiency:"));
  EXPECT_THAT(r.out, HasSubstr("saving"));
  EXPECT_THAT(r.out, HasSubstr("pool        size  members"));
}

TEST_F(CliTest, InProcessAndServerGiveTheSamePlan) {
  for (const char* file : {"resnet50.json", "transformer_encoder.json",
                           "minimalloc_example.csv"}) {
    CommandResult local = RunCli({"plan", "--format=json", kExamples + file});
    CommandResult remote = RunCli({"plan", "--format", "json", "--server",
                                   server_->address(), kExamples + file});
    ASSERT_EQ(local.exit_code, 0) << local.err;
    ASSERT_EQ(remote.exit_code, 0) << remote.err;
    v1::PlanResponse a = ParsePlanJson(local.out),
                     b = ParsePlanJson(remote.out);
    a.clear_stage_micros();
    b.clear_stage_micros();
    b.clear_cached();  // the server's plan cache may have served it
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << file;
    EXPECT_GT(a.assignments_size(), 0);
  }
}

TEST_F(CliTest, JsonUsesTheContractFieldNames) {
  CommandResult r =
      RunCli({"plan", "--format=json", kExamples + "transformer_encoder.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* field :
       {"\"arena_size_bytes\"", "\"lower_bound_bytes\"", "\"naive_bytes\"",
        "\"assignments\"", "\"pool_id\"", "\"first_step\"", "\"last_step\"",
        "\"pools\"", "\"size_bytes\"", "\"strategy\"", "\"stage_micros\""}) {
    EXPECT_THAT(r.out, HasSubstr(field));
  }
}

// What a build pipeline checks before comparing plans: whether the clock
// cut the search (time_limited), here and through the server.
TEST_F(CliTest, TimeLimitedSaysWhenTheClockCutTheSearch) {
  const std::string hard =
      std::string(MEMPLAN_SOURCE_DIR) + "/bench/data/minimalloc/D.1048576.csv";
  const std::vector<std::string> server = {"--server", server_->address()};
  for (bool remote : {false, true}) {
    std::vector<std::string> cut = {"plan", "--optimize", "--time_budget_ms=1",
                                    hard};
    std::vector<std::string> bounded = {"plan",
                                        "--optimize",
                                        "--effort=2000",
                                        "--time_budget_ms=60000",
                                        "--format=json",
                                        "--no_timings",
                                        hard};
    if (remote) {
      cut.insert(cut.begin() + 1, server.begin(), server.end());
      bounded.insert(bounded.begin() + 1, server.begin(), server.end());
    }
    CommandResult text = RunCli(cut);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_THAT(text.out, HasSubstr("search:       stopped by the time budget"))
        << "remote " << remote;
    cut.insert(cut.begin() + 1, "--format=json");
    CommandResult json = RunCli(cut);
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_TRUE(ParsePlanJson(json.out).time_limited()) << "remote " << remote;

    CommandResult a = RunCli(bounded), b = RunCli(bounded);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    v1::PlanResponse plan = ParsePlanJson(a.out);
    EXPECT_FALSE(plan.time_limited()) << "remote " << remote;
    EXPECT_FALSE(plan.proven_optimal());  // the effort stopped the search
    EXPECT_EQ(a.out, b.out) << "remote " << remote;
  }
}

TEST_F(CliTest, CsvOutputIsMiniMallocsFormat) {
  CommandResult r =
      RunCli({"plan", "--format=csv", kExamples + "minimalloc_example.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines =
      absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "id,lower,upper,size,offset");
  EXPECT_THAT(lines[1], ::testing::StartsWith("b1,0,3,4,"));
}

// --alignment sets the alignment of a CSV's buffers when the file has no
// alignment column (MiniMalloc's default, 1, otherwise); a column's values
// stay as written. In-process and through the server alike.
TEST_F(CliTest, AlignmentFlagAppliesToACsvWithoutAlignments) {
  const std::string plain = "id,lower,upper,size\na,0,2,8\nb,1,3,8\n";
  const std::string with_column =
      "id,lower,upper,size,alignment\na,0,2,8,8\nb,1,3,8,8\n";
  for (bool remote : {false, true}) {
    std::vector<std::string> args = {"plan", "--format=json",
                                     "--input-format=csv"};
    if (remote) {
      args.push_back("--server");
      args.push_back(server_->address());
    }
    const auto offsets = [&](const std::vector<std::string>& flags,
                             const std::string& csv) {
      std::vector<std::string> all = args;
      all.insert(all.end(), flags.begin(), flags.end());
      all.push_back("-");
      CommandResult r = RunCli(all, csv);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      const v1::PlanResponse plan = ParsePlanJson(r.out);
      std::vector<int64_t> out;
      for (const v1::Assignment& a : plan.assignments()) {
        out.push_back(a.offset());
      }
      return out;
    };
    EXPECT_THAT(offsets({}, plain), ::testing::UnorderedElementsAre(0, 8))
        << "remote " << remote;
    EXPECT_THAT(offsets({"--alignment=64"}, plain),
                ::testing::UnorderedElementsAre(0, 64))
        << "remote " << remote;
    EXPECT_THAT(offsets({"--alignment=64"}, with_column),
                ::testing::UnorderedElementsAre(0, 8))
        << "remote " << remote;
  }
}

TEST_F(CliTest, ReadsStandardInput) {
  CommandResult r = RunCli({"plan", "--input-format=csv", "-"},
                           "id,lower,upper,size\na,0,2,8\nb,1,3,8\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("arena:        16 bytes"));
}

TEST_F(CliTest, ExitCodes) {
  EXPECT_EQ(RunCli({}).exit_code, 64);
  EXPECT_EQ(RunCli({"frobnicate"}).exit_code, 64);
  EXPECT_EQ(RunCli({"plan", "--no-such-flag", "x.json"}).exit_code, 64);
  EXPECT_EQ(RunCli({"plan", "--alignment=abc", "x.json"}).exit_code, 64);
  EXPECT_EQ(RunCli({"plan"}).exit_code, 64);
  EXPECT_EQ(RunCli({"--help"}).exit_code, 0);
  CommandResult missing = RunCli({"plan", "/nonexistent/graph.json"});
  EXPECT_EQ(missing.exit_code, 66);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/graph.json"));
  CommandResult bad =
      RunCli({"plan", "--input-format=json", "-"}, "{\n \"graph\": [}\n");
  EXPECT_EQ(bad.exit_code, 65);
  EXPECT_THAT(bad.err, HasSubstr("<stdin>:2: malformed JSON"));
  CommandResult badcsv = RunCli({"plan", "--input-format=csv", "-"},
                                "id,lower,upper,size\na,0,x,8\n");
  EXPECT_EQ(badcsv.exit_code, 65);
  EXPECT_THAT(badcsv.err,
              HasSubstr("<stdin>:2: buffer 'a': upper 'x' is not an integer"));
  CommandResult invalid = RunCli({"plan", "--input-format=csv", "-"},
                                 "id,lower,upper,size\na,3,1,8\n");
  EXPECT_EQ(invalid.exit_code, 65);
  EXPECT_THAT(invalid.err, HasSubstr("buffer 'a' has start 3 >= end 1"));
  CommandResult capacity =
      RunCli({"plan", "--capacity=8", "--input-format=csv", "-"},
             "id,lower,upper,size\na,0,2,8\nb,1,3,8\n");
  EXPECT_EQ(capacity.exit_code, 65);
  EXPECT_THAT(capacity.err, HasSubstr("infeasible"));
}

TEST_F(CliTest, BadInputThroughTheServerIsExit65) {
  CommandResult r = RunCli(
      {"plan", "--server", server_->address(), "--input-format=json", "-"},
      R"({"graph": {"name": "g", "tensors": [{"name": "a",
                        "size_bytes": 4}], "ops": [{"name": "o", "inputs":
                        ["zz"], "outputs": ["a"]}]}})");
  EXPECT_EQ(r.exit_code, 65);
  EXPECT_THAT(r.err, HasSubstr("op 'o' reads unknown tensor 'zz'"));
}

// The graph of docs/json-contract.md: x(256) -fc(w)-> h(512) -out-> y(256).
constexpr char kMlp[] = R"({"graph": {"name": "mlp",
    "tensors": [{"name": "x", "size_bytes": "256"},
                {"name": "w", "size_bytes": "128", "constant": true},
                {"name": "h", "size_bytes": "512"},
                {"name": "y", "size_bytes": "256"}],
    "ops": [{"name": "fc", "inputs": ["x", "w"], "outputs": ["h"]},
            {"name": "out", "inputs": ["h"], "outputs": ["y"]}],
    "inputs": ["x"], "outputs": ["y"]}})";

// Graph inputs and outputs live as runtimes run them by default, in-process
// and through the server alike, and the JSON and the report say so.
TEST_F(CliTest, InputsAndOutputsLiveAsRuntimesRunThem) {
  struct Case {
    const char* io;  // --io, "" for none
    int64_t arena;   // expected arena
    const char* echo;
  };
  // Default: x dies after fc (step 0) and y is born at out (step 1), so
  // the peak is x + h = h + y = 768 (held for the whole run: 1024).
  // arena_keep_inputs: x + h + y at step 1 = 1024. exclude: h alone.
  for (const Case& c :
       {Case{"", 768, "arena"},
        Case{"--io=arena_keep_inputs", 1024, "arena_keep_inputs"},
        Case{"--io=exclude", 512, "exclude"}}) {
    for (bool remote : {false, true}) {
      std::vector<std::string> args = {"plan", "--format=json",
                                       "--input-format=json", "-"};
      if (*c.io != '\0') args.insert(args.begin() + 1, c.io);
      if (remote)
        args.insert(args.begin() + 1, "--server=" + server_->address());
      CommandResult r = RunCli(args, kMlp);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      v1::PlanResponse plan = ParsePlanJson(r.out);
      EXPECT_EQ(plan.arena_size_bytes(), c.arena) << c.io << remote;
      EXPECT_EQ(plan.options().io(), c.echo) << remote;
      if (std::string(c.echo) == "exclude") continue;
      ASSERT_EQ(plan.assignments(0).name(), "x");
      EXPECT_EQ(plan.assignments(0).end_step(), c.arena == 768 ? 1 : 2);
      EXPECT_EQ(plan.assignments(2).name(), "y");
      EXPECT_EQ(plan.assignments(2).first_step(), 1);
    }
    std::vector<std::string> text = {"plan", "--input-format=json", "-"};
    if (*c.io != '\0') text.insert(text.begin() + 1, c.io);
    CommandResult r = RunCli(text, kMlp);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out,
                HasSubstr(std::string("io:           ") + c.echo + " ("));
  }
  CommandResult bad =
      RunCli({"plan", "--io=keep", "--input-format=json", "-"}, kMlp);
  EXPECT_EQ(bad.exit_code, 64);  // the flag's value: a usage error
  EXPECT_THAT(bad.err, HasSubstr("\"arena_keep_inputs\""));
}

TEST_F(CliTest, UnreachableServerIsExit69) {
  // Port 1 on loopback: nothing listens there.
  CommandResult r = RunCli({"plan", "--server=127.0.0.1:1", "--deadline=3s",
                            kExamples + "minimalloc_example.csv"});
  EXPECT_TRUE(r.exit_code == 69 || r.exit_code == 75) << r.exit_code << r.err;
}

TEST_F(CliTest, HealthExitCodes) {
  CommandResult ok = RunCli({"health", "--server", server_->address()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("SERVING"));
  CommandResult service = RunCli({"health", "--server", server_->address(),
                                  "--service=memplan.v1.MemoryPlanner"});
  EXPECT_EQ(service.exit_code, 0);
  CommandResult down =
      RunCli({"health", "--server=127.0.0.1:1", "--deadline=2s"});
  EXPECT_EQ(down.exit_code, 2);
  EXPECT_EQ(RunCli({"health"}).exit_code, 1);
}

}  // namespace
}  // namespace memplan
