// The memplan CLI and memplan-server as a new user meets them: help texts,
// versions, typos, inspect, output a build can cache, and files a hostile
// or careless user hands over (endless input, directories, deep JSON, huge
// values, unwritable outputs). Every case ends with a clear message and a
// sysexits code, never an abort or a hang.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.pb.h"
#include "tests/testing/process.h"

namespace memplan {
namespace {

using testing::CommandResult;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kCli = MEMPLAN_CLI_PATH;
const std::string kServer = MEMPLAN_SERVER_PATH;
const std::string kExamples = std::string(MEMPLAN_SOURCE_DIR) + "/examples/";

CommandResult Cli(const std::vector<std::string>& args,
                  const std::string& input = "", double timeout_s = 60) {
  return testing::RunCommand(kCli, args, input, timeout_s);
}

class CliUsabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/memplan_cli_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(CliUsabilityTest, ServerHelpListsItsFlagsWithDefaults) {
  CommandResult r = testing::RunCommand(kServer, {"--help"}, "", 30);
  EXPECT_EQ(r.exit_code, 0);
  const std::string text = r.out + r.err;
  EXPECT_THAT(text, Not(HasSubstr("No flags matched")));
  EXPECT_THAT(text, AllOf(HasSubstr("--address"), HasSubstr("--max_in_flight"),
                          HasSubstr("default: 64"),
                          HasSubstr("--max_benchmark_seconds")));
}

TEST_F(CliUsabilityTest, VersionsNameTheCommitAndTheBuildType) {
  CommandResult server = testing::RunCommand(kServer, {"--version"}, "", 30);
  const std::string server_text = server.out + server.err;
  EXPECT_THAT(server_text, HasSubstr("memplan-server 0.2.0 (commit "));
  EXPECT_THAT(server_text, Not(HasSubstr("NDEBUG")));
  CommandResult cli = Cli({"--version"});
  EXPECT_EQ(cli.exit_code, 0);
  EXPECT_THAT(cli.out, HasSubstr("memplan 0.2.0 (commit "));
  EXPECT_THAT(cli.out, HasSubstr(" build)"));
}

TEST_F(CliUsabilityTest, EveryCommandHasHelpWithDefaultsAndNames) {
  CommandResult plan = Cli({"plan", "--help"});
  EXPECT_EQ(plan.exit_code, 0);
  EXPECT_THAT(plan.out,
              AllOf(HasSubstr("--strategy=NAME"), HasSubstr("best_fit_size"),
                    HasSubstr("default 1000"), HasSubstr("500ms, 10s"),
                    HasSubstr("json, csv, onnx, tflite"),
                    HasSubstr("--emit=FORMAT"), HasSubstr("--weights")));
  EXPECT_EQ(Cli({"help", "plan"}).out, plan.out);
  CommandResult bench = Cli({"bench", "--help"});
  EXPECT_THAT(bench.out, AllOf(HasSubstr("pool_indexed"), HasSubstr("larson"),
                               HasSubstr("--arena_allocator")));
  EXPECT_THAT(Cli({"inspect", "--help"}).out, HasSubstr("symbolic dims"));
  EXPECT_THAT(Cli({"help"}).out, HasSubstr("memplan inspect"));
}

TEST_F(CliUsabilityTest, TyposGetTheClosestFlagAndDurationsTheirUnits) {
  CommandResult typo = Cli({"plan", "--stratgy=auto", kExamples + "resnet50.json"});
  EXPECT_EQ(typo.exit_code, 64);
  EXPECT_THAT(typo.err, HasSubstr("unknown flag --stratgy; did you mean "
                                  "--strategy?"));
  CommandResult deadline =
      Cli({"plan", "--deadline", "5", kExamples + "resnet50.json"});
  EXPECT_EQ(deadline.exit_code, 64);
  EXPECT_THAT(deadline.err, HasSubstr("durations need a unit: 500ms, 10s"));
  CommandResult command = Cli({"plna", kExamples + "resnet50.json"});
  EXPECT_EQ(command.exit_code, 64);
  EXPECT_THAT(command.err, HasSubstr("unknown command 'plna'"));
}

TEST_F(CliUsabilityTest, UnknownFilesAreNamedForWhatTheyAre) {
  CommandResult png = Cli({"plan", Write("picture", "\x89PNG\r\n\x1a\nxxxx")});
  EXPECT_EQ(png.exit_code, 65);
  EXPECT_THAT(png.err, HasSubstr("unsupported input format: it looks like a "
                                 "PNG image"));
  // A CSV without the .csv extension is read as CSV, by plan and bench alike.
  const std::string csv = Write("trace.txt", "id,lower,upper,size\na,0,2,8\n");
  EXPECT_EQ(Cli({"plan", csv}).exit_code, 0);
  EXPECT_EQ(Cli({"bench", csv, "--allocators=bfc"}).exit_code, 0);
}

TEST_F(CliUsabilityTest, InspectDescribesGraphsAndBufferLists) {
  CommandResult graph = Cli({"inspect", kExamples + "resnet50.json"});
  ASSERT_EQ(graph.exit_code, 0) << graph.err;
  EXPECT_THAT(graph.out, AllOf(HasSubstr("tensors:       231"),
                               HasSubstr("weights:"), HasSubstr("lower bound:")));
  CommandResult csv =
      Cli({"inspect", "--format=json", kExamples + "minimalloc_example.csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  v1::InputSummary s;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(csv.out, &s).ok());
  EXPECT_EQ(s.format(), "csv");
  EXPECT_GT(s.buffers(), 0);
  EXPECT_GT(s.lower_bound_bytes(), 0);
}

TEST_F(CliUsabilityTest, JsonABuildCanCacheIsByteIdentical) {
  const std::string file = kExamples + "transformer_encoder.json";
  CommandResult a = Cli({"plan", "--format=json", "--no_timings", file});
  CommandResult b = Cli({"plan", "--format=json", "--no_timings", file});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_THAT(a.out, Not(HasSubstr("stage_micros\": {\n")));
  EXPECT_THAT(a.out, AllOf(HasSubstr("\"schema_version\": 2"),
                           HasSubstr("\"kind\": \"activation\""),
                           HasSubstr("\"end_step\""),
                           HasSubstr("\"alignment\": \"64\"")));
}

TEST_F(CliUsabilityTest, HostileInputEndsWithAClearErrorQuickly) {
  // Endless standard input stops at the input limit.
  CommandResult zero = testing::RunCommand(
      "/bin/sh", {"-c", kCli + " plan --max_input_bytes=1048576 - </dev/zero"},
      "", 60);
  EXPECT_EQ(zero.exit_code, 65) << zero.err;
  EXPECT_THAT(zero.err, HasSubstr("larger than 1048576 bytes"));
  // A directory.
  CommandResult dir = Cli({"plan", dir_});
  EXPECT_EQ(dir.exit_code, 66);
  EXPECT_THAT(dir.err, HasSubstr("is a directory"));
  // JSON nested 100,000 deep.
  CommandResult deep = Cli(
      {"plan", Write("deep.json", std::string(100000, '[') +
                                      std::string(100000, ']'))},
      "", 30);
  EXPECT_EQ(deep.exit_code, 65);
  EXPECT_THAT(deep.err, HasSubstr("nested 100000 levels deep"));
  // A size past 2^63 names the row's buffer and the column.
  CommandResult huge = Cli({"plan", Write("huge.csv",
                                          "id,lower,upper,size\n"
                                          "big,0,3,9223372036854775808\n")});
  EXPECT_EQ(huge.exit_code, 65);
  EXPECT_THAT(huge.err, HasSubstr("huge.csv:2: buffer 'big': size "
                                  "'9223372036854775808' is out of range"));
}

TEST_F(CliUsabilityTest, HugeLifetimesPlanWithoutMemoryPerStep) {
  std::string csv = "id,lower,upper,size\n";
  for (int i = 0; i < 100; ++i) {
    csv += "s" + std::to_string(i) + "," + std::to_string(i) + "," +
           std::to_string(i + 1) + ",16\n";
  }
  for (const char* end : {"2147483648", "4611686018427387904"}) {
    CommandResult r = Cli({"plan", "--format=json",
                           Write("long.csv", csv + "long,0," + end + ",16\n")});
    EXPECT_EQ(r.exit_code, 0) << end << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("\"arena_size_bytes\": \"32\"")) << end;
  }
}

TEST_F(CliUsabilityTest, OutputThatCannotBeWrittenIsExit73AndLeavesNothing) {
  CommandResult r = Cli({"plan", kExamples + "resnet50.json", "--emit", "svg",
                         "-o", dir_ + "/no/such/dir/plan.svg"});
  EXPECT_EQ(r.exit_code, 73);
  EXPECT_THAT(r.err, HasSubstr("cannot write"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/no"));
}

TEST_F(CliUsabilityTest, InProcessOverALimitIsBadInputNotRetryLater) {
  CommandResult r = Cli({"plan", "--max_input_bytes=100",
                         kExamples + "transformer_encoder.json"});
  EXPECT_EQ(r.exit_code, 65) << r.err;
  EXPECT_THAT(r.err, HasSubstr("RESOURCE_EXHAUSTED"));
}

}  // namespace
}  // namespace memplan
