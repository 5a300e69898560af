// Hostile clients of a real memplan-server (issue 31), end to end: bytes
// that are not a request, a request over the size limit, errors quoting
// raw bytes, and connections to the metrics port that send half a request
// and wait.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/text.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "onnx/testing/onnx_builder.h"
#include "tests/testing/metrics.h"
#include "tests/testing/process.h"
#include "tests/testing/requests.h"

namespace memplan {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess(
        MEMPLAN_SERVER_PATH,
        {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
         "--max_request_bytes=1000000"});
    ASSERT_GT(server_->port(), 0) << server_->first_line();
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    server_->Stop(SIGTERM, 10);
    delete server_;
  }

  // `bytes` sent as the request of `method` ("Plan", "Benchmark").
  static grpc::Status RawCall(const std::string& method,
                              const std::string& bytes) {
    grpc::GenericStub stub(*channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::Status status;
    absl::Notification done;
    stub.UnaryCall(&context, "/memplan.v1.MemoryPlanner/" + method,
                   grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    return status;
  }

  // grpc_server_handled_total for a method and code.
  static double Handled(const std::string& method, const std::string& code) {
    absl::StatusOr<double> sum =
        testing::MetricSum(testing::MetricsPort(server_->first_line()),
                           "grpc_server_handled_total",
                           {{"grpc_method", method}, {"grpc_code", code}});
    EXPECT_TRUE(sum.ok()) << sum.status();
    return sum.value_or(-1);
  }

  static testing::ServerProcess* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
};

testing::ServerProcess* HostileTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* HostileTest::channel_ = nullptr;

// Issue 31: 3 garbage bytes as a Plan were INTERNAL with an empty message,
// counted as grpc_code="Internal" (a server fault to the alert rules).
TEST_F(HostileTest, GarbageBytesAreAnInvalidArgumentNotAServerFault) {
  for (const std::string method : {"Plan", "Benchmark"}) {
    const grpc::Status s = RawCall(method, "\xff\xff\xff");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(s.error_message(),
                HasSubstr("the request could not be parsed as a "
                          "memplan.v1." +
                          method + "Request"));
    EXPECT_EQ(Handled(method, "Internal"), 0) << method;
    EXPECT_GE(Handled(method, "InvalidArgument"), 1) << method;
  }
  // A request that parses is served as before.
  v1::PlanRequest request;
  *request.mutable_graph() = testing::UniformChain(3, 1024);
  v1::PlanResponse response;
  grpc::ClientContext context;
  const grpc::Status s =
      v1::MemoryPlanner::NewStub(*channel_)->Plan(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(response.arena_size_bytes(), 0);
}

TEST_F(HostileTest, ARequestOverTheSizeLimitIsResourceExhausted) {
  v1::PlanRequest request;
  request.mutable_model()->set_data(std::string(2'000'000, 'x'));
  v1::PlanResponse response;
  grpc::ClientContext context;
  const grpc::Status s =
      v1::MemoryPlanner::NewStub(*channel_)->Plan(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
}

// An ONNX model whose graph output, named with the byte FF, is made by no
// node: an error that quotes a raw name.
std::string OnnxWithBadOutput() {
  formats::OnnxTestModel m(13);
  m.graph().Input("x", formats::kOnnxFloat, {"1", "4"});
  m.graph().Node("Relu", {"x"}, {"y"}, "relu");
  m.graph().Output("y\xff");
  return m.Bytes();
}

// Issue 31: errors that quote raw bytes from an input follow the text rule:
// a strict client (or a terminal) gets valid UTF-8, the byte as \xFF.
TEST_F(HostileTest, ErrorsQuotingRawNamesAreValidText) {
  v1::PlanRequest request;
  request.mutable_model()->set_data(OnnxWithBadOutput());
  request.mutable_model()->set_format("onnx");
  v1::PlanResponse response;
  grpc::ClientContext context;
  const grpc::Status s =
      v1::MemoryPlanner::NewStub(*channel_)->Plan(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(base::IsUtf8(s.error_message())) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("'y\\xFF'"));
  // The CLI, in-process.
  char dir[] = "/tmp/memplan_hostile_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/bad.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    out << OnnxWithBadOutput();
  }
  const testing::CommandResult cli =
      testing::RunCommand(MEMPLAN_CLI_PATH, {"plan", path});
  EXPECT_EQ(cli.exit_code, 65) << cli.err;
  EXPECT_TRUE(base::IsUtf8(cli.err)) << cli.err;
  EXPECT_THAT(cli.err, HasSubstr("'y\\xFF'"));
  std::remove(path.c_str());
  rmdir(dir);
}

// Text from a request quoted in an error cannot start a line of its own
// (a log reader or CI script would take "memplan: ..." after it for the
// server's word): a newline in a pool name, a dims key, an emit format, a
// C header id or a model's name comes back as \x0A.
TEST_F(HostileTest, RequestTextCannotForgeALineOfAnError) {
  const std::string forged = "x\nmemplan: OK, arena 0 bytes";
  std::vector<v1::PlanRequest> requests(5);
  for (int i = 0; i < 2; ++i) {
    requests[0].mutable_options()->add_memory_pools()->set_name(forged);
  }
  requests[1].mutable_model()->set_data(OnnxWithBadOutput());
  requests[1].mutable_model()->set_format("onnx");
  (*requests[1].mutable_model()->mutable_dims())[forged] = -1;
  requests[2].add_emit(forged);
  requests[3].set_c_header_id(forged);
  requests[4].mutable_model()->set_data("not a model");
  requests[4].mutable_model()->set_name(forged);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].has_model()) {  // a graph to plan, read after its options
      v1::Tensor* t = requests[i].mutable_graph()->add_tensors();
      t->set_name("t");
      t->set_size_bytes(8);
    }
    v1::PlanResponse response;
    grpc::ClientContext context;
    const grpc::Status s = v1::MemoryPlanner::NewStub(*channel_)->Plan(
        &context, requests[i], &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << i << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("x\\x0Amemplan: OK")) << i;
    EXPECT_THAT(s.error_message(), Not(HasSubstr("\n"))) << i;
  }
}

// A TCP connection to 127.0.0.1:port that sent `text` and waits.
class StalledClient {
 public:
  StalledClient(int port, const std::string& text) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ =
        fd_ >= 0 &&
        connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        send(fd_, text.data(), text.size(), 0) ==
            static_cast<ssize_t>(text.size());
  }
  ~StalledClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Issue 31: two connections that sent half a request stalled /metrics for
// about 30 s each (the exporter had two threads, each waiting 30 s for the
// rest). Four now leave a scrape a thread of its own.
TEST_F(HostileTest, StalledMetricsConnectionsDoNotBlockAScrape) {
  const int port = testing::MetricsPort(server_->first_line());
  ASSERT_GT(port, 0) << server_->first_line();
  std::vector<std::unique_ptr<StalledClient>> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<StalledClient>(
        port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    ASSERT_TRUE(stalled.back()->connected());
  }
  // Give the exporter time to hand each stalled connection a thread.
  absl::SleepFor(absl::Milliseconds(300));
  const absl::StatusOr<std::string> text =
      testing::HttpGet(port, "/metrics", absl::Seconds(3));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("exposer_scrapes_total"));
}

}  // namespace
}  // namespace memplan
