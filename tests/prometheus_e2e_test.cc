// memplan-server's metrics as Prometheus and the deploy/ files see them.
//
// MetricNames: every metric name deploy/grafana's dashboards and
// deploy/prometheus's rules use is one a live memplan-server exports (read
// from its /metrics after Plan and Benchmark calls, not from a list).
//
// PrometheusTest: a real Prometheus (Debian's `prometheus`, on 127.0.0.1,
// a temporary data directory, 1 s scrapes, deploy/'s recording rules)
// scrapes a real memplan-server under a bounded load of valid and invalid
// Plan and Benchmark calls; queries to its HTTP API must show the request
// counts and rate, the error counts by code, a latency quantile, and a
// planner and an allocator series that match what the load sent. Skipped
// (with the reason) only when the prometheus binary is not installed.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "tests/testing/metrics.h"
#include "tests/testing/process.h"
#include "tests/testing/requests.h"

namespace memplan {
namespace {

namespace fs = std::filesystem;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;

std::string ReadFile(const fs::path& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A small valid graph: x -> f -> h -> g -> y.
v1::PlanRequest SmallGraph() {
  v1::PlanRequest r;
  *r.mutable_graph() =
      testing::ChainGraph({{"x", 4096}, {"h", 8192}, {"y", 4096}}, {"f", "g"});
  return r;
}

// The same graph with an op reading a tensor that does not exist.
v1::PlanRequest BadGraph() {
  v1::PlanRequest r = SmallGraph();
  r.mutable_graph()->mutable_ops(1)->set_inputs(0, "missing");
  return r;
}

// The server under test, gRPC and metrics on ports it picks. Its plan
// cache has a Redis store that no one runs: the store's series exist (down,
// failing) and calls go on without it.
class Server {
 public:
  Server()
      : process_(
            MEMPLAN_SERVER_PATH,
            {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
             "--worker_threads=2", "--max_tensors=100",
             absl::StrCat("--cache=redis://127.0.0.1:", testing::FreePort())}),
        metrics_port_(testing::MetricsPort(process_.first_line())) {
    channel_ = grpc::CreateChannel(process_.address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::MemoryPlanner::NewStub(channel_);
  }
  bool ok() const { return process_.port() > 0 && metrics_port_ > 0; }
  std::string first_line() const { return process_.first_line(); }
  int metrics_port() const { return metrics_port_; }

  grpc::Status Plan(const v1::PlanRequest& request, v1::PlanResponse* out) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return stub_->Plan(&context, request, out);
  }
  grpc::Status Benchmark(const v1::BenchmarkRequest& request,
                         v1::BenchmarkResponse* out) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return stub_->Benchmark(&context, request, out);
  }
  absl::StatusOr<std::string> Scrape() const {
    return testing::HttpGet(metrics_port_, "/metrics");
  }

 private:
  testing::ServerProcess process_;
  int metrics_port_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::MemoryPlanner::Stub> stub_;
};

// A graph over the server's --max_tensors=100: RESOURCE_EXHAUSTED.
v1::PlanRequest TooManyTensors() {
  v1::PlanRequest r;
  for (int i = 0; i < 150; ++i) {
    v1::Buffer* b = r.add_buffers();
    b->set_id(absl::StrCat("b", i));
    b->set_start(i);
    b->set_end(i + 2);
    b->set_size(64);
  }
  return r;
}

// A Benchmark of SmallGraph on two allocators: the static plan and pool.
v1::BenchmarkRequest ValidBenchmark() {
  v1::BenchmarkRequest r;
  *r.mutable_graph() = SmallGraph().graph();
  r.add_allocators("static_plan");
  r.add_allocators("pool");
  r.set_repetitions(1);
  return r;
}

// A Benchmark naming an allocator that does not exist.
v1::BenchmarkRequest BadBenchmark() {
  v1::BenchmarkRequest r = ValidBenchmark();
  r.add_allocators("no_such_allocator");
  return r;
}

// Identifiers in `text` that name memplan-server metrics: runs of
// [A-Za-z0-9_:] starting with grpc_server_ or memplan_; recording rule
// names (level:metric:op, with colons) are not metrics and are left out.
std::set<std::string> MetricNamesIn(const std::string& text) {
  std::set<std::string> names;
  auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  };
  for (size_t i = 0; i < text.size();) {
    if (!word(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && word(text[j])) ++j;
    const std::string token = text.substr(i, j - i);
    if ((token.rfind("grpc_server_", 0) == 0 ||
         token.rfind("memplan_", 0) == 0) &&
        token.find(':') == std::string::npos) {
      names.insert(token);
    }
    i = j;
  }
  return names;
}

// Label names in `by (...)` / `without (...)` clauses of `text`.
std::set<std::string> GroupingLabelsIn(const std::string& text) {
  std::set<std::string> labels;
  static const std::regex clause(R"((?:by|without)\s*\(([^)]*)\))");
  for (std::sregex_iterator it(text.begin(), text.end(), clause), end;
       it != end; ++it) {
    std::string inside = (*it)[1];
    static const std::regex ident(R"([A-Za-z_][A-Za-z0-9_]*)");
    for (std::sregex_iterator l(inside.begin(), inside.end(), ident); l != end;
         ++l) {
      labels.insert(l->str());
    }
  }
  return labels;
}

// Every file of the dashboards and the rules.
std::vector<fs::path> DeployFiles() {
  std::vector<fs::path> files;
  const fs::path root = fs::path(MEMPLAN_SOURCE_DIR) / "deploy";
  for (const char* dir : {"grafana/dashboards", "prometheus/rules"}) {
    for (const auto& e : fs::directory_iterator(root / dir)) {
      files.push_back(e.path());
    }
  }
  return files;
}

// The PromQL expressions of a dashboard (JSON "expr" and variable
// "definition" strings) or a rule file (`expr:` values, inline or block).
std::vector<std::string> ExpressionsIn(const fs::path& file) {
  std::vector<std::string> exprs;
  const std::string text = ReadFile(file);
  if (file.extension() == ".json") {
    static const std::regex field(
        R"re("(?:expr|definition)"\s*:\s*"((?:[^"\\]|\\.)*)")re");
    for (std::sregex_iterator it(text.begin(), text.end(), field), end;
         it != end; ++it) {
      exprs.push_back((*it)[1]);
    }
    return exprs;
  }
  std::istringstream in(text);
  std::string line;
  static const std::regex key(R"re(^(\s*)(?:- )?expr:\s*(.*)$)re");
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, key)) continue;
    const std::string rest = m[2];
    if (!rest.empty() && rest[0] != '>' && rest[0] != '|') {
      exprs.push_back(rest);
      continue;
    }
    // A block scalar: the lines indented deeper than `expr:`.
    const size_t indent = m[1].length();
    std::string block;
    for (++i; i < lines.size(); ++i) {
      const size_t first = lines[i].find_first_not_of(' ');
      if (first != std::string::npos && first <= indent) break;
      block += lines[i] + "\n";
    }
    --i;
    exprs.push_back(block);
  }
  return exprs;
}

TEST(MetricNames, DashboardsAndRulesUseOnlyExportedMetrics) {
  Server server;
  ASSERT_TRUE(server.ok()) << server.first_line();
  // One call of each kind, so histograms and labelled series exist.
  v1::PlanResponse plan;
  ASSERT_TRUE(server.Plan(SmallGraph(), &plan).ok());
  EXPECT_EQ(server.Plan(BadGraph(), &plan).error_code(),
            grpc::INVALID_ARGUMENT);
  EXPECT_EQ(server.Plan(TooManyTensors(), &plan).error_code(),
            grpc::RESOURCE_EXHAUSTED);
  v1::BenchmarkResponse bench;
  grpc::Status s = server.Benchmark(ValidBenchmark(), &bench);
  ASSERT_TRUE(s.ok()) << s.error_message();

  absl::StatusOr<std::string> text = server.Scrape();
  ASSERT_TRUE(text.ok()) << text.status();
  const std::vector<testing::Sample> samples = testing::ParseExposition(*text);
  std::set<std::string> exported, labels = {"job", "instance", "le"};
  for (const testing::Sample& sample : samples) {
    exported.insert(sample.name);
    for (const auto& [k, v] : sample.labels) labels.insert(k);
  }

  std::set<std::string> used;
  for (const fs::path& file : DeployFiles()) {
    const std::vector<std::string> exprs = ExpressionsIn(file);
    EXPECT_GE(exprs.size(), 5u) << file << ": expressions not found";
    const std::string content = absl::StrJoin(exprs, "\n");
    const std::set<std::string> names = MetricNamesIn(content);
    EXPECT_FALSE(names.empty()) << file;
    for (const std::string& name : names) {
      EXPECT_TRUE(exported.count(name))
          << file.filename() << " uses " << name
          << ", which memplan-server does not export";
      used.insert(name);
    }
    for (const std::string& label : GroupingLabelsIn(content)) {
      EXPECT_TRUE(labels.count(label))
          << file.filename() << " groups by label " << label
          << ", which no exported series has";
    }
  }
  // What the dashboard must show (issue 6), present in the files.
  for (const char* name :
       {"grpc_server_handled_total", "grpc_server_handling_seconds_bucket",
        "memplan_planner_queue_depth", "memplan_plan_efficiency_ratio",
        "memplan_plan_strategy_wins_total", "memplan_allocator_bytes_in_use",
        "memplan_allocator_bytes_reserved",
        "memplan_allocator_fragmentation_ratio",
        // The plan cache (issue 32).
        "memplan_plan_cache_hits_total", "memplan_plan_cache_misses_total",
        "memplan_plan_cache_verification_failures_total",
        "memplan_plan_cache_store_errors_total",
        "memplan_plan_cache_store_seconds_bucket",
        "memplan_plan_cache_store_up"}) {
    EXPECT_TRUE(used.count(name)) << name << " is on no dashboard or rule";
  }
  // The label values the rules match on are the ones the server writes.
  EXPECT_GT(testing::SumOf(samples, "grpc_server_handled_total",
                           {{"grpc_service", "memplan.v1.MemoryPlanner"},
                            {"grpc_method", "Plan"},
                            {"grpc_type", "unary"},
                            {"grpc_code", "InvalidArgument"}}),
            0);
  EXPECT_GT(testing::SumOf(
                samples, "grpc_server_handled_total",
                {{"grpc_method", "Plan"}, {"grpc_code", "ResourceExhausted"}}),
            0)
      << "the rules match grpc_code values as go-grpc-prometheus writes them "
         "(InvalidArgument, ResourceExhausted) and grpc_type=\"unary\"";
}

// A program started in the background, its output in `log`; SIGTERM, then
// SIGKILL, by PID when the handle goes away.
class Background {
 public:
  Background(const std::string& binary, const std::vector<std::string>& args,
             const std::string& log) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
      for (const std::string& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
  }
  ~Background() { Stop(); }
  bool Running() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (kill(pid_, 0) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string FindPrometheus() {
  for (const char* path :
       {"/usr/bin/prometheus", "/usr/local/bin/prometheus"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = FindPrometheus();
    if (binary_.empty()) {
      GTEST_SKIP() << "prometheus is not installed (scripts/setup.sh installs "
                      "Debian's package; it could not be installed here)";
    }
    char dir[] = "/tmp/memplan-prometheus-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    prometheus_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Starts Prometheus scraping `metrics_port` every second, with deploy/'s
  // recording rules, and waits until its API answers.
  void StartPrometheus(int metrics_port) {
    const std::string rules = std::string(MEMPLAN_SOURCE_DIR) +
                              "/deploy/prometheus/rules/memplan-recording.yml";
    std::ofstream(dir_ + "/prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "rule_files: ['" << rules << "']\n"
        << "scrape_configs:\n  - job_name: memplan-server\n"
        << "    static_configs:\n      - targets: ['127.0.0.1:" << metrics_port
        << "']\n";
    port_ = testing::FreePort();
    prometheus_ = std::make_unique<Background>(
        binary_,
        std::vector<std::string>{
            "--config.file=" + dir_ + "/prometheus.yml",
            "--storage.tsdb.path=" + dir_ + "/data",
            absl::StrCat("--web.listen-address=127.0.0.1:", port_),
            "--storage.tsdb.retention.time=1h", "--log.level=warn"},
        dir_ + "/prometheus.log");
    for (int i = 0; i < 150; ++i) {
      if (testing::HttpGet(port_, "/-/ready").ok()) return;
      ASSERT_TRUE(prometheus_->Running()) << ReadFile(dir_ + "/prometheus.log");
      absl::SleepFor(absl::Milliseconds(100));
    }
    FAIL() << "Prometheus not ready: " << ReadFile(dir_ + "/prometheus.log");
  }

  // The instant vector `query` evaluates to, as (labels, value) rows.
  std::vector<std::pair<std::map<std::string, std::string>, double>> Query(
      const std::string& query) {
    std::vector<std::pair<std::map<std::string, std::string>, double>> rows;
    absl::StatusOr<std::string> body = testing::HttpGet(
        port_, "/api/v1/query?query=" + testing::UrlEncode(query));
    EXPECT_TRUE(body.ok()) << query << ": " << body.status();
    if (!body.ok()) return rows;
    Struct answer;
    EXPECT_TRUE(
        google::protobuf::util::JsonStringToMessage(*body, &answer).ok())
        << *body;
    const Value& result =
        answer.fields().at("data").struct_value().fields().at("result");
    for (const Value& row : result.list_value().values()) {
      std::map<std::string, std::string> labels;
      for (const auto& [k, v] :
           row.struct_value().fields().at("metric").struct_value().fields()) {
        labels[k] = v.string_value();
      }
      const std::string& v = row.struct_value()
                                 .fields()
                                 .at("value")
                                 .list_value()
                                 .values(1)
                                 .string_value();
      rows.emplace_back(labels, std::stod(v));
    }
    return rows;
  }

  // The single value `query` gives, or NaN when it gives none.
  double Scalar(const std::string& query) {
    auto rows = Query(query);
    EXPECT_LE(rows.size(), 1u) << query;
    return rows.empty() ? NAN : rows[0].second;
  }

  // Polls `query` until it equals `want` or `timeout` passes.
  double WaitFor(const std::string& query, double want,
                 absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time deadline = absl::Now() + timeout;
    double got = NAN;
    while (absl::Now() < deadline) {
      got = Scalar(query);
      if (got == want) break;
      absl::SleepFor(absl::Milliseconds(250));
    }
    return got;
  }

  std::string binary_, dir_;
  int port_ = 0;
  std::unique_ptr<Background> prometheus_;
};

// What the load sent, by method and code.
struct Sent {
  int plan_ok = 0, plan_invalid = 0, plan_exhausted = 0;
  int bench_ok = 0, bench_invalid = 0;
  int64_t arena = 0;             // the arena every valid Plan returned
  int64_t pool_allocations = 0;  // pool's allocations over every Benchmark
  absl::Duration slowest_plan;   // client-side, the slowest valid Plan
};

// One round of calls: a valid and an invalid Plan, and every
// `bench_every`-th round a Plan over the limits, a valid and an invalid
// Benchmark.
void OneRound(Server& server, int round, int bench_every, Sent& sent) {
  v1::PlanResponse plan;
  const absl::Time t0 = absl::Now();
  grpc::Status s = server.Plan(SmallGraph(), &plan);
  ASSERT_TRUE(s.ok()) << s.error_message();
  sent.slowest_plan = std::max(sent.slowest_plan, absl::Now() - t0);
  sent.arena = plan.arena_size_bytes();
  ++sent.plan_ok;
  ASSERT_EQ(server.Plan(BadGraph(), &plan).error_code(),
            grpc::INVALID_ARGUMENT);
  ++sent.plan_invalid;
  if (round % bench_every != 0) return;
  ASSERT_EQ(server.Plan(TooManyTensors(), &plan).error_code(),
            grpc::RESOURCE_EXHAUSTED);
  ++sent.plan_exhausted;
  v1::BenchmarkResponse bench;
  s = server.Benchmark(ValidBenchmark(), &bench);
  ASSERT_TRUE(s.ok()) << s.error_message();
  for (const v1::AllocatorFigures& row : bench.rows()) {
    if (row.allocator() == "pool") sent.pool_allocations += row.allocations();
  }
  ++sent.bench_ok;
  ASSERT_EQ(server.Benchmark(BadBenchmark(), &bench).error_code(),
            grpc::INVALID_ARGUMENT);
  ++sent.bench_invalid;
}

TEST_F(PrometheusTest, SeesTheLoadTheServerServed) {
  Server server;
  ASSERT_TRUE(server.ok()) << server.first_line();
  // One round before Prometheus starts: every series exists at its first
  // scrape, so rate() and increase() see all of the load below.
  Sent sent;
  ASSERT_NO_FATAL_FAILURE(OneRound(server, 0, 1, sent));
  ASSERT_NO_FATAL_FAILURE(StartPrometheus(server.metrics_port()));
  const std::string job = R"(job="memplan-server")";
  const std::string plans = absl::StrCat("sum(grpc_server_handled_total{", job,
                                         R"(,grpc_method="Plan"}))");
  ASSERT_EQ(WaitFor(plans, 3), 3) << "Prometheus never scraped the server";
  const absl::Time load_start = absl::Now();

  // The load: 40 rounds, bounded in count and (20 s) in time.
  constexpr int kRounds = 40;
  for (int round = 1;
       round <= kRounds && absl::Now() < load_start + absl::Seconds(20);
       ++round) {
    ASSERT_NO_FATAL_FAILURE(OneRound(server, round, 5, sent));
    absl::SleepFor(absl::Milliseconds(60));
  }
  ASSERT_EQ(sent.plan_ok, kRounds + 1);
  const int all_plans = sent.plan_ok + sent.plan_invalid + sent.plan_exhausted;
  ASSERT_EQ(WaitFor(plans, all_plans), all_plans)
      << "Prometheus never saw every Plan call";
  // Let the recording rules evaluate on the last scrape.
  absl::SleepFor(absl::Seconds(2));
  // A window reaching back before the load started.
  const int64_t window_s = absl::ToInt64Seconds(absl::Now() - load_start) + 2;
  const std::string window = absl::StrCat("[", window_s, "s]");

  // Error counts by method and code: exactly what was sent.
  std::map<std::pair<std::string, std::string>, double> by_code;
  for (const auto& [labels, value] : Query(absl::StrCat(
           "sum by (grpc_method, grpc_code) (grpc_server_handled_total{", job,
           ",grpc_service=\"memplan.v1.MemoryPlanner\"})"))) {
    by_code[{labels.at("grpc_method"), labels.at("grpc_code")}] = value;
  }
  EXPECT_EQ(by_code.size(), 5u) << "a code the load did not cause";
  using Key = std::pair<std::string, std::string>;
  EXPECT_EQ(by_code[Key("Plan", "OK")], sent.plan_ok);
  EXPECT_EQ(by_code[Key("Plan", "InvalidArgument")], sent.plan_invalid);
  EXPECT_EQ(by_code[Key("Plan", "ResourceExhausted")], sent.plan_exhausted);
  EXPECT_EQ(by_code[Key("Benchmark", "OK")], sent.bench_ok);
  EXPECT_EQ(by_code[Key("Benchmark", "InvalidArgument")], sent.bench_invalid);
  EXPECT_EQ(Scalar(absl::StrCat("sum(grpc_server_started_total{", job,
                                R"(,grpc_method="Plan"}))")),
            all_plans);

  // The request rate over the load: what it sent, give or take
  // Prometheus's extrapolation to the window's edges (at most a scrape
  // interval on each side).
  const int load_plans = all_plans - 3;
  const double plan_rate =
      Scalar(absl::StrCat("sum(rate(grpc_server_handled_total{", job,
                          R"(,grpc_method="Plan"})", window, "))"));
  EXPECT_GE(plan_rate * window_s, 0.9 * load_plans) << plan_rate;
  EXPECT_LE(plan_rate * window_s,
            load_plans * (window_s + 2.0) / (window_s - 2.0))
      << plan_rate;
  const double error_rate =
      Scalar(absl::StrCat("sum(rate(grpc_server_handled_total{", job,
                          R"(,grpc_code="InvalidArgument"})", window, "))"));
  EXPECT_NEAR(
      error_rate / plan_rate,
      double(sent.plan_invalid - 1 + sent.bench_invalid - 1) / load_plans,
      0.02);

  // A latency quantile from the histogram: every Plan is counted, and the
  // median lies between 0 and the bucket bound above the slowest call the
  // client measured (the server's time is within the client's).
  EXPECT_EQ(Scalar(absl::StrCat("sum(grpc_server_handling_seconds_count{", job,
                                R"(,grpc_method="Plan"}))")),
            all_plans);
  const double p50 =
      Scalar(absl::StrCat("histogram_quantile(0.5, sum by (le) (rate("
                          "grpc_server_handling_seconds_bucket{",
                          job, R"(,grpc_method="Plan"})", window, ")))"));
  double bound = HUGE_VAL;
  for (const auto& [labels, value] :
       Query(absl::StrCat("grpc_server_handling_seconds_bucket{", job,
                          R"(,grpc_method="Plan"})"))) {
    const double le =
        labels.at("le") == "+Inf" ? HUGE_VAL : std::stod(labels.at("le"));
    if (le >= absl::ToDoubleSeconds(sent.slowest_plan))
      bound = std::min(bound, le);
  }
  EXPECT_GT(p50, 0);
  EXPECT_LE(p50, bound) << "slowest Plan " << sent.slowest_plan;

  // The recording rules ran on this data: Plan's rate, the share turned
  // away with RESOURCE_EXHAUSTED (what MemplanOverloaded watches), and no
  // server-side errors (INVALID_ARGUMENT is the caller's).
  EXPECT_NEAR(
      Scalar(
          R"(memplan:grpc_server_overload:ratio_rate5m{grpc_method="Plan"})"),
      double(sent.plan_exhausted - 1) / load_plans, 0.02);
  EXPECT_GT(
      Scalar(
          R"(memplan:grpc_server_handled:rate5m{grpc_method="Plan",grpc_code="OK"})"),
      0);
  EXPECT_EQ(
      Scalar(R"(memplan:grpc_server_errors:ratio_rate5m{grpc_method="Plan"})"),
      0);

  // A planner series: the arena of the plans returned.
  EXPECT_EQ(Scalar(absl::StrCat("max(memplan_plan_arena_bytes{", job, "})")),
            sent.arena);
  // An allocator series: pool's allocations over every Benchmark call.
  EXPECT_EQ(Scalar(absl::StrCat("sum(memplan_allocator_allocs_total{", job,
                                R"(,allocator="pool"}))")),
            sent.pool_allocations);
}

}  // namespace
}  // namespace memplan
