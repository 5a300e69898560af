#include "server/health.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace memplan::server {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr char kService[] = "memplan.v1.MemoryPlanner";

// A server on 127.0.0.1:0 serving only the health service under test.
class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    health_ = std::make_unique<HealthService>();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(health_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = Health::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    server_.reset();
    health_.reset();
  }

  // Check's answer, or the status code's name when it fails.
  std::string Check(const std::string& service) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status s = stub_->Check(&context, request, &response);
    if (!s.ok()) return "code " + std::to_string(s.error_code());
    return HealthCheckResponse::ServingStatus_Name(response.status());
  }

  // Reads the next Watch message, or "end" when the stream is over.
  static std::string Next(
      grpc::ClientReaderInterface<HealthCheckResponse>* reader) {
    HealthCheckResponse response;
    if (!reader->Read(&response)) return "end";
    return HealthCheckResponse::ServingStatus_Name(response.status());
  }

  std::unique_ptr<grpc::ClientReaderInterface<HealthCheckResponse>> Watch(
      grpc::ClientContext* context, const std::string& service) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(60));
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Watch(context, request);
  }

  // Waits (at most 20 s) until no Watch stream is open on the server.
  bool AllWatchesGone() {
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (health_->open_watches() > 0 &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return health_->open_watches() == 0;
  }

  std::unique_ptr<HealthService> health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckAnswersWhatWasSet) {
  EXPECT_EQ(Check(""), "SERVING");
  EXPECT_EQ(Check(kService), "code 5");  // NOT_FOUND: never set
  health_->SetServing(kService, true);
  EXPECT_EQ(Check(kService), "SERVING");
  health_->SetServing(kService, false);
  EXPECT_EQ(Check(kService), "NOT_SERVING");
  EXPECT_EQ(Check(""), "SERVING");
  health_->SetAllServing(false);
  EXPECT_EQ(Check(""), "NOT_SERVING");
  EXPECT_EQ(Check(kService), "NOT_SERVING");
  // Shutting down: a service coming up (the cache's Redis back) does not
  // make probes see SERVING again during the drain.
  health_->SetServing(kService, true);
  EXPECT_EQ(Check(kService), "NOT_SERVING");
  health_->SetAllServing(true);
  health_->SetServing(kService, true);
  EXPECT_EQ(Check(kService), "SERVING");
}

TEST_F(HealthServiceTest, WatchSendsTheStatusThenEveryChange) {
  grpc::ClientContext context;
  auto reader = Watch(&context, kService);
  EXPECT_EQ(Next(reader.get()), "SERVICE_UNKNOWN");
  health_->SetServing(kService, true);
  EXPECT_EQ(Next(reader.get()), "SERVING");
  health_->SetAllServing(false);
  EXPECT_EQ(Next(reader.get()), "NOT_SERVING");
  context.TryCancel();
  EXPECT_EQ(Next(reader.get()), "end");
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(AllWatchesGone());
}

TEST_F(HealthServiceTest, EndWatchesEndsOpenStreamsAfterTheLastStatus) {
  health_->SetServing(kService, true);
  grpc::ClientContext context, whole;
  auto reader = Watch(&context, kService);
  auto whole_reader = Watch(&whole, "");
  EXPECT_EQ(Next(reader.get()), "SERVING");
  EXPECT_EQ(Next(whole_reader.get()), "SERVING");
  health_->SetAllServing(false);
  health_->EndWatches();
  for (auto* r : {reader.get(), whole_reader.get()}) {
    EXPECT_EQ(Next(r), "NOT_SERVING");
    EXPECT_EQ(Next(r), "end");
    const grpc::Status s = r->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(), "the server is shutting down");
  }
  EXPECT_TRUE(AllWatchesGone());
  // Check still answers until the server stops listening.
  EXPECT_EQ(Check(kService), "NOT_SERVING");
}

TEST_F(HealthServiceTest, WatchOpenedAfterTheEndGetsTheStatusThenEnds) {
  health_->SetServing(kService, true);
  health_->SetAllServing(false);
  health_->EndWatches();
  grpc::ClientContext context;
  auto reader = Watch(&context, kService);
  EXPECT_EQ(Next(reader.get()), "NOT_SERVING");
  EXPECT_EQ(Next(reader.get()), "end");
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// The reason for this service: gRPC's default one keeps a Watch open until
// Shutdown's deadline. Measured against a deadline of a minute, so a slow
// machine cannot make it fail.
TEST_F(HealthServiceTest, EndedWatchesDoNotHoldShutdown) {
  health_->SetServing(kService, true);
  grpc::ClientContext context;
  auto reader = Watch(&context, kService);
  EXPECT_EQ(Next(reader.get()), "SERVING");
  health_->SetAllServing(false);
  health_->EndWatches();
  const auto start = std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(Next(reader.get()), "NOT_SERVING");
  EXPECT_EQ(Next(reader.get()), "end");
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace memplan::server
