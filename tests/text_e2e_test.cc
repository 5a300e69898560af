// Untrusted text end to end (issue 31): names holding invalid UTF-8,
// surrogates, overlong forms, code points above U+10FFFF, noncharacters and
// controls, in a graph request, an ONNX model and a TFLite model. Planned
// in-process, by the CLI and by a real memplan-server read with a strict
// proto3 client (tests/testing/strict_client.py: Debian's python3-grpcio):
// every response parses, every name in it is clean and the names stay
// distinct; the SVG and HTML open in xmllint; C headers compile with
// `cc -std=c99 -pedantic-errors -Werror`, two models' headers in one
// program included.

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/text.h"
#include "engine/plan.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "onnx/testing/onnx_builder.h"
#include "tests/testing/files.h"
#include "tests/testing/process.h"
#include "tests/testing/requests.h"
#include "tflite/testing/tflite_builder.h"

namespace memplan {
namespace {

namespace ts = ::memplan::tflite_schema;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// The names and a few more of each class, as given and as every
// output must show them.
struct HostileName {
  std::string raw;
  std::string clean;
  bool utf8 = false;  // valid UTF-8: can be sent in a proto3 string
};
const std::vector<HostileName>& Hostile() {
  static const auto* names = new std::vector<HostileName>{
      {"\xff", "\\xFF"},
      {"\xed\xa0\x80", "\\xED\\xA0\\x80"},                   // a surrogate
      {"\xe0\x80\x80", "\\xE0\\x80\\x80"},                   // overlong
      {"\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80"},          // above U+10FFFF
      {"v\xff", "v\\xFF"},                                   // the two that
      {"v\xfe", "v\\xFE"},                                   // printed as "v"
      {"u\xef\xbf\xbe", "u\\xEF\\xBF\\xBE", true},           // U+FFFE
      {"w\\xFF", "w\\\\xFF", true},                          // the text \xFF
      {"x\ny</title>&", "x\\x0Ay</title>&", true},           // markup, newline
      {"caf\xc3\xa9 */ ?\?/", "caf\xc3\xa9 */ ?\?/", true},  // kept as it is
      // U+202E reverses what follows as shown (a C header's comment, a
      // terminal); U+2028 ends a line.
      {"rtl\xe2\x80\xae", "rtl\\xE2\\x80\\xAE", true},
      {"ls\xe2\x80\xa8", "ls\\xE2\\x80\\xA8", true},
  };
  return *names;
}

// The names as every output must show them (only those of valid UTF-8
// when `utf8_only`).
std::vector<std::string> CleanNames(bool utf8_only = false) {
  std::vector<std::string> out;
  for (const HostileName& n : Hostile()) {
    if (n.utf8 || !utf8_only) out.push_back(n.clean);
  }
  return out;
}

void AskForFiles(v1::PlanRequest* request) {
  for (const char* format : {"c_header", "svg", "html"}) {
    request->add_emit(format);
  }
}

// A chain of ops over tensors named by Hostile() (only those of valid UTF-8
// when `utf8_only`: what a request on the wire can carry), ops and graph
// too.
v1::PlanRequest GraphRequest(bool utf8_only = false) {
  std::vector<testing::ChainTensor> tensors;
  std::vector<std::string> ops;
  for (const HostileName& n : Hostile()) {
    if (utf8_only && !n.utf8) continue;
    tensors.push_back({n.raw, 64});
    ops.push_back("op " + n.raw);
  }
  ops.pop_back();
  v1::PlanRequest request;
  *request.mutable_graph() = testing::ChainGraph(tensors, ops);
  request.mutable_graph()->set_name(utf8_only ? "graph \xef\xbf\xbf"
                                              : "graph \xc0\x80");
  AskForFiles(&request);
  return request;
}

// An ONNX model: Relu after Relu over values named by Hostile().
std::string OnnxModel() {
  formats::OnnxTestModel m(13);
  m.proto().mutable_graph()->set_name("onnx \xff");
  const std::vector<HostileName>& names = Hostile();
  m.graph().Input(names[0].raw, formats::kOnnxFloat, {"1", "16"});
  for (size_t i = 1; i < names.size(); ++i) {
    m.graph().Add("Relu", {names[i - 1].raw}, {names[i].raw},
                  "node " + names[i].raw);
  }
  m.graph().Output(names.back().raw, formats::kOnnxFloat, {"1", "16"});
  return m.Bytes();
}

// A TFLite model: RELUs over tensors named by Hostile(), `extra` more at
// the end (so that two models differ).
std::string TfliteModel(int extra = 0) {
  formats::testing::TfliteBuilder b;
  auto& g = b.Subgraph("main \xed\xa0\x80");
  std::vector<int> t;
  for (const HostileName& n : Hostile()) t.push_back(g.Tensor(n.raw, {1, 16}));
  for (int k = 0; k < extra; ++k) {
    t.push_back(g.Tensor(absl::StrCat("extra", k), {1, 16 + k}));
  }
  for (size_t i = 1; i < t.size(); ++i) {
    g.Op(ts::BuiltinOperator_RELU, {t[i - 1]}, {t[i]});
  }
  g.inputs = {t.front()};
  g.outputs = {t.back()};
  return b.Build();
}

v1::PlanRequest ModelRequest(const std::string& format, const std::string& data,
                             const std::string& name) {
  v1::PlanRequest request;
  request.mutable_model()->set_format(format);
  request.mutable_model()->set_data(data);
  request.mutable_model()->set_name(name);
  AskForFiles(&request);
  return request;
}

struct Case {
  std::string label;
  v1::PlanRequest request;
  std::vector<std::string> names;  // as every output must show them
};

// A request's strings travel as proto3 strings, which protobuf refuses
// unless they are UTF-8 (`on_the_wire`); model files are bytes.
std::vector<Case> Cases(bool on_the_wire) {
  return {{"graph", GraphRequest(on_the_wire), CleanNames(on_the_wire)},
          {"onnx",
           ModelRequest("onnx", OnnxModel(),
                        on_the_wire ? "dir/m\xef\xbf\xbfodel.onnx"
                                    : "dir/m\xffodel.onnx"),
           CleanNames()},
          {"tflite", ModelRequest("tflite", TfliteModel(), "model.tflite"),
           CleanNames()}};
}

// A folder for one test's files, inside one removed when the program ends.
std::string TempDir(const std::string& label) {
  static const testing::TestFiles root;
  const std::string dir = root.Path(label);
  EXPECT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  return dir;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs a shell command; its exit code and output.
testing::CommandResult Shell(const std::string& command) {
  return testing::RunCommand("/bin/sh", {"-c", command}, "", 120);
}

// What xmllint says of a file ("" when it opens cleanly). HTML: libxml2's
// HTML 4 parser does not know canvas and svg tags; that is all it may say.
std::string Xmllint(const std::string& path, bool html) {
  const testing::CommandResult r = Shell(
      absl::StrCat("xmllint ", html ? "--html " : "", "--noout '", path, "'"));
  if (r.exit_code == 127) return "xmllint is missing (libxml2-utils)";
  std::string complaints;
  const std::vector<std::string> lines = absl::StrSplit(r.err, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (html && std::regex_search(lines[i], std::regex("Tag \\w+ invalid$"))) {
      i += 2;  // the line quoted and the caret under it
      continue;
    }
    if (!lines[i].empty()) absl::StrAppend(&complaints, lines[i], "\n");
  }
  if (r.exit_code != 0 && complaints.empty()) {
    complaints = absl::StrCat("exit ", r.exit_code);
  }
  return complaints;
}

constexpr char kStrictCc[] =
    "cc -std=c99 -pedantic-errors -Werror -Wall -Wextra";

// Compiles `header` alone (with its IMPLEMENTATION) into an object; the
// compiler's complaints, or "".
std::string CompileHeader(const std::string& dir, const std::string& header) {
  WriteFile(dir + "/plan.h", header);
  const std::smatch id = [&] {
    std::smatch m;
    std::regex_search(header, m, std::regex("#ifndef MEMPLAN_(\\w+)_PLAN_H_"));
    return m;
  }();
  WriteFile(dir + "/plan.c",
            absl::StrCat("#define MEMPLAN_", id.size() > 1 ? id[1].str() : "",
                         "_IMPLEMENTATION\n#include \"plan.h\"\n"));
  const testing::CommandResult r = Shell(absl::StrCat(
      "cd '", dir, "' && ", kStrictCc, " -c plan.c -o plan.o 2>&1"));
  return r.exit_code == 0 ? "" : r.out + r.err;
}

// The tensor names of a response.
std::vector<std::string> Names(const v1::PlanResponse& r) {
  std::vector<std::string> names;
  for (const v1::Assignment& a : r.assignments()) names.push_back(a.name());
  for (const v1::UnplannedTensor& u : r.unplanned()) names.push_back(u.name());
  return names;
}

// Every emitted file of `files` opens: SVG and HTML in xmllint, the C
// header in the strict compiler.
void ExpectFilesOpen(
    const std::string& dir,
    const std::vector<std::pair<std::string, std::string>>& files) {
  ASSERT_EQ(files.size(), 3u);
  for (const auto& [format, data] : files) {
    SCOPED_TRACE(format);
    const std::string path = absl::StrCat(dir, "/plan.", format);
    WriteFile(path, data);
    // Each picture shows the names as the response does (HTML: in JSON).
    if (format == "svg") {
      EXPECT_EQ(Xmllint(path, false), "");
      EXPECT_THAT(data, HasSubstr("u\\xEF\\xBF\\xBE"));
    } else if (format == "html") {
      EXPECT_EQ(Xmllint(path, true), "");
      EXPECT_THAT(data, HasSubstr("u\\\\xEF\\\\xBF\\\\xBE"));
    } else {
      EXPECT_EQ(CompileHeader(dir, data), "");
    }
  }
}

TEST(TextInProcessTest, CleanDistinctNamesAndFilesThatOpen) {
  for (const Case& c : Cases(/*on_the_wire=*/false)) {
    SCOPED_TRACE(c.label);
    base::CancelToken cancel(absl::Now() + absl::Seconds(30));
    absl::StatusOr<v1::PlanResponse> r =
        engine::PlanToResponse(c.request, engine::Limits{}, nullptr, &cancel);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(Names(*r), UnorderedElementsAreArray(c.names));
    // What a strict parser reads: the bytes parse back to the same names.
    v1::PlanResponse back;
    ASSERT_TRUE(back.ParseFromString(r->SerializeAsString()));
    std::vector<std::pair<std::string, std::string>> files;
    for (const v1::EmittedFile& f : r->files()) {
      files.push_back({f.format(), f.data()});
    }
    ExpectFilesOpen(TempDir("in_process_" + c.label), files);
  }
}

// The issue's `v\xff` / `v\xfe`: --format json shows two names, not "v".
TEST(TextCliTest, JsonKeepsNamesApart) {
  const std::string dir = TempDir("cli");
  WriteFile(dir + "/model.onnx", OnnxModel());
  const testing::CommandResult r = testing::RunCommand(
      MEMPLAN_CLI_PATH,
      {"plan", dir + "/model.onnx", "--format", "json", "--no_timings",
       "--emit", "svg", "-o", dir + "/plan.svg"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  v1::PlanResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(r.out, &response).ok())
      << r.out;
  EXPECT_THAT(Names(response), UnorderedElementsAreArray(CleanNames()));
  EXPECT_THAT(r.out, HasSubstr("\"v\\\\xFF\""));
  EXPECT_THAT(r.out, HasSubstr("\"v\\\\xFE\""));
  EXPECT_EQ(Xmllint(dir + "/plan.svg", false), "");
}

// `inspect` shows a model's inputs and outputs by the same names.
TEST(TextCliTest, InspectShowsTheSameNames) {
  const std::string dir = TempDir("inspect");
  WriteFile(dir + "/model.onnx", OnnxModel());
  WriteFile(dir + "/model.tflite", TfliteModel());
  for (const char* file : {"model.onnx", "model.tflite"}) {
    SCOPED_TRACE(file);
    const testing::CommandResult r = testing::RunCommand(
        MEMPLAN_CLI_PATH, {"inspect", dir + "/" + file, "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    v1::InputSummary summary;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(r.out, &summary).ok())
        << r.out;
    ASSERT_EQ(summary.inputs_size(), 1);
    ASSERT_EQ(summary.outputs_size(), 1);
    EXPECT_EQ(summary.inputs(0).name(), Hostile().front().clean);
    EXPECT_EQ(summary.outputs(0).name(), Hostile().back().clean);
  }
}

// CSV ids are text: bytes that are not UTF-8 are refused in-process and
// with --server alike (exit 65), as in JSON; valid text is planned, its
// names cleaned.
TEST(TextCliTest, CsvIdsAreUtf8Text) {
  testing::ServerProcess server(MEMPLAN_SERVER_PATH, {"--address=127.0.0.1:0"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  const std::string dir = TempDir("csv");
  WriteFile(dir + "/bad.csv", "id,lower,upper,size\na\xff,0,2,64\n");
  WriteFile(dir + "/ok.csv",
            "id,lower,upper,size\na\xef\xbf\xbe,0,2,64\nb\x7f,1,3,64\n");
  for (const std::string& where : {std::string(), server.address()}) {
    SCOPED_TRACE(where);
    std::vector<std::string> args = {"plan", dir + "/bad.csv"};
    if (!where.empty()) args.push_back("--server=" + where);
    const testing::CommandResult bad =
        testing::RunCommand(MEMPLAN_CLI_PATH, args);
    EXPECT_EQ(bad.exit_code, 65) << bad.err;
    EXPECT_THAT(bad.err, HasSubstr("bad.csv:2: id 'a\\xFF' is not UTF-8 text"));
    args[1] = dir + "/ok.csv";
    args.push_back("--format=json");
    const testing::CommandResult ok =
        testing::RunCommand(MEMPLAN_CLI_PATH, args);
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    v1::PlanResponse response;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(ok.out, &response).ok());
    EXPECT_THAT(Names(response),
                UnorderedElementsAreArray({"a\\xEF\\xBF\\xBE", "b\\x7F"}));
  }
  // --format csv writes the ids cleaned too: a raw DEL, carriage return or
  // escape sequence would rewrite the terminal it is shown on.
  WriteFile(dir + "/ctl.csv",
            "id,lower,upper,size\nb\x7f,1,3,64\nc\r\x1b[2K,0,2,64\n");
  const testing::CommandResult csv = testing::RunCommand(
      MEMPLAN_CLI_PATH, {"plan", dir + "/ctl.csv", "--format=csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_THAT(csv.out, HasSubstr("\nb\\x7F,1,3,64,"));
  EXPECT_THAT(csv.out, HasSubstr("\nc\\x0D\\x1B[2K,0,2,64,"));
  EXPECT_EQ(csv.out.find_first_of("\r\x1b\x7f"), std::string::npos);
}

// --dump_graph writes the graph memplan plans, names as the plan has
// them: it reads back, and plans to the same names and offsets, where a
// model's names are not UTF-8 (JSON cannot hold those bytes).
TEST(TextCliTest, DumpedGraphsReadBackWithTheSameNames) {
  const std::string dir = TempDir("dump");
  WriteFile(dir + "/model.onnx", OnnxModel());
  WriteFile(dir + "/model.tflite", TfliteModel());
  for (const char* file : {"model.onnx", "model.tflite"}) {
    SCOPED_TRACE(file);
    const std::string dump = dir + "/" + file + ".json";
    const testing::CommandResult model = testing::RunCommand(
        MEMPLAN_CLI_PATH, {"plan", dir + "/" + file, "--format=json",
                           "--no_timings", "--dump_graph", dump});
    ASSERT_EQ(model.exit_code, 0) << model.err;
    EXPECT_EQ(model.err, "");  // no protobuf complaint about the bytes
    const testing::CommandResult back = testing::RunCommand(
        MEMPLAN_CLI_PATH, {"plan", dump, "--format=json", "--no_timings"});
    ASSERT_EQ(back.exit_code, 0) << back.err;
    v1::PlanResponse a, b;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(model.out, &a).ok());
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(back.out, &b).ok());
    EXPECT_THAT(Names(a), UnorderedElementsAreArray(CleanNames()));
    // Read back, the rule applies again: plain names stay as they are, an
    // escape's backslash is doubled (distinct names stay distinct).
    std::vector<std::string> again;
    for (const std::string& name : Names(a)) {
      again.push_back(base::SafeName(name));
    }
    EXPECT_EQ(Names(b), again);
    EXPECT_EQ(a.arena_size_bytes(), b.arena_size_bytes());
    for (int i = 0; i < a.assignments_size() && i < b.assignments_size(); ++i) {
      EXPECT_EQ(a.assignments(i).offset(), b.assignments(i).offset());
    }
  }
}

// Through a real server, read by the strict Python client.
TEST(TextServerTest, StrictClientReadsEveryPlan) {
  testing::ServerProcess server(MEMPLAN_SERVER_PATH, {"--address=127.0.0.1:0"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  for (const Case& c : Cases(/*on_the_wire=*/true)) {
    SCOPED_TRACE(c.label);
    const std::string dir = TempDir("server_" + c.label);
    WriteFile(dir + "/request.bin", c.request.SerializeAsString());
    const testing::CommandResult r = testing::RunCommand(
        "/usr/bin/python3",
        {std::string(MEMPLAN_SOURCE_DIR) + "/tests/testing/strict_client.py",
         MEMPLAN_SOURCE_DIR, server.address(), dir + "/request.bin", dir},
        "", 120);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::vector<std::string> names =
        absl::StrSplit(ReadFile(dir + "/names.txt"), '\n', absl::SkipEmpty());
    EXPECT_THAT(names, UnorderedElementsAreArray(c.names));
    std::vector<std::pair<std::string, std::string>> files;
    for (const char* format : {"c_header", "svg", "html"}) {
      files.push_back({format, ReadFile(absl::StrCat(dir, "/plan.", format))});
    }
    ExpectFilesOpen(dir, files);
  }
  // A request whose strings are not UTF-8 does not parse (protobuf's rule),
  // and the server goes on.
  const std::string dir = TempDir("server_not_utf8");
  WriteFile(dir + "/request.bin", GraphRequest().SerializeAsString());
  const testing::CommandResult refused = testing::RunCommand(
      "/usr/bin/python3",
      {std::string(MEMPLAN_SOURCE_DIR) + "/tests/testing/strict_client.py",
       MEMPLAN_SOURCE_DIR, server.address(), dir + "/request.bin", dir},
      "", 120);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("Plan failed"));
  WriteFile(dir + "/request.bin", GraphRequest(true).SerializeAsString());
  EXPECT_EQ(
      testing::RunCommand(
          "/usr/bin/python3",
          {std::string(MEMPLAN_SOURCE_DIR) + "/tests/testing/strict_client.py",
           MEMPLAN_SOURCE_DIR, server.address(), dir + "/request.bin", dir},
          "", 120)
          .exit_code,
      0);
}

// The header's ID (guard, macros, data) of a header.
std::string HeaderId(const std::string& header) {
  std::smatch m;
  if (!std::regex_search(header, m,
                         std::regex("#ifndef MEMPLAN_(\\w+)_PLAN_H_"))) {
    return "";
  }
  return m[1].str();
}

std::string PlanHeader(v1::PlanRequest request, const std::string& id = "") {
  request.clear_emit();
  request.add_emit("c_header");
  request.set_c_header_id(id);
  absl::StatusOr<v1::PlanResponse> r =
      engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() && r->files_size() == 1 ? r->files(0).data() : "";
}

// Two different models both called model.tflite: distinct guards and
// symbols, both headers in one C file, both plans linked into one program.
TEST(CHeaderNamesTest, TwoModelsOfOneNameLinkIntoOneProgram) {
  const std::string a =
      PlanHeader(ModelRequest("tflite", TfliteModel(0), "a/model.tflite"));
  const std::string b =
      PlanHeader(ModelRequest("tflite", TfliteModel(3), "b/model.tflite"));
  const std::string id_a = HeaderId(a), id_b = HeaderId(b);
  EXPECT_THAT(id_a, ::testing::MatchesRegex("MODEL_[0-9A-F]{8}"));
  EXPECT_THAT(id_b, ::testing::MatchesRegex("MODEL_[0-9A-F]{8}"));
  EXPECT_NE(id_a, id_b);
  // The same model gives the same ID every time.
  EXPECT_EQ(HeaderId(PlanHeader(
                ModelRequest("tflite", TfliteModel(0), "c/model.tflite"))),
            id_a);
  const std::string dir = TempDir("two_headers");
  WriteFile(dir + "/a.h", a);
  WriteFile(dir + "/b.h", b);
  WriteFile(dir + "/main.c",
            absl::StrCat("#define MEMPLAN_", id_a, "_IMPLEMENTATION\n",
                         "#define MEMPLAN_", id_b, "_IMPLEMENTATION\n",
                         "#include \"a.h\"\n#include \"b.h\"\n",
                         "#include <stdio.h>\nint other(void);\n",
                         "int main(void) {\n  printf(\"%ld %ld %d\\n\", "
                         "(long)MEMPLAN_",
                         id_a, "_TENSOR_COUNT, (long)MEMPLAN_", id_b,
                         "_TENSOR_COUNT, other());\n  return 0;\n}\n"));
  // A second unit uses both plans' data.
  WriteFile(dir + "/other.c",
            absl::StrCat("#include \"a.h\"\n#include \"b.h\"\nint other(void);"
                         "\nint other(void) {\n  return (int)(memplan_",
                         absl::AsciiStrToLower(id_a), "_sizes[0] + memplan_",
                         absl::AsciiStrToLower(id_b), "_sizes[0]);\n}\n"));
  const testing::CommandResult r = Shell(absl::StrCat(
      "cd '", dir, "' && ", kStrictCc, " -o two main.c other.c 2>&1 && ./two"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, absl::StrCat(Hostile().size(), " ", Hostile().size() + 3,
                                " ", 64 + 64, "\n"));
}

// Memory pools whose names meet as C identifiers each get a macro of their
// own, with their own arena size.
TEST(CHeaderNamesTest, PoolsWhoseNamesMeetKeepTheirOwnMacros) {
  v1::PlanRequest request = GraphRequest();
  const std::vector<std::string> pools = {"sram.0", "sram.1", "sram",
                                          "SRAM",   "l2-a",   "l2_a"};
  for (const std::string& name : pools) {
    v1::MemoryPool* p = request.mutable_options()->add_memory_pools();
    p->set_name(name);
    p->set_capacity_bytes(128);
  }
  request.mutable_options()
      ->mutable_memory_pools()
      ->rbegin()
      ->set_capacity_bytes(0);
  request.clear_emit();  // each format once
  request.add_emit("c_header");
  absl::StatusOr<v1::PlanResponse> r =
      engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  std::string header;
  for (const v1::EmittedFile& f : r->files()) {
    if (f.format() == "c_header") header = f.data();
  }
  const std::string id = HeaderId(header);
  const std::vector<std::string> macros = {"SRAM_0", "SRAM_1", "SRAM",
                                           "SRAM_2", "L2_A",   "L2_A_2"};
  ASSERT_EQ(r->memory_pools_size(), 6);
  std::string checks = "#include \"plan.h\"\n";
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(r->memory_pools(k).name(), pools[k]);
    absl::StrAppend(&checks, "#if MEMPLAN_", id, "_POOL_", macros[k],
                    "_BYTES != ", r->memory_pools(k).arena_size_bytes(),
                    "\n#error pool ", k, "\n#endif\n");
  }
  EXPECT_GT(r->memory_pools(0).arena_size_bytes(), 0);
  const std::string dir = TempDir("pools");
  WriteFile(dir + "/plan.h", header);
  WriteFile(dir + "/check.c", checks);
  const testing::CommandResult c = Shell(absl::StrCat(
      "cd '", dir, "' && ", kStrictCc, " -c check.c -o check.o 2>&1"));
  EXPECT_EQ(c.exit_code, 0) << c.out << checks;
}

TEST(CHeaderNamesTest, TheUserSetsTheId) {
  EXPECT_EQ(HeaderId(PlanHeader(GraphRequest(), "kws_v2")), "KWS_V2");
  v1::PlanRequest bad = GraphRequest();
  bad.set_c_header_id("9lives");
  absl::StatusOr<v1::PlanResponse> r =
      engine::PlanToResponse(bad, engine::Limits{}, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("c_header_id"));
  // From the CLI.
  const std::string dir = TempDir("cli_id");
  WriteFile(dir + "/model.tflite", TfliteModel());
  const testing::CommandResult cli = testing::RunCommand(
      MEMPLAN_CLI_PATH, {"plan", dir + "/model.tflite", "--emit", "c_header",
                         "-o", dir + "/plan.h", "--c_header_id", "kws"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(HeaderId(ReadFile(dir + "/plan.h")), "KWS");
}

}  // namespace
}  // namespace memplan
